"""PostgreSQL's own I/O statistics over the measured interval: pg_stat_io and pg_stat_wal, read
before and after and differenced. Backends flush their counts when their transaction ends (at the
latest when they exit); the measurement reads the "after" side once the workload's sessions have
been reaped, so their counts are in."""

from __future__ import annotations

IO_KEYS = ("backend_type", "object", "context")
IO_COUNTS = ("reads", "read_bytes", "read_time", "writes", "write_bytes", "write_time", "writebacks",
             "writeback_time", "extends", "extend_bytes", "hits", "evictions", "reuses", "fsyncs", "fsync_time")
WAL_COUNTS = ("wal_records", "wal_fpi", "wal_bytes", "wal_buffers_full")


def snapshot(conn) -> dict:
    io = {}
    cols = ", ".join((*IO_KEYS, *IO_COUNTS))
    for row in conn.execute(f"SELECT {cols} FROM pg_stat_io").fetchall():
        io[tuple(row[:3])] = [float(v) if v is not None else None for v in row[3:]]
    wal = conn.execute(f"SELECT {', '.join(WAL_COUNTS)} FROM pg_stat_wal").fetchone()
    return {"io": io, "wal": [float(v) for v in wal]}


def delta(before: dict, after: dict) -> dict:
    """Rows of pg_stat_io that changed (times in ms, as the view gives them), and pg_stat_wal."""
    rows = []
    for key, values in after["io"].items():
        old = before["io"].get(key, [None] * len(values))
        diff = {name: (v - (o or 0.0)) if v is not None else None for name, v, o in zip(IO_COUNTS, values, old)}
        if any(v for v in diff.values()):
            rows.append({**dict(zip(IO_KEYS, key)), **diff})
    rows.sort(key=lambda r: -((r["reads"] or 0) + (r["writes"] or 0) + (r["extends"] or 0) + (r["hits"] or 0)))
    wal = {name: a - b for name, a, b in zip(WAL_COUNTS, after["wal"], before["wal"])}
    return {"io": rows, "wal": wal}
