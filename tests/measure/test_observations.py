"""The observation helpers on their own: wait-event classes, pg_stat_io deltas, object naming."""

import numpy as np

from dbtier.measure import objects, pgstats, waits
from dbtier.measure.trace import RECORD


def test_idle_sessions_and_idle_background_processes_are_not_database_time():
    assert waits.classify("client backend", "Client", "ClientRead", "idle") is None
    assert waits.classify("checkpointer", "Activity", "CheckpointerMain", None) is None
    assert waits.classify("client backend", None, None, "active") == waits.CPU
    assert waits.classify("client backend", "IO", "DataFileRead", "active") == "IO:DataFileRead"
    assert waits.classify("io worker", "IO", "DataFileRead", None) == "IO:DataFileRead"
    assert waits.classify("client backend", "Lock", "transactionid", "active") == "Lock:transactionid"


def test_top_events_rank_measured_cpu_with_the_waits_and_count_io_from_pg_stat_io():
    sampled = {"events": [{"event": "IO:DataFileRead", "waits": 3, "time_s": 6.0, "samples": 300},
                          {"event": "CPU", "waits": None, "time_s": 1.0, "samples": 50},
                          {"event": "Lock:tuple", "waits": 4, "time_s": 0.5, "samples": 25}]}
    stat_io = [{"object": "relation", "reads": 900.0}, {"object": "wal", "reads": 5.0}]
    top = waits.top_events(sampled, server_cpu_s=2.0, elapsed_s=10.0, stat_io=stat_io)
    assert [e["event"] for e in top] == ["IO:DataFileRead", "CPU time (measured)", "Lock:tuple"]
    assert top[0]["waits"] == 900 and top[0]["elapsed_pct"] == 60.0
    assert top[2]["waits"] == 4  # no pg_stat_io count: the sampled episodes


def test_pg_stat_io_delta_keeps_changed_rows_only():
    row = lambda n: [float(n)] * len(pgstats.IO_COUNTS)  # noqa: E731
    before = {"io": {("client backend", "relation", "normal"): row(1), ("checkpointer", "wal", "normal"): row(2)},
              "wal": [1.0, 0.0, 100.0, 0.0]}
    after = {"io": {("client backend", "relation", "normal"): row(4), ("checkpointer", "wal", "normal"): row(2)},
             "wal": [3.0, 1.0, 250.0, 0.0]}
    d = pgstats.delta(before, after)
    assert len(d["io"]) == 1 and d["io"][0]["reads"] == 3.0 and d["io"][0]["backend_type"] == "client backend"
    assert d["wal"] == {"wal_records": 2.0, "wal_fpi": 1.0, "wal_bytes": 150.0, "wal_buffers_full": 0.0}


def test_object_io_attributes_each_record_to_its_object():
    files = {0: "/x/ts/PG_18_202506291/5/100", 1: "/x/pgdata/pg_wal/000000010000000000000001",
             2: "/x/ts/PG_18_202506291/5/100_fsm", 3: "/x/ts/PG_18_202506291/5/999", 4: "/x/pgdata/base/pgsql_tmp/t1.0"}
    rec = np.zeros(8, dtype=RECORD)
    # kind (1 request, 2 call), file, dev, op, offset, len, flags, submit, complete
    spec = [(1, 0, 0, 1, 0, 8192, 0, 0, 5000), (1, 0, 0, 1, 8192, 8192, 0, 10, 20),
            (2, 0, 0, 1, 0, 8192, 0x10, 30, 30), (2, 0, 0, 1, 8192, 8192, 0, 5, 20),  # a page-cache hit; a miss
            (1, 1, 1, 2, 0, 8192, 0, 40, 60), (1, 2, 0, 1, 0, 8192, 0, 70, 80), (1, 3, 0, 2, 0, 8192, 0, 90, 100),
            (1, 4, 1, 2, 0, 65536, 0x20, 100, 300)]
    for i, (k, f, d, op, off, ln, fl, s, c) in enumerate(spec):
        rec[i]["kind"], rec[i]["file"], rec[i]["dev"], rec[i]["op"], rec[i]["offset"], rec[i]["len"] = k, f, d, op, off, ln
        rec[i]["flags"], rec[i]["submit_ns"], rec[i]["complete_ns"] = fl, s, c
    names = {(5, 100): ("orders", "table")}
    rows = {r["object"]: r for r in objects.object_io(rec, files, ["hdd", "ssd"], names)}
    assert rows["orders"]["reads"] == 2 and rows["orders"]["cached_reads"] == 1
    assert rows["orders"]["sequential_pct"] == 50.0 and rows["orders"]["device_s"] == 5010 / 1e9
    assert rows["WAL"]["device"] == "ssd" and rows["WAL"]["writes"] == 1
    assert rows["orders [fsm]"]["reads"] == 1
    assert rows["relfilenode 999 (dropped)"]["writes"] == 1
    assert rows["temp files"]["async"] == 1 and rows["temp files"]["write_bytes"] == 65536


def _object_io_as_python_counted_it(records, files, devices, names):
    """The rule as measure/objects.py counted it in Python before the count moved to C (objio.c):
    (object, device) -> its figures, in the order that rule met them (files in the order first met,
    each file's devices in order), which the C count must still give."""
    from dbtier.devices import native
    from dbtier.measure import trace

    found = {}
    for f in dict.fromkeys(int(x) for x in records["file"]):
        rec = records[records["file"] == f]
        rec = rec[np.argsort(rec["submit_ns"], kind="stable")]
        path = files.get(f, "")
        name, _kind = objects._name(path, native.pg_path(path), names)
        for dev in np.unique(rec["dev"]):
            r = rec[rec["dev"] == dev]
            req, call = r[r["kind"] == trace.REQUEST], r[r["kind"] == trace.CALL]
            reads, writes, flushes = (req[req["op"] == op] for op in (trace.READ, trace.WRITE, trace.FLUSH))
            moved = req[(req["op"] == trace.READ) | (req["op"] == trace.WRITE)]
            counts = np.array([len(reads), reads["len"].sum(), len(writes), writes["len"].sum(), len(flushes),
                               ((call["op"] == trace.READ) & ((call["flags"] & objects.PAGE_CACHE) != 0)).sum(),
                               ((moved["flags"] & objects.ASYNC) != 0).sum(),
                               (moved["offset"][1:] == moved["offset"][:-1] + moved["len"][:-1]).sum()], dtype=np.int64)
            busy = np.r_[moved["complete_ns"].astype(np.int64) - moved["submit_ns"].astype(np.int64),
                         flushes["complete_ns"].astype(np.int64) - flushes["submit_ns"].astype(np.int64)]
            key = (name, devices[dev] if dev < len(devices) else str(dev))
            total, device_s = found.get(key, (0, 0.0))
            found[key] = (total + counts, device_s + float(np.sum(busy)) / 1e9)
    return found


def test_object_io_counts_as_the_python_rule_did():
    """Random records, out of time order, with ties, runs of sequential transfers, page-cache hits,
    wakes: the C count gives what the Python one gave, row for row, in its order."""
    from dbtier.measure import trace

    files = {0: "/x/ts/PG_18_202506291/5/100", 1: "/x/ts/PG_18_202506291/5/100.1", 2: "/x/pgdata/pg_wal/0001",
             3: "/x/ts/PG_18_202506291/5/101_vm", 4: "/x/pgdata/base/pgsql_tmp/t1.0", 5: "/x/other"}
    names = {(5, 100): ("orders", "table"), (5, 101): ("orders_pkey", "index")}
    fields = ("reads", "read_bytes", "writes", "write_bytes", "flushes", "cached_reads", "async")
    for seed in range(20):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(1, 400))
        rec = np.zeros(n, dtype=RECORD)
        rec["kind"] = rng.choice([trace.REQUEST, trace.REQUEST, trace.CALL, trace.SYNC], n)
        rec["file"] = rng.integers(-1, 6, n)
        rec["dev"] = rng.integers(0, 3, n)
        rec["op"] = rng.choice([trace.READ, trace.READ, trace.WRITE, trace.FLUSH, 4, 7], n)
        rec["len"] = rng.choice([4096, 8192, 131072], n)
        rec["offset"] = rng.integers(0, 8, n) * 8192
        run = rng.random(n) < 0.5  # half of them continue the record before
        rec["offset"][1:][run[1:]] = rec["offset"][:-1][run[1:]] + rec["len"][:-1][run[1:]]
        rec["flags"] = rng.choice([0, 0, objects.PAGE_CACHE, objects.ASYNC], n)
        rec["submit_ns"] = rng.integers(0, n // 3 + 1, n) * 1000  # out of order, and many at the same time
        rec["complete_ns"] = rec["submit_ns"] + rng.integers(0, 10**6, n)
        got = objects.object_io(rec, files, ["hdd", "ssd"], names)
        want = _object_io_as_python_counted_it(rec, files, ["hdd", "ssd"], names)
        order = sorted(want, key=lambda k: -want[k][1])  # the busiest first; as met where equally busy
        assert [(r["object"], r["device"]) for r in got] == order, seed
        for r in got:
            counts, device_s = want[(r["object"], r["device"])]
            assert [r[f] for f in fields] == list(counts[:7]) and r["device_s"] == device_s, (seed, r)
            moved = counts[0] + counts[2]
            assert r["sequential_pct"] == (100.0 * counts[7] / moved if moved else 0.0), (seed, r)
