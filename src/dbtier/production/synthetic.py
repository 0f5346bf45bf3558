"""A synthetic workload from pg_stat_statements, for a production server that keeps no statement log.

pg_stat_statements holds each normalised statement with its calls and mean time, not who sent it
when, nor its values. From a CSV or JSON export of the view (`\\copy (select * from
pg_stat_statements) to FILE csv header`, or `select json_agg(s) from pg_stat_statements s`) or the
live view (`--dsn`, read-only), this builds a capture of kind "statistics": `--sessions` sessions over
`--duration` seconds, sending statements in seeded Poisson arrivals whose classes come in proportion to
their calls, each taking its class's mean time in production. Every statement is an `execute` of the
normalised text with no values: `param_sources` names, for each $n, the table.column it is compared
with (paramsource.py), for the replay to draw values from. Utility statements (BEGIN, SET, DDL),
statements nested in functions (toplevel false), those of other databases (and of other users, when
one is asked for) and those the role may not see are left out and counted. It is a mix in production's proportions, not production's sessions:
every report of it says it is synthetic."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa

from dbtier.errors import UserError
from dbtier.production import capture as capture_mod
from dbtier.production.capture import Capture, Source
from dbtier.production.importlog import class_table
from dbtier.production.logread import open_text
from dbtier.production.paramsource import is_utility, param_sources
from dbtier.production.stmtclass import Classifier
from dbtier.production.workdir import check_output, write_workload

#: statements per second per session when production's own rate is unknown (an export has no interval)
DEFAULT_RATE_PER_SESSION = 10.0
MAX_STATEMENTS = 5_000_000
_HIDDEN = "<insufficient privilege>"


@dataclass
class Synthesized:
    capture: Capture
    rate_per_s: float
    rate_from: str                      # where the rate came from, in words
    left_out: dict[str, int]            # why -> statement classes left out
    left_out_calls: dict[str, int]
    unknown_sources: int                # $n whose table.column could not be told
    params: int
    notes: list[str] = field(default_factory=list)


def _rows_from_file(path: Path) -> tuple[list[dict], str]:
    try:
        with open_text(path, newline="") as f:
            text = f.read()
    except (EOFError, OSError) as exc:
        raise UserError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        try:
            doc = json.loads(stripped)
            rows = doc if isinstance(doc, list) else [doc]
        except ValueError:
            try:
                rows = [json.loads(line) for line in stripped.splitlines() if line.strip()]
            except ValueError as exc:
                raise UserError(f"{path}: not a JSON export of pg_stat_statements ({exc})") from None
        if not all(isinstance(r, dict) for r in rows):
            raise UserError(f"{path}: not a JSON export of pg_stat_statements (expected objects, one per statement)")
        return rows, "pg_stat_statements-json"
    csv.field_size_limit(sys.maxsize)
    try:
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise UserError(f"{path}: not a CSV export of pg_stat_statements ({exc})") from None
    return rows, "pg_stat_statements-csv"


def _rows_from_dsn(dsn: str) -> tuple[list[dict], float | None]:
    import psycopg

    try:
        conn = psycopg.connect(dsn, options="-c default_transaction_read_only=on", connect_timeout=10)
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"--dsn: cannot connect ({first})") from None
    try:
        with conn:
            try:
                cur = conn.execute("SELECT s.*, d.datname, r.rolname FROM pg_stat_statements s "
                                   "LEFT JOIN pg_database d ON d.oid = s.dbid LEFT JOIN pg_roles r ON r.oid = s.userid")
                names = [c.name for c in cur.description]
                rows = [dict(zip(names, r)) for r in cur.fetchall()]
                info = conn.execute("SELECT extract(epoch FROM now() - stats_reset) FROM pg_stat_statements_info")
                seconds = info.fetchone()[0]
            except psycopg.Error as exc:
                first = str(exc).strip().splitlines()[0]
                raise UserError(f"--dsn: cannot read pg_stat_statements ({first}); it needs the extension "
                                "(CREATE EXTENSION pg_stat_statements) and a role with pg_read_all_stats") from None
    finally:
        conn.close()
    return rows, float(seconds) if seconds else None


def _number(row: dict, key: str, where: str) -> float:
    try:
        return float(row[key])
    except (KeyError, TypeError, ValueError):
        raise UserError(f"{where}: a row has no number in column {key!r}; export pg_stat_statements whole "
                        "(select * from pg_stat_statements)") from None


def _flag(value) -> bool:
    return value not in (False, "f", "false", "False", 0, "0")


def synthesize(statements: Path | None = None, dsn: str | None = None, database: str | None = None,
               sessions: int = 8, duration_s: float = 60.0, seed: int = 1,
               rate_per_s: float | None = None, user: str | None = None) -> Synthesized:
    """The synthetic capture (see the module's note) from an export file or a live server; `user`
    keeps one user's statements (its rolname where the export has it, else its userid)."""
    if (statements is None) == (dsn is None):
        raise UserError("give pg_stat_statements either as an exported file (--statements) or a server (--dsn)")
    if sessions < 1:
        raise UserError(f"--sessions {sessions}: at least 1")
    if not duration_s > 0:
        raise UserError(f"--duration {duration_s}: a number of seconds above 0")
    if statements is not None:
        rows, fmt = _rows_from_file(Path(statements))
        where, prod_seconds = str(statements), None
        source = Source(str(Path(statements).resolve()), fmt, capture_mod.file_sha256(Path(statements)))
    else:
        rows, prod_seconds = _rows_from_dsn(dsn)
        where, fmt = "--dsn", "pg_stat_statements-dsn"
        source = Source(_dsn_without_password(dsn), fmt, "")
    if not rows:
        raise UserError(f"{where}: pg_stat_statements is empty; let production run a while, or give its log")
    if "query" not in rows[0] or "calls" not in rows[0]:
        raise UserError(f"{where}: no 'query' and 'calls' columns: not an export of pg_stat_statements "
                        "(export it with select * from pg_stat_statements)")
    # the database: by name where the export has it (datname), else by its oid (dbid)
    db_key = "datname" if "datname" in rows[0] else "dbid"
    calls_per_db: Counter = Counter()
    for r in rows:
        calls_per_db[str(r.get(db_key))] += int(_number(r, "calls", where))
    if database is None:
        database = max(calls_per_db, key=lambda d: (calls_per_db[d], d))
    elif database not in calls_per_db:
        have = ", ".join(f"{d} ({n:,} calls)" for d, n in calls_per_db.most_common(5))
        raise UserError(f"{where}: no statements of database {database!r} ({db_key}); it has {have}")
    user_key = "rolname" if "rolname" in rows[0] else "userid"
    if user is not None and not any(str(r.get(user_key)) == user and str(r.get(db_key)) == database for r in rows):
        have = Counter(str(r.get(user_key)) for r in rows if str(r.get(db_key)) == database)
        raise UserError(f"{where}: no statements of user {user!r} ({user_key}) in database {database}; it has "
                        + ", ".join(f"{u} ({n} statements)" for u, n in have.most_common(5)))
    left: Counter = Counter()
    left_calls: Counter = Counter()
    kept: list[tuple[str, float, float]] = []   # text, calls, mean seconds
    for r in rows:
        calls = _number(r, "calls", where)
        text = str(r["query"] or "")
        why = None
        if str(r.get(db_key)) != database:
            why = "other databases"
        elif user is not None and str(r.get(user_key)) != user:
            why = "other users"
        elif text == _HIDDEN:
            why = "hidden from this role (it needs pg_read_all_stats)"
        elif "toplevel" in r and not _flag(r["toplevel"]):
            why = "nested in functions"
        else:
            utility = is_utility(text)
            why = "not parsed" if utility is None else ("utility statements" if utility else None)
        if why is None and calls <= 0:
            why = "never called"
        if why:
            left[why] += 1
            left_calls[why] += int(calls)
            continue
        mean = _number(r, "mean_exec_time", where) if "mean_exec_time" in r else \
            _number(r, "total_exec_time", where) / calls
        kept.append((text, calls, mean / 1000.0))
    if not kept:
        raise UserError(f"{where}: no statement of database {database} to replay (left out: "
                        + ", ".join(f"{n} {why}" for why, n in left.items()) + ")")
    total_calls = sum(c for _, c, _ in kept)
    if rate_per_s is None:
        if prod_seconds:
            rate_per_s = (total_calls + sum(left_calls.values()) - left_calls["other databases"]) / prod_seconds
            rate_from = f"production's own rate since pg_stat_statements was reset ({prod_seconds:,.0f} s ago)"
        else:
            rate_per_s = DEFAULT_RATE_PER_SESSION * sessions
            rate_from = (f"{DEFAULT_RATE_PER_SESSION:g} statements per second per session (an export tells no "
                         "interval; --rate sets it)")
    else:
        rate_from = "--rate"
    if rate_per_s * duration_s > MAX_STATEMENTS:
        raise UserError(f"{rate_per_s:,.0f} statements per second for {duration_s:g} s is more than "
                        f"{MAX_STATEMENTS:,} statements; give a shorter --duration or a lower --rate")
    cap, unknown, nparams = _mix(kept, database, sessions, duration_s, seed, rate_per_s, source)
    cap.counts.update(other_databases=left["other databases"], other_users=left["other users"],
                      utility=left["utility statements"],
                      nested=left["nested in functions"], not_parsed=left["not parsed"],
                      hidden=left["hidden from this role (it needs pg_read_all_stats)"])
    notes = [f"SYNTHETIC: a mix in the proportions of pg_stat_statements' calls over {sessions} sessions "
             f"and {duration_s:g} s (seed {seed}), not production's own sessions; parameter values are drawn "
             "at replay from the columns param_sources names"]
    if unknown:
        notes.append(f"{unknown} of {nparams} parameters have no column they could be drawn from "
                     "(LIMIT $n, an expression, an unqualified column among several tables)")
    return Synthesized(cap, rate_per_s, rate_from, dict(left), dict(left_calls), unknown, nparams, notes)


def _mix(kept, database, sessions, duration_s, seed, rate_per_s, source) -> tuple[Capture, int, int]:
    rng = np.random.default_rng(seed)
    classifier = Classifier()
    texts = [t for t, _, _ in kept]
    class_ids = [classifier.classify(t) for t in texts]
    sources = [param_sources(t) or [] for t in texts]
    p = np.array([c for _, c, _ in kept], dtype=float)
    p /= p.sum()
    means = np.array([m for _, _, m in kept])
    per_session = rate_per_s / sessions
    cols: dict[str, list] = {k: [] for k in capture_mod.STATEMENTS.names}
    for s in range(sessions):
        expected = per_session * duration_s
        gaps = rng.exponential(1.0 / per_session, int(expected + 6 * np.sqrt(expected) + 20))
        starts = np.cumsum(gaps)
        starts = starts[starts < duration_s]
        which = rng.choice(len(kept), size=len(starts), p=p)
        cols["session"] += [s] * len(starts)
        cols["seq"] += list(range(len(starts)))
        cols["start_s"] += starts.tolist()
        cols["duration_s"] += means[which].tolist()
        cols["class_id"] += [class_ids[k] for k in which]
        cols["text"] += [texts[k] for k in which]
        cols["param_sources"] += [sources[k] for k in which]
    n = len(cols["session"])
    cols.update(kind=["execute"] * n, name=[None] * n, params=[None] * n, error_state=[None] * n,
                error_message=[None] * n)
    statements = pa.table(cols, schema=capture_mod.STATEMENTS)
    sess = pa.table({"session": list(range(sessions)), "log_session": [f"synthetic-{i}" for i in range(sessions)],
                     "database": [database] * sessions, "user": [None] * sessions,
                     "application": ["synthetic"] * sessions, "client": [None] * sessions,
                     "start_s": [0.0] * sessions, "end_s": [float(duration_s)] * sessions},
                    schema=capture_mod.SESSIONS)
    classes = class_table(statements, classifier.normalized) if n else \
        pa.table({k: [] for k in capture_mod.CLASSES.names}, schema=capture_mod.CLASSES)
    all_sources = [x for k in range(len(kept)) for x in sources[k]]
    unknown = sum(x is None for x in all_sources)
    counts = {"sessions": sessions, "statements": n, "simple": 0, "execute": n, "prepared": 0,
              "classes": classes.num_rows, "copy_from_stdin": 0, "fastpath": 0, "other_databases": 0,
              "errors": 0, "unreadable_lines": 0, "unknown_param_sources": unknown}
    start = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    cap = Capture(kind="statistics", database=database, sources=[source], start=start, span_s=float(duration_s),
                  counts=counts, sessions=sess, statements=statements, classes=classes)
    return cap, unknown, len(all_sources)


def _dsn_without_password(dsn: str) -> str:
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        parts = conninfo_to_dict(dsn)
        parts.pop("password", None)
        return make_conninfo(**parts)
    except Exception:  # a DSN psycopg cannot take apart is not recorded
        return "(dsn)"


def import_statistics(out: Path, **kw) -> Synthesized:
    """synthesize(**kw), written into the workload directory `out`."""
    out = check_output(Path(out))
    result = synthesize(**kw)
    write_workload(out, result.capture)
    return result
