"""Where layouts differ: each phase and each transaction type against the first layout, and the one
that differs most among those that weigh enough (hand-built results, the figures known)."""

import pytest

from dbtier.experiments.breakdown import breakdown
from dbtier.report import compareview, verdict


def phased(**elapsed):
    return {"elapsed_s": sum(elapsed.values()),
            "phases": [{"phase": name, "elapsed_s": s, "metrics": {}} for name, s in elapsed.items()]}


def test_the_phase_a_layout_speeds_up_is_named_though_a_long_one_hides_it():
    """A 60 s report on both layouts hides the 6 s phase the WAL's device made 1.5x faster; a tiny
    phase 10x faster is too small to be named (under 2% of the run)."""
    base = phased(report=60.0, pay=6.0, tiny=0.5)
    wal = phased(report=60.5, pay=4.0, tiny=0.05)
    parts = breakdown(["base", "wal"], [base, wal])
    pay = next(r for r in parts["phases"] if r["phase"] == "pay")
    assert pay["layouts"][1]["speedup"] == pytest.approx(1.5) and pay["layouts"][0]["speedup"] == 1.0
    assert pay["share"] == pytest.approx(6 / 66.5)
    assert parts["largest"] == {"phase": "pay", "script": None, "layout": "wal", "speedup": pytest.approx(1.5),
                                "figure": "elapsed s"}
    line = verdict.compare(["base", "wal"], [base, wal], [1.0, 66.5 / 64.55], "elapsed s", parts["largest"])[-1]
    assert line == "Where the layouts differ most: phase pay, 1.50x faster on wal than on base."
    table = compareview.phase_data(["base", "wal"], parts)
    assert table.rows[1] == ["pay", "9%", "6.00 s", "4.00 s (1.50x)"]


def test_transaction_types_by_their_mean_latency():
    def run(tps, payment_ms, order_ms, count=500):
        return {"phase": "run", "elapsed_s": 10.0, "metrics": {"tps": tps, "scripts": {
            "payment": {"count": count, "mean_ms": payment_ms, "p50_ms": payment_ms, "p95_ms": 2 * payment_ms,
                        "p99_ms": 3 * payment_ms},
            "order": {"count": count, "mean_ms": order_ms, "p50_ms": order_ms, "p95_ms": order_ms, "p99_ms": order_ms}}}}
    parts = breakdown(["hdd", "ssd"], [run(100, 8.0, 2.0), run(120, 2.0, 1.8)])
    (phase,) = parts["phases"]
    assert phase["figure"] == "tps" and phase["layouts"][1]["speedup"] == pytest.approx(1.2)
    payment = next(r for r in parts["scripts"] if r["script"] == "payment")
    assert payment["layouts"][1]["speedup"] == pytest.approx(4.0) and payment["layouts"][1]["tps"] == 50.0
    assert parts["largest"]["script"] == "payment" and parts["largest"]["speedup"] == pytest.approx(4.0)
    rows = compareview.script_data(["hdd", "ssd"], parts).rows
    assert rows[0][:2] == ["payment", "hdd"] and rows[1][0] == "" and rows[1][-1] == "4.00x"
    line = verdict.compare(["hdd", "ssd"], [{"elapsed_s": 10.0, "metrics": {"tps": 100}},
                                            {"elapsed_s": 10.0, "metrics": {"tps": 120}}], [1.0, 1.2], "tps",
                           parts["largest"])[-1]
    assert line == "Where the layouts differ most: transaction payment, 4.00x faster on ssd than on hdd (its mean latency)."


def test_a_slower_layout_is_said_slower_and_a_one_phase_run_names_nothing_more():
    parts = breakdown(["a", "b"], [phased(load=10.0, scan=10.0), phased(load=10.0, scan=25.0)])
    assert parts["largest"]["phase"] == "scan" and parts["largest"]["speedup"] == pytest.approx(0.4)
    assert "2.50x slower on b" in verdict._largest_clause(parts["largest"], "a")
    one = breakdown(["a", "b"], [{"elapsed_s": 2.0, "metrics": {}}, {"elapsed_s": 1.0, "metrics": {}}])
    assert one["largest"] is None and compareview.phase_data(["a", "b"], one) is None


def test_repeated_runs_within_the_spread_are_no_difference_measured():
    """Three runs of each layout: b's range overlaps a's, so no difference is measured though its
    median is faster; c's lies apart, 2x. Phases alike: b's 'pay' is never named as the difference."""
    from dbtier.experiments import compare
    from dbtier.experiments.comparison import median_run

    a = [phased(scan=10.0, pay=5.0), phased(scan=10.4, pay=5.2), phased(scan=9.8, pay=4.9)]
    b = [phased(scan=9.5, pay=4.8), phased(scan=9.9, pay=5.0), phased(scan=10.1, pay=4.7)]
    c = [phased(scan=5.0, pay=2.5), phased(scan=5.2, pay=2.4), phased(scan=4.9, pay=2.6)]
    spread = compare.spread([a, b, c])
    assert spread[0]["median"] == 15.0 and (spread[0]["min"], spread[0]["max"]) == pytest.approx((14.7, 15.6))
    assert spread[1]["within_first"] is True and spread[2]["within_first"] is False
    medians = [median_run([(r, str(i)) for i, r in enumerate(runs)])[0] for runs in (a, b, c)]
    assert [m["elapsed_s"] for m in medians] == pytest.approx([15.0, 14.8, 7.5])
    parts = breakdown(["a", "b", "c"], medians, [a, b, c])
    pay = next(r for r in parts["phases"] if r["phase"] == "pay")
    assert pay["layouts"][1]["within_spread"] is True and pay["layouts"][2]["within_spread"] is False
    assert (pay["layouts"][2]["min"], pay["layouts"][2]["max"]) == pytest.approx((2.4, 2.6))
    assert parts["largest"]["layout"] == "c"
    lines = verdict.compare(["a", "b", "c"], medians, compare.speedups(medians), "elapsed s", parts["largest"], spread)
    assert lines[0].startswith("On c this workload ran 2.00x faster than on a, beyond the spread of 3 runs each")
    assert lines[1] == ("No difference measured between b and a: elapsed s 14.8 (14.3 to 14.9) against 15.0 (14.7 to "
                        "15.6), within the spread of 3 runs each.")
    row = compareview.phase_data(["a", "b", "c"], parts).rows[1]
    assert row[3].endswith("(none measured)") and row[4] == "2.60 s [2.40 to 2.60] (1.92x)"  # c's median run's


def test_a_replays_statement_classes_are_its_transaction_types():
    def run(ms):
        return {"phase": "replay", "elapsed_s": 5.0, "metrics": {"classes": [
            {"class_id": 12, "count": 300, "mean_ms": ms, "p50_ms": ms, "p95_ms": ms, "p99_ms": 2 * ms}]}}
    parts = breakdown(["disk", "flash"], [run(4.0), run(1.0)])
    (row,) = parts["scripts"]
    assert row["script"] == "class 12" and row["layouts"][1]["speedup"] == pytest.approx(4.0)
    assert row["layouts"][1]["tps"] == 60.0 and parts["largest"]["script"] == "class 12"
