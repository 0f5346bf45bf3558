"""Seed 002's workloads on a real server at tiny scale: the OLTP mix with TPC-C's consistency
conditions and amcheck holding afterwards, and the build's phases with the dump written to, and the
restore read from, the dump device."""

import json

import pytest

from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import LabOptions
from dbtier.report import jsonout, schema
from dbtier.devices.spec import parse_all
from dbtier.workloads import registry, tpcc_schema
from dbtier.workloads.base import QuietProgress
from dbtier.experiments.runner import run_workload
from dbtier.workloads.tpcc_driver import TYPES, last_name

TINY = {"items": 2000, "customers": 120}


def run(workspace, name, devices, places=(), **params):
    reqs = parse_all(list(devices))
    return run_workload(registry.get(name)(**TINY, **params), reqs,
                        placement.parse(list(places), [r.name for r in reqs]), LabOptions(workspace=workspace),
                        QuietProgress(), say=lambda _l: None)


def test_last_names_are_the_specifications_syllables():
    assert last_name(0) == "BARBARBAR" and last_name(371) == "PRICALLYOUGHT" and last_name(999) == "EINGEINGEING"


@pytest.fixture(scope="module")
def oltp(module_shm_dir):
    return run(module_shm_dir, "oltp", ["data=ram-san", "log=ram-san"], ["wal=log"], clients=3, duration=4, warmup=1)


def test_oltp_runs_the_mix_and_stays_consistent(oltp):
    m = oltp["metrics"]
    assert m["committed"] > 200 and not any(oltp["checks"]["consistency"].values())
    assert oltp["checks"]["amcheck"] == "clean"
    # The 45/43/4/4/4 mix, within sampling error of a few hundred draws.
    assert abs(m["mix_pct"]["new_order"] - 45) < 8 and abs(m["mix_pct"]["payment"] - 43) < 8
    for t in TYPES:
        assert m["latency"][t]["count"] > 0 and 0 < m["latency"][t]["p50_ms"] <= m["latency"][t]["p99_ms"]
    assert oltp["rates"]["nopm"] == pytest.approx(m["new_orders"] * 60 / 4)  # over the driver's 4 s
    assert m["driver"] == "pgbench" and m["rolled_back"] >= 0
    # Throughput over time: every transaction pgbench logged, counted in the second it ended.
    assert sum(m["transactions_per_s"]) == m["committed"] + m["rolled_back"]
    assert 3 <= len(m["transactions_per_s"]) <= 5
    assert oltp["rates"]["client_cpu_us_per_txn"] > 0 and oltp["rates"]["server_cpu_ms_per_txn"] > 0


def test_the_python_terminals_run_the_same_mix(module_shm_dir):
    r = run(module_shm_dir, "oltp", ["data=ram-san"], clients=2, duration=3, warmup=0, driver="python")
    m = r["metrics"]
    assert m["driver"] == "python" and m["committed"] > 100 and not any(r["checks"]["consistency"].values())
    assert all(m["latency"][t]["count"] > 0 for t in TYPES)


def test_oltp_commits_flush_the_log_on_its_own_device(oltp):
    io = {(o["object"], o["device"]): o for o in oltp["object_io"]}
    wal = io[("WAL", "log")]
    # Each commit waits for its WAL to be flushed: about one flush per committed write transaction,
    # fewer when commits group (several backends' records in one flush).
    writers = sum(oltp["metrics"]["latency"][t]["count"] for t in ("new_order", "payment", "delivery"))
    assert 0.2 * writers <= wal["flushes"] <= 1.5 * writers
    assert not [k for k in io if k[0] == "WAL" and k[1] != "log"]
    assert ("stock", "data") in io or ("order_line", "data") in io


def test_build_dumps_to_and_restores_from_the_dump_device(module_shm_dir):
    r = run(module_shm_dir, "build", ["db=ram-san", "dumpdev=ram-san"], ["dump=dumpdev"], jobs=2)
    phases = {ph["phase"]: ph for ph in r["phases"]}
    assert list(phases) == ["create database", "load", "create indexes", "dump", "restore"]
    rows = phases["load"]["metrics"]["rows_per_table"]
    assert rows["stock"] == 2000 and rows["customer"] == 1200 and rows["new_order"] == 10 * (120 - 84)
    dev = {ph: {d["device"]: d["counters"] for d in phases[ph]["devices"]} for ph in phases}
    dump_bytes = phases["dump"]["metrics"]["dump_bytes"]
    # pg_dump's files go to the dump device (written back when it syncs them), read from there again
    assert dev["dump"]["dumpdev"]["write_bytes"] >= 0.9 * dump_bytes
    assert dev["restore"]["dumpdev"]["read_bytes"] >= 0.9 * dump_bytes
    assert dev["load"]["dumpdev"]["write_bytes"] == 0 and dev["load"]["db"]["write_bytes"] > 0
    # the dump reads the built database's tables, named from its own catalog
    dumped = {o["object"] for o in phases["dump"]["object_io"] if o["reads"]}
    assert "tpcc_build.stock" in dumped and "tpcc_build.order_line" in dumped
    assert not any(r["checks"]["consistency"].values()) and r["checks"]["amcheck"] == "clean"
    assert phases["restore"]["metrics"]["rows"] == sum(rows.values())
    # each phase's rate under its published key, and the whole document as the schema has it
    assert phases["dump"]["rates"]["dump_mb_per_s"] > 0 and phases["load"]["rates"]["rows_per_s"] > 0
    assert not schema.problems(json.loads(jsonout.dumps(r)))


def test_consistency_checks_can_fail(module_shm_dir):
    """The conditions are real queries: a broken district shows as a violation."""
    from dbtier.engines.postgres.lab import Lab
    with Lab(parse_all(["d=ram-san"]), placement.parse([], ["d"]), LabOptions(workspace=module_shm_dir),
             say=lambda _l: None) as lab:
        with lab.connect() as conn:
            from dbtier.workloads.oltp import load
            load(lab.handle, conn, tpcc_schema.Scale(1, 500, 30), QuietProgress())
            assert not any(tpcc_schema.check_consistency(conn).values())
            conn.execute("UPDATE district SET d_ytd = d_ytd + 1 WHERE d_id = 3")
            conn.execute("DELETE FROM order_line WHERE ol_o_id = 5 AND ol_d_id = 2 AND ol_number = 1")
            conn.execute("DELETE FROM history WHERE h_d_id = 7 AND h_c_id = 1")  # a payment's row lost
            bad = tpcc_schema.check_consistency(conn)
    assert bad["1: w_ytd = sum(d_ytd)"] == 1 and bad["4: sum(o_ol_cnt) = order lines"] == 1
    assert bad["8: w_ytd = sum(h_amount)"] == 1  # the warehouse's year-to-date: d_ytd's extra 1 and the lost 10.00
    assert bad["9: d_ytd = sum(h_amount)"] == 2  # districts 3 and 7
