"""Real clients on a real server, recorded: what each session sent (the simple protocol, or the
extended one with its values and prepared statement's name), when, how long it took and what the
server answered, as a captured workload (production/capture.py) the replay reads. The tests drive
these clients on a production lab: the capture's times are their real timings, nothing invented."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pyarrow as pa
import psycopg
from psycopg import pq

from dbtier.production import capture


@dataclass
class _Row:
    session: int
    start_s: float
    duration_s: float
    kind: str
    name: str | None
    text: str
    params: list[str | None] | None
    cls: str
    error_state: str | None
    error_message: str | None


class Session:
    """One client connection; each call sends one statement and records it."""

    def __init__(self, rec: "Recorder", application: str):
        self.rec = rec
        self.start_s = time.monotonic() - rec.t0  # as a log dates it: when the connection was asked for
        self.conn = psycopg.connect(rec.conninfo, autocommit=True, application_name=application)
        self.pg = self.conn.pgconn
        self.end_s: float | None = None
        self.application = application
        self.rows: list[_Row] = []
        self.prepared: set[str] = set()

    def _send(self, kind, name, text, params, cls, call):
        t = time.monotonic()
        res = call()
        d = time.monotonic() - t
        state = res.error_field(pq.DiagnosticField.SQLSTATE) if res.status == pq.ExecStatus.FATAL_ERROR else None
        msg = res.error_message.decode().strip() if state else None
        self.rows.append(_Row(-1, t - self.rec.t0, d, kind, name, text, params, cls or text,
                              state.decode() if state else None, msg))
        return res

    def simple(self, text: str, cls: str | None = None):
        return self._send("simple", None, text, None, cls, lambda: self.pg.exec_(text.encode()))

    def execute(self, text: str, params: list, cls: str | None = None, name: str | None = None):
        values = [None if v is None else str(v) for v in params]
        raw = [None if v is None else v.encode() for v in values]
        if name is None:
            return self._send("execute", None, text, values, cls, lambda: self.pg.exec_params(text.encode(), raw))
        if name not in self.prepared:
            res = self.pg.prepare(name.encode(), text.encode())
            assert res.status == pq.ExecStatus.COMMAND_OK, res.error_message
            self.prepared.add(name)
        return self._send("execute", name, text, values, cls, lambda: self.pg.exec_prepared(name.encode(), raw))

    def close(self):
        self.conn.close()
        self.end_s = time.monotonic() - self.rec.t0


@dataclass
class Recorder:
    conninfo: str
    t0: float = field(default_factory=time.monotonic)
    sessions: list[Session] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def session(self, application: str = "app") -> Session:
        s = Session(self, application)
        with self.lock:
            self.sessions.append(s)
        return s

    def capture(self, counts: dict | None = None) -> capture.Capture:
        """The recording as a capture: sessions numbered in order of start, times from the first."""
        order = sorted(self.sessions, key=lambda s: s.start_s)
        base = order[0].start_s
        classes: dict[str, int] = {}   # a class's first text (its normalized form here) -> its id
        ids: dict[str, int] = {}       # the class the client named -> its id
        rows = []
        for i, s in enumerate(order):
            for seq, r in enumerate(s.rows):
                cid = ids.setdefault(r.cls, len(ids) + 1)
                classes.setdefault(r.text, cid)
                rows.append({"session": i, "seq": seq, "start_s": r.start_s - base, "duration_s": r.duration_s,
                             "kind": r.kind, "name": r.name, "text": r.text, "params": r.params,
                             "param_sources": None, "class_id": cid, "error_state": r.error_state,
                             "error_message": r.error_message})
        sessions = [{"session": i, "log_session": f"s{i}", "database": "dbtier", "user": "dbtier",
                     "application": s.application, "client": "[local]", "start_s": s.start_s - base,
                     "end_s": None if s.end_s is None else s.end_s - base} for i, s in enumerate(order)]
        return from_rows(sessions, rows, classes, counts=counts)


def from_rows(sessions: list[dict], statements: list[dict], classes: dict[str, int], counts: dict | None = None,
              kind: str = "log") -> capture.Capture:
    """A capture from plain rows (a recording's, or a test's own small edge cases)."""
    calls: dict[int, list[float]] = {}
    for r in statements:
        calls.setdefault(r["class_id"], []).append(r.get("duration_s") or 0.0)
    cls_rows = [{"class_id": cid, "normalized": text, "calls": len(calls.get(cid, [])),
                 "mean_s": sum(calls[cid]) / len(calls[cid]) if calls.get(cid) else None}
                for text, cid in classes.items()]
    span = max([s["end_s"] or s["start_s"] for s in sessions] + [r["start_s"] for r in statements] + [0.0])
    base_counts = {"sessions": len(sessions), "statements": len(statements),
                   "prepared": sum(1 for r in statements if r.get("name")), "copy_from_stdin": 0, "fastpath": 0,
                   "other_databases": 0, "unreadable_lines": 0,
                   "errors": sum(1 for r in statements if r.get("error_state"))}
    base_counts.update(counts or {})
    full = [{"duration_s": None, "name": None, "params": None, "param_sources": None, "error_state": None,
             "error_message": None, **r} for r in statements]
    return capture.Capture(
        kind=kind, database="dbtier", sources=[capture.Source("recorded by the tests", "test", "0" * 64)],
        start="2026-11-26T00:00:00+00:00", span_s=span, counts=base_counts,
        sessions=pa.Table.from_pylist(sessions, schema=capture.SESSIONS),
        statements=pa.Table.from_pylist(full, schema=capture.STATEMENTS),
        classes=pa.Table.from_pylist(cls_rows, schema=capture.CLASSES))
