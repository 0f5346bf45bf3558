"""Reading a PostgreSQL server's log files, whichever destination wrote them (csvlog, jsonlog, stderr),
into one kind of record: `Entry`, a message with its session, time and details.

The files are content dbtier did not write. A line that cannot be read is counted, and the first few
are kept with their file and line (`Unreadable`); a file that is not a log at all, a truncated gzip or
a file that cannot be opened fails in one line naming it. Several files (a rotated log) are read in the
order of their first entry's time, whatever their names; gzip-compressed files are recognised by their
first bytes. The stderr format, whose line prefix the server's log_line_prefix decides, is read by
`logstderr.py`."""

from __future__ import annotations

import calendar
import csv
import gzip
import io
import json
import re
import sys
import time
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

from dbtier.errors import UserError

FORMATS = ("csvlog", "jsonlog", "stderr")
#: how many unreadable lines are kept to be shown
EXAMPLES = 5


class Entry:
    """One logged message. `session` is the session's id (%c, session_id) where the log gives it, else
    None (then the process id tells sessions apart); `statement` is the STATEMENT: an error answered."""

    __slots__ = ("ts", "file", "line", "session", "pid", "user", "database", "application", "client",
                 "severity", "message", "detail", "statement", "state")

    def __init__(self, ts, file, line, session, pid, user, database, application, client, severity, message,
                 detail=None, statement=None, state=None):
        self.ts = ts
        self.file = file
        self.line = line
        self.session = session
        self.pid = pid
        self.user = user
        self.database = database
        self.application = application
        self.client = client
        self.severity = severity
        self.message = message
        self.detail = detail
        self.statement = statement
        self.state = state


@dataclass
class Unreadable:
    """Lines no reader could make sense of: how many, and the first few with where they are."""
    count: int = 0
    examples: list[tuple[str, int, str]] = field(default_factory=list)  # file, line, what

    def add(self, file: str, line: int, what: str) -> None:
        self.count += 1
        if len(self.examples) < EXAMPLES:
            self.examples.append((file, line, what[:160]))


# ---- time ----------------------------------------------------------------------------------------

_ZONE = re.compile(r"^([+-])(\d\d):?(\d\d)?$")


class Clock:
    """Log timestamps ("2026-11-26 20:41:48.542 UTC", or without the milliseconds, or %n's epoch) as
    seconds since the epoch. A zone given as an offset or UTC/GMT is applied; a zone abbreviation
    (CET, EST) cannot be resolved without the server's settings and is taken as UTC, which keeps every
    interval right except across a change of daylight saving time (noted)."""

    def __init__(self):
        self._seconds: dict[str, int] = {}
        self._zones: dict[str, int] = {}
        self.unresolved_zones: set[str] = set()
        self.first: tuple[float, int] | None = None  # the earliest time seen and its zone's offset

    def zone_offset(self, zone: str) -> int:
        off = self._zones.get(zone)
        if off is None:
            m = _ZONE.match(zone)
            if zone in ("UTC", "GMT", "Z", "UCT", ""):
                off = 0
            elif m:
                off = (int(m.group(2)) * 3600 + int(m.group(3) or 0) * 60) * (1 if m.group(1) == "+" else -1)
            else:
                off = 0
                self.unresolved_zones.add(zone)
            self._zones[zone] = off
        return off

    def parse(self, text: str) -> float:
        """Raises ValueError on a text that is no log time."""
        if len(text) > 24 and text[19] == "." and text[23] == " ":   # %m: the common case, quickly
            sec = self._seconds.get(text[:19])
            off = self._zones.get(text[24:])
            if sec is not None and off is not None:
                ts = sec + int(text[20:23]) / 1000.0 - off
                if ts < self.first[0]:
                    self.first = (ts, off)
                return ts
        base = text[:19]
        sec = self._seconds.get(base)
        if sec is None:
            if len(base) != 19 or base[4] != "-" or base[10] != " ":
                return self._epoch(text)
            sec = calendar.timegm(time.strptime(base, "%Y-%m-%d %H:%M:%S"))
            self._seconds[base] = sec
        rest = text[19:]
        frac = 0.0
        if rest.startswith("."):
            end = rest.find(" ")
            frac = float(rest[:end] if end >= 0 else rest)
            rest = rest[end:] if end >= 0 else ""
        off = self.zone_offset(rest.strip())
        ts = sec + frac - off
        if self.first is None or ts < self.first[0]:
            self.first = (ts, off)
        return ts

    def _epoch(self, text: str) -> float:  # %n: seconds since the epoch, with milliseconds
        ts = float(text)
        if not 0 < ts < 1e11:
            raise ValueError(text)
        if self.first is None or ts < self.first[0]:
            self.first = (ts, 0)
        return ts

    def iso(self, ts: float) -> str:
        off = self.first[1] if self.first else 0
        return datetime.fromtimestamp(ts, timezone(timedelta(seconds=off))).isoformat(timespec="milliseconds")


# ---- files ---------------------------------------------------------------------------------------

def open_text(path: Path, newline: str | None = "\n") -> io.TextIOWrapper:
    """The file as text, decompressed when it is gzip (by its first bytes, not its name). Bytes that are
    not UTF-8 become U+FFFD: a log mixes the encodings of its databases."""
    try:
        raw = open(path, "rb")
    except IsADirectoryError:
        raise UserError(f"{path}: a folder, not a log file; give the log files themselves") from None
    except FileNotFoundError:
        raise UserError(f"{path}: no such log file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror}); give a log file you may read") from None
    try:
        magic = raw.peek(2)[:2]
    except OSError as exc:
        raw.close()
        raise UserError(f"{path}: cannot be read ({exc.strerror}); give a log file you may read") from None
    stream = gzip.GzipFile(fileobj=raw, mode="rb") if magic == b"\x1f\x8b" else raw
    return io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline=newline)


def read_failure(path: Path, exc: BaseException) -> UserError:
    """What a failure while reading a file's stream means, in one line."""
    if isinstance(exc, (EOFError, gzip.BadGzipFile, zlib.error)):
        return UserError(f"{path}: a truncated or damaged gzip file ({exc}); copy the whole file again")
    return UserError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})")


_READ_ERRORS = (EOFError, OSError, zlib.error)
_CSV_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? [^ ,]*,")


def first_line(path: Path) -> str:
    """The first non-empty line of the file ('' if none)."""
    with open_text(path) as f:
        try:
            for line in f:
                if line.strip():
                    return line
        except _READ_ERRORS as exc:
            raise read_failure(path, exc) from None
    return ""


def detect_format(path: Path) -> str:
    """csvlog, jsonlog or stderr, by the first line's content."""
    line = first_line(path)
    if not line:
        raise UserError(f"{path}: an empty log file; give the server's log files (docs/production.md)")
    if line.startswith("{"):
        try:
            if "timestamp" in json.loads(line):
                return "jsonlog"
        except ValueError:
            pass
    if _CSV_TIME.match(line):
        return "csvlog"
    return "stderr"


# ---- csvlog --------------------------------------------------------------------------------------

# csvlog's columns (PostgreSQL 13 has the first 24, 14 and later all 26)
_C_TIME, _C_USER, _C_DB, _C_PID, _C_FROM, _C_SESSION, _C_LINE = range(7)
_C_SEVERITY, _C_STATE, _C_MESSAGE, _C_DETAIL = 11, 12, 13, 14
_C_QUERY, _C_APP = 19, 22
_CSV_MIN_COLUMNS = 23


def read_csvlog(path: Path, clock: Clock, bad: Unreadable) -> Iterator[Entry]:
    name = str(path)
    csv.field_size_limit(sys.maxsize)  # a statement of megabytes is one field
    with open_text(path, newline="") as f:
        reader = csv.reader(f)
        start = 1  # the line the next record starts on
        try:
            for row in reader:
                line = start
                start = reader.line_num + 1
                if len(row) < _CSV_MIN_COLUMNS:
                    if row:
                        bad.add(name, line, f"{len(row)} columns, csvlog has {_CSV_MIN_COLUMNS} or more")
                    continue
                try:
                    ts = clock.parse(row[_C_TIME])
                    pid = int(row[_C_PID])
                except ValueError:
                    bad.add(name, line, f"no log time and process id at its start: {row[0][:40]!r}")
                    continue
                yield Entry(ts, name, line, row[_C_SESSION] or None, pid, row[_C_USER] or None,
                            row[_C_DB] or None, row[_C_APP] or None, row[_C_FROM] or None, row[_C_SEVERITY],
                            row[_C_MESSAGE], row[_C_DETAIL] or None, row[_C_QUERY] or None,
                            row[_C_STATE] or None)
        except csv.Error as exc:
            bad.add(name, start, f"not CSV ({exc})")
        except _READ_ERRORS as exc:
            raise read_failure(path, exc) from None


# ---- jsonlog -------------------------------------------------------------------------------------

def read_jsonlog(path: Path, clock: Clock, bad: Unreadable) -> Iterator[Entry]:
    name = str(path)
    loads = json.loads
    with open_text(path) as f:
        try:
            for line, text in enumerate(f, 1):
                try:
                    d = loads(text)
                    ts = clock.parse(d["timestamp"])
                    pid = int(d.get("pid", 0))
                except (ValueError, KeyError, TypeError, AttributeError):
                    if text.strip():
                        bad.add(name, line, f"not a jsonlog record: {text.strip()[:60]!r}")
                    continue
                host = d.get("remote_host")
                port = d.get("remote_port")
                client = f"{host}:{port}" if host and port else host
                yield Entry(ts, name, line, d.get("session_id"), pid, d.get("user"), d.get("dbname"),
                            d.get("application_name"), client, d.get("error_severity", ""), d.get("message", ""),
                            d.get("detail"), d.get("statement"), d.get("state_code"))
        except _READ_ERRORS as exc:
            raise read_failure(path, exc) from None
