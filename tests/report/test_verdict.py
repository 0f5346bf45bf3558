"""The verdict, the answer every report opens with: its numbers are the document's, formatted as the
tables format them."""

import re

from dbtier.report import verdict
from dbtier.report.terminal import fmt


def device(name, profile, reads, r_await, util, writes=0.0, w_await=0.0):
    return {"device": name, "profile": profile,
            "iostat": {"r/s": reads, "w/s": writes, "r_await": r_await, "w_await": w_await, "%util": util}}


def numbers(text: str) -> list[str]:
    return re.findall(r"\d[\d,]*(?:\.\d+)?", text)


def test_a_storage_bound_run_says_so_with_its_figures():
    doc = {"workload": "random-index", "elapsed_s": 1.634, "server_cpu_s": 0.0913, "io_wait_s": 1.5021,
           "devices": [device("ssd", "ssd-sata-mlc", 3.0, 0.2, 0.4), device("hdd", "hdd-sata-7200", 187.3, 5.31, 99.5)]}
    first, second = verdict.run(doc)
    assert "storage-bound" in first
    assert numbers(first) == [fmt(1.634), fmt(1.5021), fmt(0.0913)]
    assert second.startswith("Its busiest device hdd (hdd-sata-7200)")
    assert numbers(second)[-3:] == [fmt(187.3), fmt(5.31), fmt(99.5)]


def test_a_cpu_bound_run_and_a_phased_one():
    doc = {"workload": "update-locality", "elapsed_s": 10.0, "server_cpu_s": 8.0, "io_wait_s": 0.5,
           "phases": [{"phase": "a", "elapsed_s": 2.0, "devices": [device("d", "ram-san", 10, 0.1, 5)]},
                      {"phase": "b", "elapsed_s": 8.0,
                       "devices": [device("d", "ram-san", 1.0, 0.1, 20, writes=300.0, w_await=0.25)]}]}
    first, second = verdict.run(doc)
    assert "CPU-bound: faster storage can shorten it little" in first
    assert "longest phase, b," in second and f"{fmt(300.0)} writes/s at {fmt(0.25)} ms" in second


def test_a_mostly_idle_server_is_bound_by_neither():
    """10 s in which the server's processes waited 0.3 s and computed 0.1 s: not storage-bound, though
    the wait is three times the CPU (a client-bound or --rate-limited run)."""
    doc = {"workload": "pgbench", "elapsed_s": 10.0, "server_cpu_s": 0.1, "io_wait_s": 0.3, "devices": []}
    (first,) = verdict.run(doc)
    assert "bound by neither storage nor the server's CPU" in first and "storage-bound" not in first
    doc.update(server_cpu_s=0.0, io_wait_s=0.0)
    assert "bound by neither" in verdict.run(doc)[0]


def test_a_log_device_is_busy_with_its_flushes():
    """A commit's WAL write is cached at once; its flush is what the device spends its time on."""
    log = device("log", "hdd-sas-15k", 0.0, 0.0, 84.0, writes=689.0, w_await=0.06)
    log["iostat"].update({"f/s": 487.0, "f_await": 1.62})
    clause = verdict._device_clause(log)
    assert f"{fmt(487.0)} flushes/s at {fmt(1.62)} ms each" in clause and "writes/s" not in clause
    log["iostat"].update({"w_await": 0.5})  # 345 ms/s of writes against 789 of flushes: both named
    assert verdict._device_clause(log).index("flushes/s") < verdict._device_clause(log).index("writes/s")


def test_a_capped_volume_says_which_limit_held_it():
    """The limit that held the volume longest is named with its rate and share; one under 5% is not."""
    vol = device("data", "ebs-gp3", 2991.0, 2.6, 99.9)
    vol["limits"] = [{"limit": "iops", "rate": 3000.0, "unit": "IOPS", "held_s": 57.6, "held_pct": 96.0,
                      "requests": 171_000},
                     {"limit": "throughput", "rate": 131.07, "unit": "MB/s", "held_s": 1.0, "held_pct": 1.7,
                      "requests": 12}]
    doc = {"workload": "pgbench", "elapsed_s": 60.0, "server_cpu_s": 3.0, "io_wait_s": 400.0, "devices": [vol]}
    lines = verdict.run(doc)
    assert lines[2] == (f"The volume data was limited by its {fmt(3000.0)}-IOPS cap for {fmt(96.0)}% of the time (171,000 "
                        "requests waited on it).")
    vol["limits"] = [{"limit": "iops_credits", "rate": 300.0, "unit": "IOPS", "held_s": 30.0, "held_pct": 50.0,
                      "requests": 9000}]
    assert "its 300-IOPS baseline once its burst credits were spent for 50.0% of the time" in verdict.run(doc)[2]
    vol["limits"] = [{"limit": "iops", "rate": 3000.0, "unit": "IOPS", "held_s": 1.0, "held_pct": 1.7, "requests": 5}]
    assert len(verdict.run(doc)) == 2


def test_every_limit_the_library_counts_has_words():
    from dbtier.devices import native
    from dbtier.measure import limits
    assert set(native.DEVICE_LIMITS) == set(limits.RATES)


def test_a_comparison_names_the_fastest_layout():
    results = [{"elapsed_s": 20.8}, {"elapsed_s": 5.2}, {"elapsed_s": 1.0}]
    lines = verdict.compare(["hdd", "split", "ssd"], results, [1.0, 4.0, 20.8], "elapsed s")
    assert lines[0] == f"On ssd this workload ran {fmt(20.8)}x faster than on hdd (elapsed s: {fmt(1.0)} against {fmt(20.8)})."
    assert lines[1] == f"The others: split {fmt(4.0)}x."
    assert verdict.compare(["a", "b"], results[:2], [1.0, 0.5], "elapsed s")[0].startswith("No layout beat a")


def test_a_reproduction_counts_what_agrees():
    figs = [{"article_value": 21.0, "our_value": 23.99, "agrees": True},
            {"article_value": 2.17, "our_value": 4.5, "agrees": False},
            {"article_value": None, "our_value": None, "agrees": None}]
    line = verdict.reproduce({"articles": [{"figures": figs}]})[0]
    assert line.startswith("1 of 3 headline figures agree") and "1 of the 2 numeric ones are within a factor of 2" in line


def test_an_oltp_run_gives_its_rate():
    doc = {"workload": "pgbench", "elapsed_s": 30.0, "server_cpu_s": 20.0, "io_wait_s": 15.0,
           "metrics": {"tps": 1234.5}, "devices": [device("d", "hdd-sata-7200", 10.0, 5.0, 40.0)]}
    first = verdict.run(doc)[0]
    assert f"took {fmt(30.0)} s at {fmt(1234.5)} transactions per second and was bound by both" in first
    doc["metrics"] = {"tpm": 5000.0, "tps": None}
    assert f"at {fmt(5000.0)} transactions per minute" in verdict.run(doc)[0]


def test_a_reproduction_on_two_engines_counts_each_and_either():
    """A figure within 2x on one engine counts once for "one or the other"."""
    def fig(claim, ours):
        return {"claim": claim, "article_value": 2.0, "our_value": ours, "agrees": abs(ours / 2.0 - 1) < 0.35}
    doc = {"engines": ["postgres", "mariadb"],
           "articles": [{"seed": "003", "engine": "postgres", "figures": [fig("x", 2.1), fig("y", 8.0), fig("z", 9.0)]},
                        {"seed": "003", "engine": "mariadb", "figures": [fig("x", 5.0), fig("y", 1.2), fig("z", 0.1)]}]}
    lines = verdict.reproduce(doc)
    assert lines[0].startswith("PostgreSQL: 1 of 3 headline figures agree") and "1 of the 3 numeric" in lines[0]
    assert lines[1].startswith("MariaDB: 0 of 3 headline figures agree") and "1 of the 3 numeric" in lines[1]
    assert lines[2] == "On one engine or the other: 2 of the 3 figures with a number are within a factor of 2."
