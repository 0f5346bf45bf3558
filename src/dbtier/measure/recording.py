"""What a replay needs of a live run's course, written beside its trace (prediction/recording.py reads
it back): the measured, warm and cold intervals on the trace's clock, the processes of each measured
interval, the database objects' names, and the transactions a client timed.

    rec = RunRecording()
    rec.event("page cache emptied") / rec.interval("warm", t0, t1) / rec.measured(interval)
    rec.transaction(...)                         # a client's completed transactions (pgbench's log)
    rec.save(session, out, meta)                 # trace.parquet (+ transactions.parquet) at `out`"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RunRecording:
    timeline: list[dict] = field(default_factory=list)
    names: dict = field(default_factory=dict)  # (database oid, relfilenode) -> (name, kind)
    transactions: list[tuple] = field(default_factory=list)  # (script, client, end monotonic ns, latency us)
    on_backend: bool = False  # the transactions' clients are the server processes they ran on (a replay's)

    def event(self, what: str) -> None:
        self.timeline.append({"event": what, "t_ns": time.monotonic_ns()})

    def interval(self, what: str, t0_ns: int, t1_ns: int) -> None:
        self.timeline.append({"event": what, "t0_ns": t0_ns, "t1_ns": t1_ns})

    def measured(self, interval) -> None:
        """A measured interval (measure/interval.py): its window, and which process was which (a
        replay ends it when its clients' backends are done); on a threaded server, which thread was
        which (threads: OS thread id -> the server's name for it)."""
        self.timeline.append({"event": "measured", "phase": interval.label, "t0_ns": interval.t0_ns,
                              "t1_ns": interval.t1_ns,
                              "processes": {str(p): kind for p, kind in interval.notes.get("processes", {}).items()},
                              **({"threads": {str(t): name for t, name in interval.notes["threads"].items()}}
                                 if "threads" in interval.notes else {})})
        self.names.update(interval.notes.get("names", {}))

    def transactions_timed(self, script: str, clients, ends_epoch_us, latency_ms, on_backend: bool = False) -> None:
        """Transactions a client timed (pgbench's log: its clock is the epoch), on the trace's clock;
        on_backend: each client is the server process that ran it (a replay knows it)."""
        self.on_backend |= on_backend
        offset_ns = time.time_ns() - time.monotonic_ns()
        for c, end, lat in zip(clients, ends_epoch_us, latency_ms):
            self.transactions.append((script, int(c), int(end) * 1000 - offset_ns, int(round(lat * 1000))))

    def save(self, session, out: Path, meta: dict) -> Path:
        """The trace as Parquet at `out`, this course in its metadata, and the transactions beside it."""
        if self.transactions:
            import pyarrow as pa
            import pyarrow.parquet as pq
            script, client, end, lat = zip(*self.transactions)
            tmp = out.with_name("transactions.parquet.tmp")
            table = pa.table({"script": pa.array(script).dictionary_encode(), "client": list(client),
                              "end_ns": list(end), "latency_us": list(lat)})
            if self.on_backend:
                table = table.replace_schema_metadata({b"client": b"backend_pid"})
            pq.write_table(table, tmp)
            tmp.replace(out.with_name("transactions.parquet"))
        from dbtier.measure.trace import convert
        session.save_trace_meta({**meta, "timeline": self.timeline,
                                 "names": [[db, node, name, kind] for (db, node), (name, kind) in self.names.items()]})
        convert(session.trace_dir, out)
        return out
