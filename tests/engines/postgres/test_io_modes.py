"""The I/O modes and cache states on real servers, against the interposer's counters: direct I/O
bypasses the emulated page cache, buffered I/O hits it, dsync writes go through to the device with a
flush each; cold, cross and hot cache states (seed 001) in that order of device time."""

import pytest

from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import Lab, LabOptions
from dbtier.devices.spec import parse_all
from dbtier.workloads import registry
from dbtier.workloads.base import QuietProgress
from dbtier.experiments.runner import run_workload

ROWS = 1500  # 12 MB: the database cache (8 MB) cannot hold it, the page cache (32 MB) can


def run(shm_dir, workload: str, io_mode: str, cache_state: str = "cold", device: str = "ssd-sata-mlc", **params):
    cls = registry.get(workload)
    return run_workload(cls(rows=ROWS, **params), parse_all([f"d={device}"]), placement.parse([], ["d"]),
                        LabOptions(cache_bytes=8 << 20, page_cache_bytes=32 << 20, io_mode=io_mode, workspace=shm_dir),
                        QuietProgress(), say=lambda _l: None, cache_state=cache_state)


@pytest.fixture(scope="module")
def states(tmp_path_factory):
    from pathlib import Path
    import shutil
    import tempfile

    ws = Path(tempfile.mkdtemp(prefix="dbtier-test-", dir="/dev/shm"))
    ws.chmod(0o755)  # the servers' user passes through
    try:
        yield {s: run(ws, "random-index", "buffered", s) for s in ("cold", "cross", "hot")}
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_cold_is_io_bound_hot_is_not_cross_between(states):
    cold, cross, hot = (states[s] for s in ("cold", "cross", "hot"))
    reads = {s: r["devices"][0]["counters"]["reads"] for s, r in states.items()}
    # cold: every row's page comes from the device; the run is I/O-bound
    assert reads["cold"] >= ROWS and cold["io_wait_s"] > 0.5 * (cold["elapsed_s"] - cold["host_steal_s"])
    table = next(o for o in cold["object_io"] if o["object"] == "t")
    assert table["cached_reads"] < 0.2 * (table["reads"] + table["cached_reads"])
    # hot: everything is in the database cache or the page cache: no device reads at all
    assert reads["hot"] == 0 and hot["io_wait_s"] == 0
    assert hot["devices"][0]["page_cache"]["hit_pct"] == 100 or hot["devices"][0]["page_cache"]["hit_pages"] == 0
    # cross: the warm-up looked up another half of the keys, so about half the rows are cached
    assert 0.3 * reads["cold"] < reads["cross"] < 0.7 * reads["cold"]
    # the device time (the model's, not the host's timing) follows: none hot, less crossed than cold
    assert hot["io_wait_s"] < cross["io_wait_s"] < cold["io_wait_s"]
    assert all(r["metrics"]["found"] == ROWS for r in states.values())


def test_direct_bypasses_the_page_cache_buffered_rereads_from_it(shm_dir):
    # Three scans of a 12 MB table through an 8 MB database cache: each scan reads the whole table.
    direct = run(shm_dir, "table-scan", "direct", scans=3, device="hdd-sata-7200")
    buffered = run(shm_dir, "table-scan", "buffered", scans=3, device="hdd-sata-7200")
    table = ROWS * 8192
    d, b = direct["devices"][0], buffered["devices"][0]
    # buffered reads under direct I/O: only files PostgreSQL reads through stdio (the relation cache's
    # init files, a few pages each, read by every new backend), never the table
    other = sum(o["read_bytes"] for o in direct["object_io"] if o["kind"] == "other")
    assert 0 < d["page_cache"]["miss_pages"] * 4096 <= other + (64 << 10)
    # every scan reads the table, less what one scan's buffer ring left cached for the next (< 1 MiB)
    t_direct = next(o for o in direct["object_io"] if o["object"] == "t")
    assert 3 * table - 2 * (1 << 20) <= t_direct["read_bytes"] <= 3 * table
    assert t_direct["cached_reads"] == 0
    # buffered: the device reads the table once; the second and third scans find it in memory
    assert table <= b["counters"]["read_bytes"] <= 1.2 * table
    assert b["page_cache"]["hit_pct"] > 60 and b["page_cache"]["readahead_mb"] > 5
    assert buffered["elapsed_s"] < direct["elapsed_s"]  # seed 004: buffered reads win a repeated pass


def test_dsync_writes_through_with_a_flush_each(shm_dir):
    """Seed 004: synchronous writes far slower than direct I/O for a write-heavy command."""
    figures = {}
    for mode in ("direct", "buffered", "dsync"):
        with Lab(parse_all(["d=hdd-sata-7200"]), placement.parse([], ["d"]),
                 LabOptions(cache_bytes=8 << 20, page_cache_bytes=32 << 20, io_mode=mode, workspace=shm_dir),
                 say=lambda _l: None) as lab:
            with lab.connect() as conn:
                conn.execute("CREATE TABLE w (id int, pad text)")
            lab.restart_cold()
            with lab.measure() as m:
                with lab.connect() as conn:  # 300 pages of new rows, then a checkpoint writes them
                    conn.execute("INSERT INTO w SELECT g, repeat('x', 200) FROM generate_series(1, 10000) g")
                    conn.execute("CHECKPOINT")
            figures[mode] = m.result
    c = {mode: r["devices"][0]["counters"] for mode, r in figures.items()}
    # dsync: every write reaches the device at once and carries a flush
    # dsync: every write of a database file reaches the device at once and carries a flush. Counted per
    # relation, whose writes are single pages; the WAL's segment zero-fill is one call the page cache
    # sends as several requests (and one flush), and files outside the scope (pg_internal.init,
    # statistics) are written back without one.
    objects = {o["object"]: o for o in figures["dsync"]["object_io"]}
    relations = [o for o in objects.values() if o["kind"] in ("table", "index", "catalog") and o["writes"]]
    assert sum(o["writes"] for o in relations) >= 300
    assert all(o["flushes"] >= o["writes"] for o in relations), relations
    assert objects["WAL"]["flushes"] > 0 and c["dsync"]["flushes"] > 0.9 * c["dsync"]["writes"]
    assert figures["dsync"]["devices"][0]["page_cache"]["writeback_mb"] > 4
    # buffered: writes wait in the page cache and go out coalesced at fsync: fewer, larger requests
    assert c["buffered"]["writes"] < c["direct"]["writes"]
    assert c["buffered"]["write_bytes"] / c["buffered"]["writes"] > c["direct"]["write_bytes"] / c["direct"]["writes"]
    assert figures["dsync"]["elapsed_s"] > 2 * figures["direct"]["elapsed_s"]


@pytest.mark.parametrize("method, carries_flush", [("fdatasync", False), ("fsync", False),
                                                   ("open_datasync", True), ("open_sync", True)])
def test_wal_sync_methods(shm_dir, method, carries_flush):
    """The WAL sync methods as the interposer charges them: the open_* methods open the WAL O_DSYNC /
    O_SYNC, so each WAL write carries a device flush; the others write, then flush once per commit."""
    from dbtier.engines.postgres.settings import parse_sets

    with Lab(parse_all(["d=ssd-sata-mlc"]), placement.parse([], ["d"]),
             LabOptions(cache_bytes=8 << 20, io_mode="buffered", workspace=shm_dir, sets=parse_sets([f"wal_sync_method={method}"])),
             say=lambda _l: None) as lab:
        with lab.connect() as conn:
            conn.execute("CREATE TABLE c (id int)")
            assert conn.execute("SHOW wal_sync_method").fetchone()[0] == method
        with lab.measure() as m:
            with lab.connect() as conn:
                for i in range(50):  # 50 commits, each waiting for its WAL to be durable
                    conn.execute("INSERT INTO c VALUES (%s)", (i,))
    c = m.result["devices"][0]["counters"]
    assert c["flushes"] >= 50
    if carries_flush:  # every WAL write went through with its own flush
        wal = next(o for o in m.result["object_io"] if o["object"] == "WAL")
        assert wal["writes"] >= 50 and wal["flushes"] >= wal["writes"] * 0.9
    else:  # WAL writes sit in the page cache until fdatasync/fsync writes them back and flushes
        assert m.result["devices"][0]["page_cache"]["writeback_mb"] > 0
