"""A captured workload: what `dbtier workload import` writes and `dbtier run replay` reads.

A workload directory holds four files:

- `workload.toml`: what it came from (the logs or statistics, with their sha256), the database it is
  of, its time span and its counts (see Capture.counts);
- `sessions.parquet`: one row per recorded session, in order of its start;
- `statements.parquet`: one row per statement the sessions sent, each session's rows in its order;
- `classes.parquet`: one row per statement class, normalized as pg_stat_statements does (constants
  become $n), which reports group by.

Times are seconds from the capture's start (the first session's start), so a replay schedules them
without a clock of the production server's. A statement's start is when the server began it (a log
that writes `duration:` at the end is moved back by that duration).

A statement is sent as production's client sent it: `simple` (the simple query protocol: its text,
which may hold several statements), or `execute` (the extended protocol: a text with $1..$n, its
parameter values as text, and the prepared statement's name, None for the unnamed one).

A capture built from statistics alone (kind "statistics": pg_stat_statements, no statement log) has
no logged values: each parameter names the `table.column` its values are drawn from at replay time
(`param_sources`), and every report of it says it is synthetic.

The directory is content dbtier may not have written (a user can hand over anyone's), so `read`
checks every column's type, every range and every reference before a replay starts, and a damaged
directory fails in one line that names the file and what is wrong."""

from __future__ import annotations

import hashlib
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dbtier.errors import UserError

FORMAT = 1
KINDS = ("log", "statistics")
STATEMENT_KINDS = ("simple", "execute")

SESSIONS = pa.schema([
    ("session", pa.int32()),          # 0..n-1, in order of start
    ("log_session", pa.string()),     # the session's id in the log (%c), for a reader who greps it
    ("database", pa.string()),
    ("user", pa.string()),
    ("application", pa.string()),
    ("client", pa.string()),          # host:port or [local]
    ("start_s", pa.float64()),        # connection time, seconds from the capture's start
    ("end_s", pa.float64()),          # disconnection time; null if still connected when the capture ended
])

STATEMENTS = pa.schema([
    ("session", pa.int32()),
    ("seq", pa.int32()),              # 0.. within its session, the order the session sent them
    ("start_s", pa.float64()),
    ("duration_s", pa.float64()),     # null where the log gave no duration
    ("kind", pa.string()),            # simple | execute
    ("name", pa.string()),            # a named prepared statement's name; null for simple and unnamed
    ("text", pa.string()),
    ("params", pa.list_(pa.string())),         # execute: $1..$n as text (a null element is SQL NULL)
    ("param_sources", pa.list_(pa.string())),  # statistics: $n's "table.column"; null for a log
    ("class_id", pa.int64()),         # its statement class (classes.parquet)
    ("error_state", pa.string()),     # the SQLSTATE production answered; null if it succeeded
    ("error_message", pa.string()),
])

CLASSES = pa.schema([
    ("class_id", pa.int64()),
    ("normalized", pa.string()),      # the text with constants as $n, as pg_stat_statements shows it
    ("calls", pa.int64()),            # statements of this class in the capture
    ("mean_s", pa.float64()),         # their mean duration in production; null where none was logged
])

_TABLES = {"sessions": SESSIONS, "statements": STATEMENTS, "classes": CLASSES}
META = "workload.toml"


@dataclass
class Source:
    path: str
    format: str            # csvlog | jsonlog | stderr | pg_stat_statements-csv | ...
    sha256: str


@dataclass
class Capture:
    kind: str                         # log | statistics
    database: str
    sources: list[Source]
    start: str                        # ISO 8601, the capture's first event (with its zone)
    span_s: float
    counts: dict[str, int] = field(default_factory=dict)  # sessions, statements, prepared, copy_from_stdin,
                                                          # fastpath, other_databases, unreadable_lines, errors
    sessions: pa.Table | None = None
    statements: pa.Table | None = None
    classes: pa.Table | None = None
    path: Path | None = None

    @property
    def synthetic(self) -> bool:
        return self.kind == "statistics"


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def write(directory: Path, capture: Capture) -> Path:
    """Writes the directory (made if missing; its four files replaced whole, each written beside and
    renamed, so a failure leaves no half-written file)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tables = {"sessions": capture.sessions, "statements": capture.statements, "classes": capture.classes}
    for name, table in tables.items():
        if table is None:
            raise ValueError(f"capture.{name} is missing")
        table = table.select(_TABLES[name].names).cast(_TABLES[name])
        tmp = directory / f".{name}.parquet.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, directory / f"{name}.parquet")
    lines = ["# A captured workload: `dbtier run replay DIR` replays it.", "[workload]",
             f"format = {FORMAT}", f"kind = {_toml_str(capture.kind)}",
             f"database = {_toml_str(capture.database)}", f"start = {_toml_str(capture.start)}",
             f"span_s = {float(capture.span_s)!r}", "", "[counts]"]
    lines += [f"{k} = {int(v)}" for k, v in capture.counts.items()]
    for s in capture.sources:
        lines += ["", "[[source]]", f"path = {_toml_str(s.path)}", f"format = {_toml_str(s.format)}",
                  f"sha256 = {_toml_str(s.sha256)}"]
    tmp = directory / f".{META}.tmp"
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, directory / META)
    capture.path = directory
    return directory


def _fail(directory: Path, what: str) -> UserError:
    return UserError(f"{directory}: {what}; import the workload again (dbtier workload import)")


def _read_table(directory: Path, name: str) -> pa.Table:
    path = directory / f"{name}.parquet"
    schema = _TABLES[name]
    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise _fail(directory, f"{name}.parquet is missing") from None
    except (OSError, pa.ArrowException) as exc:
        raise _fail(directory, f"{name}.parquet cannot be read ({str(exc).splitlines()[0][:120]})") from None
    missing = [f.name for f in schema if f.name not in table.column_names]
    if missing:
        raise _fail(directory, f"{name}.parquet has no column {missing[0]!r}")
    table = table.select(schema.names)
    for f in schema:
        if not table.schema.field(f.name).type.equals(f.type):
            raise _fail(directory, f"{name}.parquet: column {f.name!r} is {table.schema.field(f.name).type}, "
                                   f"not {f.type}")
    return table


def _check(directory: Path, cap: Capture) -> None:
    import numpy as np

    sessions, statements, classes = cap.sessions, cap.statements, cap.classes
    n = sessions.num_rows
    sid = sessions["session"].to_numpy(zero_copy_only=False)
    if n and (sessions["session"].null_count or not np.array_equal(sid, np.arange(n))):
        raise _fail(directory, "sessions.parquet: sessions are not numbered 0..n-1 in order")
    starts = sessions["start_s"]
    if starts.null_count or (n and not np.all(np.isfinite(starts.to_numpy()))):
        raise _fail(directory, "sessions.parquet: a session has no start time")
    if n and (np.any(starts.to_numpy() < 0) or np.any(np.diff(starts.to_numpy()) < 0)):
        raise _fail(directory, "sessions.parquet: start times are negative or out of order")
    ends = sessions["end_s"].to_numpy(zero_copy_only=False)
    if n and np.any(~np.isnan(ends.astype(float)) & (ends.astype(float) < starts.to_numpy())):
        raise _fail(directory, "sessions.parquet: a session ends before it starts")
    m = statements.num_rows
    if m:
        for col in ("session", "seq", "start_s", "kind", "text", "class_id"):
            if statements[col].null_count:
                raise _fail(directory, f"statements.parquet: column {col!r} has an empty value")
        ss = statements["session"].to_numpy()
        if ss.min() < 0 or ss.max() >= n:
            raise _fail(directory, "statements.parquet: a statement names a session that does not exist")
        seq = statements["seq"].to_numpy()
        order = np.lexsort((seq, ss))
        if not np.array_equal(order, np.arange(m)):
            raise _fail(directory, "statements.parquet: statements are not in order of session and seq")
        st = statements["start_s"].to_numpy()
        if not np.all(np.isfinite(st)) or np.any(st < 0):
            raise _fail(directory, "statements.parquet: a start time is negative or not a number")
        dur = statements["duration_s"].to_numpy(zero_copy_only=False).astype(float)
        if np.any(dur[~np.isnan(dur)] < 0):
            raise _fail(directory, "statements.parquet: a duration is negative")
        kinds = set(statements["kind"].unique().to_pylist())
        if not kinds <= set(STATEMENT_KINDS):
            raise _fail(directory, f"statements.parquet: unknown statement kind {sorted(kinds - set(STATEMENT_KINDS))[0]!r}")
        known = set(classes["class_id"].to_pylist())
        if not set(statements["class_id"].unique().to_pylist()) <= known:
            raise _fail(directory, "statements.parquet: a statement's class is not in classes.parquet")


def read(directory: Path, check: bool = True) -> Capture:
    """The capture in a workload directory, checked (see the module's note)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"{directory}: no such workload directory (make one with dbtier workload import)")
    try:
        meta = tomllib.loads((directory / META).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{directory}: not a workload directory (no {META}; make one with dbtier workload import)") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise _fail(directory, f"{META} cannot be read ({str(exc).splitlines()[0][:120]})") from None
    w = meta.get("workload")
    if not isinstance(w, dict):
        raise _fail(directory, f"{META} has no [workload] table")
    if w.get("format") != FORMAT:
        raise UserError(f"{directory}: workload format {w.get('format')!r}; this dbtier reads format {FORMAT}: "
                        "import the workload again with this version")
    try:
        cap = Capture(kind=str(w["kind"]), database=str(w["database"]), start=str(w["start"]),
                      span_s=float(w["span_s"]),
                      counts={str(k): int(v) for k, v in dict(meta.get("counts", {})).items()},
                      sources=[Source(str(s["path"]), str(s["format"]), str(s["sha256"]))
                               for s in meta.get("source", [])])
    except (KeyError, TypeError, ValueError) as exc:
        raise _fail(directory, f"{META}: a value is missing or mistyped ({exc})") from None
    if cap.kind not in KINDS:
        raise _fail(directory, f"{META}: kind {cap.kind!r} is neither log nor statistics")
    cap.sessions = _read_table(directory, "sessions")
    cap.statements = _read_table(directory, "statements")
    cap.classes = _read_table(directory, "classes")
    cap.path = directory
    if check:
        _check(directory, cap)
    return cap
