"""A snapshot of a live server's statistics (`dbtier stats snapshot`): read in one READ ONLY
transaction with a role that may read every statistic (pg_read_all_stats, or a superuser), and
written as versioned JSON, beside and renamed.

The format (FORMAT 1) is a contract other parts read (--settings-from takes `settings`):
    format, kind ("stats-snapshot"), taken_at (ISO 8601 with its zone),
    server   = {version, version_num, system_identifier, database}
    settings = {name: {setting, unit, source, boot_val, reset_val, vartype}} for every row of pg_settings
and beside them what a delta needs: `database` (pg_stat_database of this database), `io` (pg_stat_io),
`tables` (pg_stat_user_tables joined with pg_statio_user_tables, with each table's and its TOAST's
sizes), `indexes` (pg_stat_user_indexes with pg_statio_user_indexes and sizes), `statements`
(pg_stat_statements and pg_stat_statements_info) and `kcache` (pg_stat_kcache), each of the last two
with `installed` and, when not, a `note` saying why not.

A snapshot may come from anyone's server and anyone's hands, so `read` checks what it uses and
fails in one line naming the file."""

from __future__ import annotations

import json
from pathlib import Path

from dbtier.errors import UserError

FORMAT = 1
KIND = "stats-snapshot"
#: the role a snapshot needs (or a superuser)
ROLE = "pg_read_all_stats"
#: seconds a snapshot waits to connect before it says the server cannot be reached
CONNECT_TIMEOUT_S = 10

SETTING_FIELDS = ("setting", "unit", "source", "boot_val", "reset_val", "vartype")

_TABLES = """
SELECT s.schemaname, s.relname, s.relid::bigint, c.reltoastrelid::bigint,
       pg_relation_size(s.relid),
       CASE WHEN c.reltoastrelid <> 0 THEN pg_relation_size(c.reltoastrelid) ELSE 0 END,
       CASE WHEN c.reltoastrelid <> 0 THEN coalesce((SELECT sum(pg_relation_size(i.indexrelid))
            FROM pg_index i WHERE i.indrelid = c.reltoastrelid), 0) ELSE 0 END,
       s.seq_scan, s.seq_tup_read, s.idx_scan, s.idx_tup_fetch, s.n_tup_ins, s.n_tup_upd, s.n_tup_del,
       s.n_tup_hot_upd, s.n_live_tup, s.n_dead_tup,
       io.heap_blks_read, io.heap_blks_hit, io.idx_blks_read, io.idx_blks_hit,
       io.toast_blks_read, io.toast_blks_hit, io.tidx_blks_read, io.tidx_blks_hit
FROM pg_stat_user_tables s JOIN pg_statio_user_tables io USING (relid) JOIN pg_class c ON c.oid = s.relid
ORDER BY s.schemaname, s.relname
"""
_TABLE_COLUMNS = ("schema", "name", "relid", "toast_relid", "bytes", "toast_bytes", "toast_index_bytes",
                  "seq_scan", "seq_tup_read", "idx_scan", "idx_tup_fetch", "n_tup_ins", "n_tup_upd", "n_tup_del",
                  "n_tup_hot_upd", "n_live_tup", "n_dead_tup", "heap_blks_read", "heap_blks_hit", "idx_blks_read",
                  "idx_blks_hit", "toast_blks_read", "toast_blks_hit", "tidx_blks_read", "tidx_blks_hit")

_INDEXES = """
SELECT s.schemaname, s.relname, s.indexrelname, s.relid::bigint, s.indexrelid::bigint, pg_relation_size(s.indexrelid),
       s.idx_scan, s.idx_tup_read, s.idx_tup_fetch, io.idx_blks_read, io.idx_blks_hit
FROM pg_stat_user_indexes s JOIN pg_statio_user_indexes io USING (indexrelid)
ORDER BY s.schemaname, s.indexrelname
"""
_INDEX_COLUMNS = ("schema", "table", "name", "relid", "indexrelid", "bytes", "idx_scan", "idx_tup_read",
                  "idx_tup_fetch", "idx_blks_read", "idx_blks_hit")

_DATABASE = """
SELECT numbackends, xact_commit, xact_rollback, blks_read, blks_hit, tup_returned, tup_fetched, tup_inserted,
       tup_updated, tup_deleted, temp_files, temp_bytes, blk_read_time, blk_write_time, stats_reset::text
FROM pg_stat_database WHERE datname = current_database()
"""
_DATABASE_COLUMNS = ("numbackends", "xact_commit", "xact_rollback", "blks_read", "blks_hit", "tup_returned",
                     "tup_fetched", "tup_inserted", "tup_updated", "tup_deleted", "temp_files", "temp_bytes",
                     "blk_read_time", "blk_write_time", "stats_reset")

IO_KEYS = ("backend_type", "object", "context")
IO_COUNTS = ("reads", "read_bytes", "read_time", "writes", "write_bytes", "write_time", "writebacks",
             "writeback_time", "extends", "extend_bytes", "hits", "evictions", "reuses", "fsyncs", "fsync_time")

_STATEMENT_COLUMNS = ("userid", "dbid", "toplevel", "queryid", "query", "calls", "total_exec_time", "rows",
                      "shared_blks_hit", "shared_blks_read", "shared_blks_dirtied", "shared_blks_written",
                      "local_blks_read", "temp_blks_read", "temp_blks_written", "shared_blk_read_time",
                      "shared_blk_write_time")


#: every query of a snapshot holds this after its first word, so a delta leaves the snapshots' own
#: statements out of production's statement classes (pg_stat_statements keeps a comment inside a
#: statement's text, not one before it)
MARKER = "/* dbtier stats snapshot */"


def _execute(conn, query: str, params=None):
    first, _, rest = query.strip().partition(" ")
    return conn.execute(f"{first} {MARKER} {rest}", params)


def _number(v):
    """Counts as integers, times as floats; the JSON keeps them as the view gave them."""
    if v is None or isinstance(v, (int, float, str, bool)):
        return v
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return int(f) if f.is_integer() and abs(f) < 2**62 else f


def _rows(conn, query: str, columns: tuple[str, ...]) -> list[dict]:
    return [dict(zip(columns, map(_number, row))) for row in _execute(conn, query).fetchall()]


def _columns(conn, relation: str) -> set[str]:
    """A view's (or function's) columns on this server: they vary across PostgreSQL versions (17
    renamed pg_stat_statements' blk_read_time; 18 added pg_stat_io's byte counts)."""
    return {d.name for d in _execute(conn, f"SELECT * FROM {relation} LIMIT 0").description}


def _select(columns: tuple[str, ...], present: set[str], cast: dict[str, str] | None = None) -> str:
    """The columns this server has, NULL for those it lacks (named as this format names them)."""
    cast = cast or {}
    return ", ".join(f"{c}{cast.get(c, '')}" if c in present else f"NULL AS {c}" for c in columns)


def connect(dsn: str):
    """A connection to production (take() reads in a READ ONLY transaction of its own); a refusal in
    one line that names what to do."""
    import psycopg

    try:
        conn = psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True)
    except psycopg.ProgrammingError as exc:  # a DSN that does not parse
        raise UserError(f"--dsn: not a connection string ({_first_line(exc)}); give e.g. "
                        "'host=db1 dbname=shop user=monitor'") from None
    except psycopg.OperationalError as exc:
        raise UserError(f"--dsn: cannot connect ({_first_line(exc)}); check the host, port, database and "
                        "user, and that the server accepts you (pg_hba.conf)") from None
    return conn


def _first_line(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:200]


def check_privilege(conn) -> None:
    user, super_, member = _execute(conn,
        f"SELECT current_user, rolsuper, pg_has_role(current_user, '{ROLE}', 'MEMBER') "
        "FROM pg_roles WHERE rolname = current_user").fetchone()
    if not (super_ or member):
        raise UserError(f"role {user} may not read every server's statistics; as a superuser run: GRANT {ROLE} "
                        f"TO {_ident(user)}; then take the snapshot again")


def _ident(name: str) -> str:
    return name if name.isidentifier() and name == name.lower() else '"' + name.replace('"', '""') + '"'


def _extension(conn, name: str) -> str | None:
    row = _execute(conn, "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                       "WHERE e.extname = %s", (name,)).fetchone()
    return row[0] if row else None


def _statements(conn) -> dict:
    schema = _extension(conn, "pg_stat_statements")
    if schema is None:
        return {"installed": False, "note": "pg_stat_statements is not installed in this database (CREATE "
                                            "EXTENSION pg_stat_statements, with it in shared_preload_libraries)"}
    q = lambda n: f'"{schema}".{n}'  # noqa: E731
    _execute(conn, "SAVEPOINT statements")
    try:
        cols = _select(_STATEMENT_COLUMNS, _columns(conn, f"{q('pg_stat_statements')}(true)"))
        rows = _rows(conn, f"SELECT {cols} FROM {q('pg_stat_statements')}(true) "
                           "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
                     _STATEMENT_COLUMNS)
        dealloc, reset = _execute(conn, f"SELECT dealloc, stats_reset::text FROM {q('pg_stat_statements_info')}").fetchone()
    except Exception as exc:  # installed but not preloaded: the view refuses
        _execute(conn, "ROLLBACK TO SAVEPOINT statements")
        return {"installed": False, "note": f"pg_stat_statements cannot be read: {_first_line(exc)}"}
    return {"installed": True, "rows": rows, "info": {"dealloc": int(dealloc), "stats_reset": reset}}


def _kcache(conn) -> dict:
    schema = _extension(conn, "pg_stat_kcache")
    if schema is None:
        return {"installed": False, "note": "pg_stat_kcache is not installed: blocks read past shared_buffers "
                                            "cannot be told apart as kernel-cache hits or device reads"}
    _execute(conn, "SAVEPOINT kcache")
    try:
        cur = _execute(conn, f'SELECT * FROM "{schema}".pg_stat_kcache()')
        names = [d.name for d in cur.description]
        rows = [dict(zip(names, map(_number, r))) for r in cur.fetchall()]
    except Exception as exc:
        _execute(conn, "ROLLBACK TO SAVEPOINT kcache")
        return {"installed": False, "note": f"pg_stat_kcache cannot be read: {_first_line(exc)}"}
    return {"installed": True, "rows": rows}


def take(conn) -> dict:
    """The snapshot, in one READ ONLY repeatable-read transaction (statistics read as of one moment:
    stats_fetch_consistency caches them for the transaction)."""
    check_privilege(conn)
    _execute(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")  # ours, so marked as the snapshot's
    taken_at, database, version, version_num = _execute(conn,
        "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"'), current_database(), version(), "
        "current_setting('server_version_num')::int").fetchone()
    system_identifier = str(_execute(conn, "SELECT system_identifier FROM pg_control_system()").fetchone()[0])
    settings = {}
    for row in _execute(conn, f"SELECT name, {', '.join(SETTING_FIELDS)} FROM pg_settings ORDER BY name").fetchall():
        settings[row[0]] = dict(zip(SETTING_FIELDS, row[1:]))
    io = []
    if int(version_num) >= 160000:  # pg_stat_io is PostgreSQL 16's
        io_cols = _select((*IO_KEYS, *IO_COUNTS, "stats_reset"), _columns(conn, "pg_stat_io"), {"stats_reset": "::text"})
        io = [{**dict(zip(IO_KEYS, r[:3])), **dict(zip(IO_COUNTS, map(_number, r[3:-1]))), "stats_reset": r[-1]}
              for r in _execute(conn, f"SELECT {io_cols} FROM pg_stat_io").fetchall()]
    db_rows = _rows(conn, _DATABASE, _DATABASE_COLUMNS)
    doc = {
        "format": FORMAT, "kind": KIND, "taken_at": taken_at,
        "server": {"version": version, "version_num": int(version_num), "system_identifier": system_identifier,
                   "database": database},
        "settings": settings,
        "database": db_rows[0] if db_rows else {},
        "io": io,
        "tables": _rows(conn, _TABLES, _TABLE_COLUMNS),
        "indexes": _rows(conn, _INDEXES, _INDEX_COLUMNS),
        "statements": _statements(conn),
        "kcache": _kcache(conn),
    }
    _execute(conn, "ROLLBACK")
    return doc


def snapshot(dsn: str) -> dict:
    import psycopg

    conn = connect(dsn)
    try:
        return take(conn)
    except psycopg.Error as exc:  # a server that refuses one of the snapshot's queries
        raise UserError(f"--dsn: the server refused a query of the snapshot ({_first_line(exc)}); "
                        "dbtier stats snapshot reads PostgreSQL 16 or later's statistics views") from None
    finally:
        conn.close()


def write_json(path: Path, doc: dict) -> Path:
    """Written beside and renamed (a failure or Ctrl-C leaves the file as it was, or none), readable
    by its owner alone: production's settings and statement texts."""
    from dbtier.workspace import write_private

    path = Path(path)
    try:
        write_private(path, json.dumps(doc, indent=1) + "\n", mode=0o600)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    return path


def load_json(path: Path, kind: str, what: str) -> dict:
    """A document of `kind` (stats-snapshot or stats-delta) of this format, or one line saying why not."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (make one with {what})") from None
    except IsADirectoryError:
        raise UserError(f"{path}: a folder; give the JSON file {what} wrote") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: line {exc.lineno}: not JSON ({exc.msg}); give the file {what} wrote") from None
    if not isinstance(doc, dict) or doc.get("kind") != kind:
        found = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
        raise UserError(f"{path}: not a {kind} (its kind is {found!r}); give the file {what} wrote")
    if doc.get("format") != FORMAT:
        raise UserError(f"{path}: {kind} format {doc.get('format')!r}; this dbtier reads format {FORMAT}: make it "
                        "again with this version")
    return doc


def read(path: Path) -> dict:
    """A snapshot file, checked: the keys a delta reads are there and typed."""
    doc = load_json(path, KIND, "dbtier stats snapshot")
    server = doc.get("server")
    if not isinstance(server, dict) or not all(isinstance(server.get(k), str) for k in
                                               ("system_identifier", "database", "version")):
        raise UserError(f"{path}: 'server' lacks its system_identifier, database or version; take the snapshot again")
    if not isinstance(doc.get("taken_at"), str):
        raise UserError(f"{path}: 'taken_at' is missing; take the snapshot again")
    for key in ("tables", "indexes", "io"):
        rows = doc.get(key)
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise UserError(f"{path}: '{key}' is not a list of rows; take the snapshot again")
    for key, columns in (("tables", _TABLE_COLUMNS), ("indexes", _INDEX_COLUMNS)):
        for i, row in enumerate(doc[key]):
            for c in columns:
                v = row.get(c)
                ok = isinstance(v, str) if c in ("schema", "name", "table") else (
                    v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0))
                if not ok:
                    raise UserError(f"{path}: {key}[{i}] ({row.get('name')!r}): {c} is {v!r}; take the snapshot again")
    for key in ("settings", "database", "statements", "kcache"):
        if not isinstance(doc.get(key), dict):
            raise UserError(f"{path}: '{key}' is missing; take the snapshot again")
    return doc
