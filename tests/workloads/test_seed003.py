"""Seed 003's workloads on a real server at tiny scale: every insert and update counted and checked,
amcheck clean, the merge join's plan and its sort spilling to the temp device, and what each phase
read growing as the updates' locality worsens."""

import pytest

from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import LabOptions
from dbtier.units import parse_option_size
from dbtier.devices.spec import parse_all
from dbtier.workloads import registry
from dbtier.workloads.base import QuietProgress
from dbtier.experiments.runner import run_workload
from dbtier.workloads.update_locality import expected_updates


def run(shm_dir, name, devices=("ssd=ram-san",), places=(), cache="32MB", page_cache=None, **params):
    reqs = parse_all(list(devices))
    return run_workload(registry.get(name)(**params), reqs, placement.parse(list(places), [r.name for r in reqs]),
                        LabOptions(cache_bytes=parse_option_size(cache, "--cache"), workspace=shm_dir,
                                   page_cache_bytes=parse_option_size(page_cache, "--page-cache") if page_cache else None),
                        QuietProgress(),
                        say=lambda _l: None)


def test_insert_loop_inserts_every_row_in_one_transaction(shm_dir):
    r = run(shm_dir, "insert-loop", rows=20000)
    assert r["metrics"]["inserts"] == 20000 and r["checks"] == {"rows": 20000, "amcheck": "clean"}
    io = {o["object"]: o for o in r["object_io"]}
    # Rows go to the cache; the device sees the WAL, written as its buffers fill and synced at the commit.
    assert io["WAL"]["writes"] > 0 and io["WAL"]["flushes"] >= 1
    wal = r["pg_stat_wal"]
    assert wal["wal_records"] >= 2 * 20000  # a heap and an index record per row
    assert r["rates"]["inserts_per_s"] > 0


def test_expected_updates_follow_the_seeds_arithmetic():
    # 1,000 rows, i up to 100: test 1 negates 1..100; test 2 finds 10*i except 10..100 (negated by test 1);
    # test 3 finds 100*i-j <= 1000 (i <= 10) except the multiples of 10 that test 2 took and 1..100.
    got = expected_updates(1000, 100)
    assert got[1] == 100 and got[2] == 90
    assert got[3] == len({100 * i - j for j in range(1, 11) for i in range(1, 11) if 100 * i - j > 100
                          and (100 * i - j) % 10 != 0})


def test_update_locality_counts_every_update_and_reads_more_as_rows_spread(shm_dir):
    r = run(shm_dir, "update-locality", cache="1MB", rows=20000)
    phases = {ph["phase"]: ph for ph in r["phases"]}
    assert list(phases) == ["a=i", "a=10*i", "a=100*i-j"]
    want = expected_updates(20000, 2000)
    assert [ph["metrics"]["rows_updated"] for ph in r["phases"]] == [want[1], want[2], want[3]]
    assert r["checks"]["negated"] == sum(want.values()) and r["checks"]["amcheck"] == "clean"

    def table_reads(ph):
        return sum(o["reads"] for o in ph["object_io"] if o["object"] in ("a_perf", "a_perf_pkey"))
    # Contiguous keys share pages; every tenth row touches every page; ten passes touch them ten times.
    assert table_reads(phases["a=10*i"]) > 3 * table_reads(phases["a=i"])
    assert table_reads(phases["a=100*i-j"]) > table_reads(phases["a=10*i"])
    assert r["elapsed_s"] == pytest.approx(sum(ph["elapsed_s"] for ph in r["phases"]))


def test_merge_join_sorts_to_the_temp_device(shm_dir):
    r = run(shm_dir, "merge-join", devices=("data=ram-san", "tmp=ram-san"), places=("temp=tmp",),
            page_cache="256kB", departments=200, employees=100, work_mem="64kB")
    assert r["metrics"]["pairs"] == 20000 and r["metrics"]["temp_bytes"] > 0
    io = {(o["object"], o["device"]): o for o in r["object_io"]}
    # The sort's runs are written to, and read back from, the temp device only: with a small page
    # cache they reach it.
    temp = io[("temp files", "tmp")]
    assert temp["writes"] > 0 and temp["reads"] > 0
    assert not [k for k in io if k[0] == "temp files" and k[1] != "tmp"]
    assert io[("employee", "data")]["reads"] > 0


def test_mutating_workloads_refuse_hot_and_cross_caches(shm_dir):
    from dbtier.errors import UserError
    with pytest.raises(UserError, match="supports cold"):
        run_workload(registry.get("insert-loop")(rows=10), parse_all(["d=ram-san"]), placement.parse([], ["d"]),
                     LabOptions(workspace=shm_dir), QuietProgress(), cache_state="hot")
