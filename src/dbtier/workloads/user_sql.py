"""`dbtier run sql`: your own SQL (and your own database) on the virtual devices.

Setup (unmeasured, the emulation paused): --restore DUMP, then each --setup FILE, by psql. Then the
objects are placed as --place says, the server restarts cold, and each --run FILE is measured, one
phase per file or per `-- phase: NAME` section, statement by statement on one connection (so BEGIN
... COMMIT in a file works as in psql). Each phase reports what every run reports, and each
statement's elapsed time and rows. On MariaDB (--engine mariadb) the setup files are run by the
mariadb client (a mariadb-dump file is one) and the measured ones are read as MariaDB's SQL."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pymysql
from psycopg import errors as pgerrors

from dbtier.errors import UserError
from dbtier.workloads import restore, sqlfile
from dbtier.workloads.base import Footprint, Param, Phase


def _sql_error(stmt: sqlfile.Statement, exc: psycopg.Error, timeout_s: float) -> UserError:
    if isinstance(exc, pgerrors.QueryCanceled) and timeout_s:
        return UserError(f"{stmt.where}: the statement ran past --timeout {timeout_s:g} s and was cancelled "
                         f"({stmt.summary(60)})")
    message = (exc.diag.message_primary if getattr(exc, "diag", None) and exc.diag.message_primary
               else str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    return UserError(f"{stmt.where}: {message}")


#: MariaDB's error when max_statement_time stopped a statement
_MARIADB_TIMEOUT = 1969


def run_mariadb_statements(db, statements: list[sqlfile.Statement], timeout_s: float, progress) -> list[dict]:
    """run_statements on MariaDB (max_statement_time for --timeout)."""
    out = []
    with db.connect() as conn, conn.cursor() as cur:
        if timeout_s:
            cur.execute("SET SESSION max_statement_time = %s", (timeout_s,))
        for stmt in statements:
            t0 = time.monotonic()
            try:
                cur.execute(stmt.text)  # as written: no client-side parameters
                rows = len(cur.fetchall()) if cur.description else max(cur.rowcount, 0)
            except pymysql.err.MySQLError as exc:
                code, message = (exc.args + (None, str(exc)))[:2] if exc.args else (None, type(exc).__name__)
                if code == _MARIADB_TIMEOUT and timeout_s:
                    raise UserError(f"{stmt.where}: the statement ran past --timeout {timeout_s:g} s and was "
                                    f"cancelled ({stmt.summary(60)})") from None
                raise UserError(f"{stmt.where}: {message}") from None
            out.append({"where": stmt.where, "statement": stmt.summary(), "elapsed_s": time.monotonic() - t0,
                        "rows": rows})
            progress.advance()
    return out


def run_statements(db, statements: list[sqlfile.Statement], timeout_s: float, progress,
                   engine: str = "postgres") -> dict:
    """Runs the statements in order on one connection; per statement its elapsed time and rows (rows a
    query returned, fetched as a client would; rows a command changed)."""
    if engine == "mariadb":
        out = run_mariadb_statements(db, statements, timeout_s, progress)
        return {"statement_times": out, "rows": sum(s["rows"] for s in out)}
    out = []
    with db.connect() as conn:
        if timeout_s:
            conn.execute("SELECT set_config('statement_timeout', %s, false)", (f"{int(timeout_s * 1000)}ms",))
        for stmt in statements:
            t0 = time.monotonic()
            try:
                cur = conn.execute(stmt.text.encode())  # as written: no client-side parameters
                rows = len(cur.fetchall()) if cur.description else max(cur.rowcount, 0)
            except psycopg.Error as exc:
                raise _sql_error(stmt, exc, timeout_s) from None
            out.append({"where": stmt.where, "statement": stmt.summary(), "elapsed_s": time.monotonic() - t0,
                        "rows": rows})
            progress.advance()
    return {"statement_times": out, "rows": sum(s["rows"] for s in out)}


class UserSql(restore.UserWorkload):
    name = "sql"
    seed = "-"
    summary = "your own SQL files, on your own schema or a restored dump"
    engines = ("postgres", "mariadb")
    description = (
        "The setup (--restore DUMP, then each --setup FILE, run by psql) is loaded with the emulation paused. "
        "Then objects are placed as --place says (any table, index or materialized view the setup made), the "
        "server restarts with empty caches, and each --run FILE is measured statement by statement: one phase "
        "per file, or per section where a line '-- phase: NAME' starts one. --passes N runs the measured part "
        "N times. Each phase reports elapsed, server CPU against I/O wait, top wait events, per-device iostat, "
        "per-object I/O and pg_stat_io, and each statement's elapsed time and rows.")
    params = (
        Param("setup", Path, (), "a SQL file run before the measurement, unmeasured, as a psql script as you "
              "(psql's commands run with your rights; repeatable, in order)",
              multiple=True, metavar="FILE"),
        Param("restore", Path, None, "a pg_dump file or folder (custom, directory, tar or plain) restored first, "
              "unmeasured, as the server's user (psql commands in a plain dump are refused); with --engine mariadb, "
              "a mariadb-dump file, run by the mariadb client", metavar="DUMP"),
        Param("jobs", int, 1, "parallel jobs for --restore of a custom or directory dump", flags=("-j",),
              maximum=16),
        Param("run", Path, (), "a SQL file to measure (repeatable, in order); '-- phase: NAME' lines divide it",
              multiple=True, metavar="FILE"),
        Param("passes", int, 1, "run the measured part this many times in one run (the first from a cold cache)",
              maximum=1000),
        Param("timeout", float, 0.0, "cancel a statement that runs longer than this many seconds (0: never)",
              minimum=None),
    )

    def __init__(self, **values):
        super().__init__(**values)
        if not self.p["run"]:
            raise UserError("give at least one --run FILE: the SQL to measure")
        timeout = self.p["timeout"]
        if not 0 <= timeout <= 86400 or timeout != timeout:
            raise UserError(f"--timeout {timeout}: seconds from 0 (never) to 86400")
        for path in self.p["setup"]:
            sqlfile.read_text(path, "--setup")  # readable, UTF-8: found now, not after a restore
        for path in self.p["run"]:
            sqlfile.read_text(path, "--run")  # readable, UTF-8; read as the engine's SQL once it is known
        self._measured: list[sqlfile.Phase] | None = None

    def for_engine(self, engine: str) -> None:
        super().for_engine(engine)
        if self.p["restore"] is not None:
            if engine == "mariadb":
                restore.check_mariadb_dump(self.p["restore"], self.p["jobs"], "--jobs")
                self.restore_format = "mariadb-dump"
            else:
                self.restore_format = restore.dump_format(self.p["restore"])
        self._measured = self._read_runs(engine)

    def _read_runs(self, engine: str) -> list[sqlfile.Phase]:
        measured: list[sqlfile.Phase] = []
        for path in self.p["run"]:
            measured += sqlfile.phases(Path(path), Path(path).stem, dialect=engine)
        names = [ph.name for ph in measured]
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise UserError(f"--run: phase name {twice[0]!r} is used twice; name each phase once")
        return measured

    @property
    def measured(self) -> list[sqlfile.Phase]:
        """The measured files' phases, read as the engine's SQL (PostgreSQL's unless told another)."""
        if self._measured is None:
            self._measured = self._read_runs(self.engine)
        return self._measured

    def footprint(self, cache_state: str = "cold") -> Footprint:
        """What a setup makes cannot be known from its files; a dump restores to about its own size again
        in tables and as much in indexes, and its load writes as much WAL."""
        size = restore.dump_bytes(self.p["restore"])
        return Footprint({"the restored database": 2 * size} if size else {}, wal=2 * size, scratch=size)

    def prepare(self, db, progress) -> None:
        if self.engine == "mariadb":
            self.restored = restore.load_mariadb_setup(self, db, self.p["restore"], self.p["setup"], progress)
            return
        self.restored = restore.load_user_setup(self, db, self.p["restore"], self.p["jobs"], self.p["setup"],
                                                progress)

    def phases(self, cache_state: str = "cold") -> list[Phase]:
        out = []
        passes = self.p["passes"]
        for k in range(passes):
            for i, ph in enumerate(self.measured):
                name = ph.name if passes == 1 else f"{ph.name} #{k + 1}"
                out.append(Phase(name, self._runner(ph), cold=(k == 0 and i == 0)))
        return out

    def _runner(self, ph: sqlfile.Phase):
        def run(db, progress) -> dict:
            progress.phase(f"{ph.name}: {len(ph.statements)} statement(s)", total=len(ph.statements))
            return run_statements(db, ph.statements, self.p["timeout"], progress, self.engine)
        return run


    def rates(self, metrics: dict, elapsed_s: float, phase: str = "run", measured: dict | None = None) -> dict:
        return {"statements_per_s": len(metrics["statement_times"]) / elapsed_s if elapsed_s else 0.0}
