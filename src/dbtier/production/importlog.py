"""A production server's statement log turned into a captured workload (production/capture.py).

What the log says, and what becomes of it:

- `connection received` / `connection authorized` / `disconnection` start and end a session, with
  its client, user, database and application;
- `statement: X` is a statement sent with the simple query protocol; `execute NAME: X` with its
  `DETAIL: Parameters: $1 = '...'` one sent with the extended protocol (its values unquoted from the
  log's SQL literals, NULL as null). The `parse` and `bind` lines that log_min_duration_statement adds
  are left: their `execute` carries all a replay needs;
- `duration: N ms` ends the statement its session sent last; when it carries the statement itself
  (log_min_duration_statement without log_statement), the statement began N ms before the line;
- `ERROR:` with its `STATEMENT:` is production's answer to the statement, kept so a replay can
  expect it (a statement that failed before it was logged is made from STATEMENT: as a simple one:
  a syntax error, or a bind that failed, whose values the log does not hold);
- COPY FROM STDIN (its data is never logged), fast-path function calls and fetches from an open
  portal (`execute fetch from`) are counted and reported, never replayed.

Each session's statements keep the order of its lines, not of their times (a log's times are
milliseconds). One database is kept: the one given, or the one with most statements; the others'
statements are counted."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import pyarrow as pa

from dbtier.errors import UserError
from dbtier.production import capture as capture_mod
from dbtier.production.capture import Capture, Source
from dbtier.production.logread import (FORMATS, Clock, Entry, Unreadable, detect_format, read_csvlog,
                                       read_jsonlog)
from dbtier.production.logstderr import Prefix, guess, read_stderr
from dbtier.production.snapshot import MARKER as SNAPSHOT_MARKER
from dbtier.production.stmtclass import Classifier
from dbtier.production.workdir import check_output, write_workload

_DURATION = re.compile(r"duration: (\d+(?:\.\d+)?) ms(?:  (.*))?\Z", re.S)
_PARAM = re.compile(r"\$(\d+) = (?:(NULL)|'((?:[^']|'')*)')(?:, |\Z)", re.S)
_COPY_IN = re.compile(r"\bcopy\b[^;]*?\bfrom\s+stdin\b", re.I | re.S)
_AT_CHARACTER = re.compile(r" at character \d+\Z")
_SQLSTATE = re.compile(r"[0-9A-Z]{5}: ")
_ERRORS = ("ERROR", "FATAL", "PANIC")
#: what `execute` lines become when they are no statement of their own
_IGNORED = object()


class _Session:
    __slots__ = ("log_session", "database", "user", "application", "client", "start", "connected", "end",
                 "statements", "pending", "copy_in", "fastpath", "fetches", "order")

    def __init__(self, log_session: str, ts: float, order: int):
        self.log_session = log_session
        self.database = self.user = self.application = self.client = None
        self.start = ts
        self.connected = False    # its start is its connection, not its first line in the log
        self.end = None
        self.statements: list[list] = []   # [start, duration, kind, name, text, params, state, message]
        self.pending = None       # the statement sent last, if its end has not been logged yet
        self.copy_in = self.fastpath = self.fetches = 0
        self.order = order


@dataclass
class Imported:
    """A log read: the capture, and what the statistics print beside it."""
    capture: Capture
    format: str
    prefix: str | None                     # stderr: the log_line_prefix read with
    databases: dict[str, int]              # every database's statements (the kept one's too)
    unreadable: Unreadable
    notes: list[str] = field(default_factory=list)


def parse_params(detail: str | None) -> list[str | None] | None:
    """`Parameters: $1 = '1', $2 = NULL` as ['1', None] (None when the detail gives no parameters)."""
    if not detail or not detail.startswith("Parameters: "):
        return None
    values: list[str | None] = []
    pos = len("Parameters: ")
    while pos < len(detail):
        m = _PARAM.match(detail, pos)
        if m is None or int(m.group(1)) != len(values) + 1:
            return None
        values.append(None if m.group(2) else m.group(3).replace("''", "'"))
        pos = m.end()
    return values


class _Assembler:
    def __init__(self):
        self.by_key: dict = {}
        self.sessions: list[_Session] = []
        self.by_session_id = False

    def _session(self, e: Entry, key) -> _Session:
        s = self.by_key.get(key)
        if s is None:
            s = _Session(e.session or f"pid {e.pid}", e.ts, len(self.sessions))
            self.by_session_id |= e.session is not None
            self.by_key[key] = s
            self.sessions.append(s)
        return s

    def feed(self, entries: Iterable[Entry]) -> None:
        """Sessions are told apart by their id where the log gives it, else by process id (a process
        serves one session at a time: a new connection on it starts the next)."""
        for e in entries:
            msg = e.message
            key = e.session or e.pid
            if key is None:
                continue
            if msg.startswith("connection received: ") and e.severity == "LOG":
                if key in self.by_key:
                    self._finish(self.by_key.pop(key))
                s = self._session(e, key)
                s.start, s.connected = e.ts, True
                s.client = _client(msg) or s.client
                continue
            s = self.by_key.get(key)
            if s is None:
                if not (msg.startswith(("statement: ", "execute ", "duration: ")) or e.severity in _ERRORS):
                    continue
                s = self._session(e, key)
            if s.database is None and e.database:
                s.database, s.user = e.database, e.user
            if s.application is None and e.application:
                s.application = e.application
            if s.client is None and e.client:
                s.client = e.client
            if e.severity in _ERRORS:
                self._error(s, e)
            elif msg.startswith("duration: "):
                self._duration(s, e)
            elif msg.startswith("statement: "):
                self._begin(s, e.ts, None, "simple", None, msg[11:], None)
            elif msg.startswith("execute "):
                self._execute(s, e, msg, None)
            elif msg.startswith("fastpath function call: "):
                self._finish(s)
                s.fastpath += 1
                s.pending = _IGNORED
            elif msg.startswith("connection authorized: "):
                _authorized(s, msg)
            elif msg.startswith("disconnection: "):
                self._finish(s)
                s.end = e.ts
                self.by_key.pop(key, None)

    def _begin(self, s: _Session, ts: float, duration: float | None, kind: str, name, text: str, params) -> None:
        self._finish(s)
        if "stdin" in text.lower() and _COPY_IN.search(text):
            s.copy_in += 1
            s.pending = _IGNORED if duration is None else None
            return
        st = [ts, duration, kind, name, text, params, None, None]
        s.statements.append(st)
        s.pending = st if duration is None else None

    def _execute(self, s: _Session, e: Entry, msg: str, duration: float | None) -> None:
        head, sep, text = msg[8:].partition(": ")
        if not sep:
            return
        if head.startswith("fetch from "):  # more rows of a portal an earlier execute opened
            self._finish(s)
            s.fetches += 1
            s.pending = _IGNORED if duration is None else None
            return
        name = head.split("/", 1)[0]
        ts = e.ts if duration is None else e.ts - duration
        self._begin(s, ts, duration, "execute", None if name == "<unnamed>" else name, text,
                    parse_params(e.detail) or [])

    def _duration(self, s: _Session, e: Entry) -> None:
        m = _DURATION.match(e.message)
        if m is None:
            return
        seconds = float(m.group(1)) / 1000.0
        rest = m.group(2)
        if rest is None:   # the end of the statement logged before
            if s.pending is not None and s.pending is not _IGNORED:
                s.pending[1] = seconds
            s.pending = None
        elif rest.startswith("statement: "):
            self._begin(s, e.ts - seconds, seconds, "simple", None, rest[11:], None)
        elif rest.startswith("execute "):
            self._execute(s, e, rest, seconds)
        elif rest.startswith("fastpath function call: "):
            self._finish(s)
            s.fastpath += 1
        # parse and bind: their execute follows

    def _error(self, s: _Session, e: Entry) -> None:
        message = e.message
        state = e.state
        if _SQLSTATE.match(message):   # log_error_verbosity = verbose
            state, message = state or message[:5], message[7:]
        message = _AT_CHARACTER.sub("", message)
        if s.pending is _IGNORED:
            s.pending = None
            return
        st = s.pending
        if st is None:
            if not e.statement:
                return
            # failed before it was logged (a syntax error, a bind that failed)
            self._begin(s, e.ts, None, "simple", None, e.statement, None)
            st = s.pending
            if st is None or st is _IGNORED:
                s.pending = None
                return
        st[6], st[7] = state or "XX000", message
        s.pending = None

    @staticmethod
    def _finish(s: _Session) -> None:
        s.pending = None


def _client(msg: str) -> str | None:
    m = re.search(r"host=(\S+)(?: port=(\d+))?", msg)
    if not m:
        return None
    return f"{m.group(1)}:{m.group(2)}" if m.group(2) else m.group(1)


_AUTHORIZED = re.compile(r"connection authorized: user=(\S+)(?: database=(\S+))?(?: application_name=(.*?))?"
                         r"(?: (?:SSL|GSS) .*)?\Z", re.S)


def _authorized(s: _Session, msg: str) -> None:
    m = _AUTHORIZED.match(msg)
    if m:
        s.user = m.group(1)
        s.database = m.group(2) or s.database
        if m.group(3):
            s.application = m.group(3)


# ---- files ----------------------------------------------------------------------------------------

def _reader(fmt: str, prefix: Prefix | None):
    if fmt == "csvlog":
        return read_csvlog
    if fmt == "jsonlog":
        return read_jsonlog
    return lambda path, clock, bad: read_stderr(path, prefix, clock, bad)


def _first_time(read, path: Path) -> float:
    gen = read(path, Clock(), Unreadable())
    try:
        first = next(gen, None)
    finally:
        gen.close()
    if first is None:
        raise UserError(f"{path}: no log line could be read; is it a PostgreSQL log?")
    return first.ts


def _entries(read, paths: list[Path], clock: Clock, bad: Unreadable) -> Iterator[Entry]:
    for path in paths:
        yield from read(path, clock, bad)


def read_logs(paths: Iterable[Path], database: str | None = None, fmt: str | None = None,
              prefix: str | None = None, user: str | None = None) -> Imported:
    """Reads the log files (any order: they are put in the order of their times) into a capture of one
    database. `fmt` is csvlog, jsonlog or stderr (found from the content when None); `prefix` is a
    stderr log's log_line_prefix (PostgreSQL's default or the recommended one recognised when None);
    `user` keeps that user's sessions alone (the others' statements are counted)."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise UserError("no log file given; give the server's log files (docs/production.md)")
    if fmt is not None and fmt not in FORMATS:
        raise UserError(f"--format {fmt}: one of {', '.join(FORMATS)}")
    formats = {p: fmt or detect_format(p) for p in paths}
    found = sorted(set(formats.values()))
    if len(found) > 1:
        raise UserError(f"the files are of several log formats ({', '.join(found)}); give the files of one "
                        "log destination (the server writes each to its own files)")
    fmt = found[0]
    notes: list[str] = []
    pfx = None
    if fmt == "stderr":
        pfx = Prefix(prefix) if prefix is not None else guess(paths[0])
        if prefix is None:
            notes.append(f"stderr log read with log_line_prefix {pfx.text!r}, recognised from its first lines")
    elif prefix is not None:
        notes.append(f"--prefix is for stderr logs; this {fmt} log has its fields and was read without it")
    sources = [Source(str(p.resolve()), fmt, capture_mod.file_sha256(p)) for p in paths]
    seen: dict[str, Path] = {}
    for p, src in zip(paths, sources):
        if src.sha256 in seen:
            raise UserError(f"{p} and {seen[src.sha256]} are the same log (same content); give each file once")
        seen[src.sha256] = p
    read = _reader(fmt, pfx)
    order = sorted(range(len(paths)), key=lambda i: _first_time(read, paths[i]))
    paths, sources = [paths[i] for i in order], [sources[i] for i in order]
    clock, bad = Clock(), Unreadable()
    asm = _Assembler()
    asm.feed(_entries(read, paths, clock, bad))
    if not asm.by_session_id and asm.sessions:
        notes.append("the log gives no session ids (%c): sessions are told apart by process id")
    if clock.unresolved_zones:
        notes.append(f"the log's time zone {', '.join(sorted(clock.unresolved_zones))} is taken as UTC: "
                     "intervals are right except across a change of daylight saving time")
    return _build(asm, paths, sources, fmt, pfx, database, user, clock, bad, notes)


def _build(asm: _Assembler, paths, sources, fmt, pfx, database, user, clock: Clock, bad: Unreadable,
           notes: list[str]) -> Imported:
    per_db: Counter = Counter()
    for s in asm.sessions:
        per_db[s.database] += len(s.statements)
    unknown = per_db.pop(None, 0)
    named = ", ".join(str(p) for p in paths[:3]) + (" ..." if len(paths) > 3 else "")
    if not per_db or not sum(per_db.values()):
        raise UserError(f"{named}: no statements in the log; production must log them with log_statement = all "
                        "or log_min_duration_statement = 0 (docs/production.md)")
    if database is None:
        database = max(per_db, key=lambda d: (per_db[d], d))
        if len(per_db) > 1:
            notes.append(f"database {database} kept, the one with most statements (--database chooses)")
    elif not per_db.get(database):
        have = ", ".join(f"{d} ({n:,})" for d, n in per_db.most_common(5))
        raise UserError(f"{named}: no statements of database {database!r} in the log; it has {have}")
    if unknown:
        notes.append(f"{unknown:,} statements of sessions whose database the log does not tell (they began "
                     "before it) are left out")
    ours = [s for s in asm.sessions if s.database == database]
    # `dbtier stats snapshot`'s own sessions (its queries marked, on a connection of its own): monitoring,
    # not the workload, and they read views a lab without production's extensions would refuse
    snapshots = [s for s in ours if any(SNAPSHOT_MARKER in st[4] for st in s.statements)]
    if snapshots:
        ours = [s for s in ours if not any(s is t for t in snapshots)]
        notes.append(f"{len(snapshots)} session(s) of dbtier stats snapshot left out "
                     f"({sum(len(s.statements) for s in snapshots):,} statements)")
    other_users = 0
    if user is not None:
        other_users = sum(len(s.statements) for s in ours if s.user != user)
        ours = [s for s in ours if s.user == user]
        if not any(s.statements for s in ours):
            have = Counter()
            for s in asm.sessions:
                if s.database == database:
                    have[s.user] += len(s.statements)
            listed = ", ".join(f"{u} ({n:,})" for u, n in have.most_common(5))
            raise UserError(f"{named}: no statements of user {user!r} in database {database}; it has {listed}")
    kept = sorted(ours, key=lambda s: (s.start, s.order))
    classifier = Classifier()
    capture_start = kept[0].start
    cols: dict[str, list] = {k: [] for k in capture_mod.STATEMENTS.names}
    prepared = set()
    errors = 0
    for i, s in enumerate(kept):
        for seq, (ts, dur, kind, name, text, params, state, message) in enumerate(s.statements):
            cols["session"].append(i)
            cols["seq"].append(seq)
            cols["start_s"].append(max(ts, s.start) - capture_start)
            cols["duration_s"].append(dur)
            cols["kind"].append(kind)
            cols["name"].append(name)
            cols["text"].append(text)
            cols["params"].append(params)
            cols["class_id"].append(classifier.classify(text))
            cols["error_state"].append(state)
            cols["error_message"].append(message)
            if name is not None:
                prepared.add((i, name))
            errors += state is not None
    cols["param_sources"] = [None] * len(cols["session"])
    statements = pa.table(cols, schema=capture_mod.STATEMENTS)
    sessions = pa.table({
        "session": list(range(len(kept))),
        "log_session": [s.log_session for s in kept],
        "database": [s.database for s in kept],
        "user": [s.user for s in kept],
        "application": [s.application for s in kept],
        "client": [s.client for s in kept],
        "start_s": [s.start - capture_start for s in kept],
        "end_s": [None if s.end is None else s.end - capture_start for s in kept],
    }, schema=capture_mod.SESSIONS)
    classes = class_table(statements, classifier.normalized)
    ends = [s.end for s in kept if s.end is not None]
    ends += [st[0] + (st[1] or 0.0) for s in kept for st in s.statements[-1:]]
    span = max(ends) - capture_start if ends else 0.0
    by_kind = Counter(cols["kind"])
    counts = {
        "sessions": len(kept), "statements": statements.num_rows, "simple": by_kind["simple"],
        "execute": by_kind["execute"], "prepared": len(prepared), "classes": classes.num_rows,
        "copy_from_stdin": sum(s.copy_in for s in kept), "fastpath": sum(s.fastpath for s in kept),
        "portal_fetches": sum(s.fetches for s in kept), "other_databases": sum(per_db.values()) - per_db[database],
        "other_users": other_users, "snapshot_sessions": len(snapshots),
        "unknown_database": unknown, "errors": errors, "unreadable_lines": bad.count,
    }
    if counts["copy_from_stdin"] or counts["fastpath"] or counts["portal_fetches"]:
        notes.append("COPY FROM STDIN (its data is never logged), fast-path function calls and fetches from "
                     "an open portal are counted, not replayed: they are not in statements.parquet")
    cap = Capture(kind="log", database=database, sources=sources, start=clock.iso(capture_start),
                  span_s=max(span, 0.0), counts=counts, sessions=sessions, statements=statements, classes=classes)
    return Imported(cap, fmt, pfx.text if pfx else None, dict(per_db), bad, notes)


def class_table(statements: pa.Table, normalized: dict[int, str]) -> pa.Table:
    """One row per class: its calls in the capture and their mean logged duration."""
    grouped = statements.group_by("class_id").aggregate([("class_id", "count"), ("duration_s", "mean")])
    grouped = grouped.sort_by([("class_id_count", "descending"), ("class_id", "ascending")])
    ids = grouped["class_id"].to_pylist()
    return pa.table({"class_id": ids, "normalized": [normalized[i] for i in ids],
                     "calls": grouped["class_id_count"], "mean_s": grouped["duration_s_mean"]},
                    schema=capture_mod.CLASSES)


def import_logs(paths: Iterable[Path], out: Path, database: str | None = None, fmt: str | None = None,
                prefix: str | None = None, user: str | None = None) -> Imported:
    """Reads the logs and writes the workload directory `out` (new, empty, or a workload to replace)."""
    out = check_output(Path(out))
    imported = read_logs(paths, database=database, fmt=fmt, prefix=prefix, user=user)
    write_workload(out, imported.capture)
    return imported
