"""Trace: every I/O recorded once, converted to Parquet with PostgreSQL file classes."""

import json
import sys

import pyarrow.parquet as pq

from dbtier.devices import native

from dbtier.devices.native import pg_path as classify
from tests.conftest import dbtier


def test_trace_to_parquet(shm_dir, tmp_path):
    dev = shm_dir / "dev"
    (dev / "base" / "5").mkdir(parents=True)
    (dev / "pg_wal").mkdir()
    script = (
        "import os\n"
        f"d = {str(dev)!r}\n"
        "fd = os.open(d + '/base/5/16384', os.O_RDWR | os.O_CREAT)\n"
        "for i in range(20): os.pwrite(fd, b'x' * 8192, i * 8192)\n"
        "for i in range(20): os.pread(fd, 8192, i * 8192)\n"
        "os.fsync(fd); os.close(fd)\n"
        "w = os.open(d + '/pg_wal/000000010000000000000001', os.O_RDWR | os.O_CREAT)\n"
        "for i in range(5): os.pwrite(w, b'w' * 8192, i * 8192); os.fdatasync(w)\n"
        "os.close(w)\n"
    )
    trace_dir = tmp_path / "trace"
    dbtier("exec", "-q", "-d", f"data=ssd-sata-mlc:{dev}", "--trace", str(trace_dir), "--", sys.executable, "-c",
           script, check=True)
    proc = dbtier("trace", str(trace_dir), check=True)
    assert "trace.parquet" in proc.stdout
    table = pq.read_table(trace_dir / "trace.parquet")
    meta = json.loads(table.schema.metadata[b"dbtier"])
    assert meta["trace_format"] == native.trace_format()
    rows = table.to_pylist()
    for kind in ("call", "request"):  # no page cache in the way: each call made one device request
        rel = [r for r in rows if r["path_class"] == "relation" and r["record"] == kind]
        wal = [r for r in rows if r["path_class"] == "wal" and r["record"] == kind]
        assert sum(r["op"] == "write" for r in rel) == 20 and sum(r["op"] == "read" for r in rel) == 20
        assert sum(r["op"] == "flush" for r in rel) == 1
        assert sum(r["op"] == "write" for r in wal) == 5 and sum(r["op"] == "flush" for r in wal) == 5
        assert {r["relfilenode"] for r in rel} == {16384} and {r["database"] for r in rel} == {5}
        reads = [r for r in rel if r["op"] == "read"]
        assert sorted(r["offset"] for r in reads) == [i * 8192 for i in range(20)]
        assert all(200 < r["latency_us"] < 240 for r in reads)  # ssd-sata-mlc: 216.8 us per 8 KiB read
    assert all(r["lateness_us"] >= 0 for r in rows)
    # the layout a replay needs: flash has no block addresses, so no chunks were laid out
    layout = json.loads(table.schema.metadata[b"dbtier_layout"])
    assert layout["chunk_bytes"] == native.chunk_bytes() and layout["chunks"] == []


def test_a_trace_of_another_format_is_refused(shm_dir, tmp_path):
    dev = shm_dir / "dev"
    dev.mkdir()
    trace_dir = tmp_path / "trace"
    dbtier("exec", "-q", "-d", f"data=ssd-sata-mlc:{dev}", "--trace", str(trace_dir), "--", sys.executable, "-c",
           f"open({str(dev / 'f')!r}, 'w').write('x' * 100)", check=True)
    meta = json.loads((trace_dir / "meta.json").read_text())
    (trace_dir / "meta.json").write_text(json.dumps({**meta, "trace_format": 1}))
    proc = dbtier("trace", str(trace_dir))
    assert proc.returncode == 2 and "recorded in trace format 1" in proc.stderr and "record the run again" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_classify_postgres_paths():
    assert classify("/d/base/5/16384")["class"] == "relation"
    assert classify("/d/base/5/16384_fsm")["class"] == "fsm"
    assert classify("/d/base/5/16384_vm")["class"] == "vm"
    assert classify("/d/base/5/16384.2") == {"class": "relation", "tablespace": "pg_default", "database": 5,
                                              "relfilenode": 16384, "segment": 2}
    t = classify("/mnt/ssd/PG_18_202506291/16389/24576")
    assert t["class"] == "relation" and t["tablespace"] == "/mnt/ssd" and t["database"] == 16389
    assert classify("/w/000000010000000000000003")["class"] == "wal"
    assert classify("/d/base/pgsql_tmp/pgsql_tmp1234.0")["class"] == "temp"
    assert classify("/d/global/1262")["tablespace"] == "pg_global"
    assert classify("/d/postmaster.pid")["class"] == "other"
