"""`dbtier run client -- COMMAND ARGS...`: a client nobody here wrote (sysbench, BenchBase, an
application's own load test) against the lab's server, measured as any workload is, on PostgreSQL or
MariaDB (--engine).

The setup (--restore DUMP, then each --setup FILE, then --prepare-command) runs unmeasured, with the
emulation paused. Then the objects are placed, the server restarts cold, and the measured interval
is the client's run: it starts the command, and ends when the command exits. The client is given the
lab's connection in libpq's environment (PGHOST, the lab's private socket folder; PGPORT, PGUSER,
PGDATABASE), runs as you with your rights in the folder dbtier was started in, and outside the
emulation (a client on another machine). A client that takes its connection only from its own
options (sysbench's --pgsql-host) is given it by `$PGHOST`, `${PGPORT}`, ... in its arguments, which
dbtier replaces (only these four names; nothing else of the arguments is touched, and no shell runs).
On MariaDB the connection is MYSQL_UNIX_PORT (the lab's socket, which MariaDB's and MySQL's client
libraries read), MYSQL_USER (dbtier's own OS user: unix_socket authentication, no password) and
MYSQL_DATABASE, named in arguments the same way (sysbench's --mysql-socket='$MYSQL_UNIX_PORT').
Its standard output and error are kept in the run directory (client.stdout, client.stderr)."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

from dbtier import lifecycle
from dbtier.errors import UserError
from dbtier.workloads import restore, sqlfile
from dbtier.workloads.base import Footprint, Param, Phase

#: the connection's environment variables a client's arguments may name, per engine
ENGINE_VARS = {"postgres": ("PGHOST", "PGPORT", "PGUSER", "PGDATABASE"),
               "mariadb": ("MYSQL_UNIX_PORT", "MYSQL_USER", "MYSQL_DATABASE")}
CONNECTION_VARS = tuple(v for names in ENGINE_VARS.values() for v in names)
_REFERENCE = re.compile(r"\$(?:\{(?P<braced>" + "|".join(CONNECTION_VARS) + r")\}|(?P<bare>"
                        + "|".join(CONNECTION_VARS) + r")(?![A-Za-z0-9_]))")
#: libpq and MariaDB's client library read these too: any of the user's own would send the client
#: elsewhere than the lab
_LIBPQ_ENV = re.compile(r"^(PG[A-Z]+|MYSQL_[A-Z_]+|MARIADB_[A-Z_]+)$")
OUTPUTS = ("stdout", "stderr")
MAX_KEPT_OUTPUT = 4 << 20  # of a prepare command's output, the end


def expand(args: list[str], connection: dict[str, str]) -> list[str]:
    """`$PGHOST` and `${PGHOST}` (and PGPORT, PGUSER, PGDATABASE; MariaDB's MYSQL_UNIX_PORT, ...)
    replaced by the lab's connection; another engine's name is refused."""
    def one(m: re.Match) -> str:
        name = m.group("braced") or m.group("bare")
        if name not in connection:
            raise UserError(f"the client's arguments name ${name}, which this engine's lab does not give; it gives "
                            + ", ".join(f"${k}" for k in connection))
        return connection[name]
    return [_REFERENCE.sub(one, a) for a in args]


def client_env(connection: dict[str, str]) -> dict[str, str]:
    """Your environment, without libpq's variables of your own, with the lab's connection."""
    env = {k: v for k, v in os.environ.items() if not _LIBPQ_ENV.match(k)}
    for name in ("LD_PRELOAD", "LD_LIBRARY_PATH"):  # dbtier's own, if any, are not the client's
        env.pop(name, None)
    return {**env, **connection}


def _check_program(argv: list[str], what: str) -> None:
    program = argv[0]
    found = shutil.which(program) if "/" not in program else (program if os.access(program, os.X_OK) else None)
    if not found or os.path.isdir(found):
        raise UserError(f"{what}: {program}: no such program (give its path, or install it"
                        + ("; sysbench: apt-get install sysbench)" if program == "sysbench" else ")"))


def _tail(*paths: Path) -> str:
    """The last line the program wrote, on stderr first."""
    for path in paths:
        try:
            with open(path, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 8192))
                lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        except OSError:
            continue
        if lines:
            return lines[-1][:300]
    return "no output"


def run_program(argv: list[str], env: dict[str, str], cwd: Path, out_dir: Path, stem: str, what: str,
                timeout_s: float = 0.0) -> tuple[int, float]:
    """Runs a program of the user's to its end, its output into out_dir/STEM.stdout and .stderr, in a
    session of its own that is stopped with it (Ctrl-C, a timeout, dbtier's death). A status other
    than 0 is a UserError naming the last line it wrote. Returns (lines on stdout, elapsed)."""
    paths = [out_dir / f"{stem}.{name}" for name in OUTPUTS]
    files = [open(p, "wb") for p in paths]
    t0 = time.monotonic()
    try:
        try:
            proc = subprocess.Popen(lifecycle.dies_with_us(argv, "TERM"), env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                    stdout=files[0], stderr=files[1], start_new_session=True)
        except OSError as exc:
            raise UserError(f"{what}: {argv[0]}: {exc.strerror}") from None
    finally:
        for f in files:
            f.close()
    try:
        proc.wait(timeout_s or None)
    except subprocess.TimeoutExpired:
        lifecycle.terminate(proc, 10.0, whole_session=True)
        raise UserError(f"{what}: {argv[0]} ran past --timeout {timeout_s:g} s and was stopped; its last line: "
                        f"{_tail(paths[1], paths[0])}") from None
    except BaseException:
        lifecycle.terminate(proc, 10.0, whole_session=True)
        raise
    finally:
        _end_group(proc)
    elapsed = time.monotonic() - t0
    if proc.returncode != 0:
        how = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
               else f"exited with status {proc.returncode}")
        raise UserError(f"{what}: {argv[0]} {how}: {_tail(paths[1], paths[0])}")
    with open(paths[0], "rb") as f:
        lines = sum(1 for _ in f)
    return lines, elapsed


def _end_group(proc: subprocess.Popen) -> None:
    """What the program left running in its process group (a helper it started in the background, or
    one that outlived a SIGTERM) goes with it: nothing of a client outlives its run."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class Client(restore.UserWorkload):
    name = "client"
    seed = "-"
    summary = "any client program of yours (sysbench, BenchBase, a load test), measured as it runs"
    engines = ("postgres", "mariadb")
    description = (
        "COMMAND (with its arguments, after '--') is run as you, in this folder, with the lab's connection in libpq's environment "
        "(PGHOST: the lab's private socket folder, PGPORT, PGUSER, PGDATABASE); '$PGHOST' and the like in its "
        "arguments are replaced by them (quote them from your shell), for a client that reads its connection only "
        "from its options, as sysbench does (--pgsql-host='$PGHOST' --pgsql-port='$PGPORT' "
        "--pgsql-user='$PGUSER' --pgsql-db='$PGDATABASE'). The setup (--restore DUMP, each --setup FILE, then "
        "--prepare-command, such as sysbench's 'prepare') runs unmeasured with the emulation paused; the objects "
        "it made are placed as --place says, the server restarts cold, and the client's run is measured, start "
        "to exit. A status other than 0 ends the run with the last line it wrote. Its output is kept in the run "
        "directory (client.stdout, client.stderr). With --engine mariadb the connection is $MYSQL_UNIX_PORT, "
        "$MYSQL_USER and $MYSQL_DATABASE (sysbench's --mysql-socket='$MYSQL_UNIX_PORT' --mysql-user='$MYSQL_USER' "
        "--mysql-db='$MYSQL_DATABASE'), and --setup files are run by the mariadb client (a mariadb-dump file is one).")
    params = (
        Param("setup", Path, (), "a SQL file run before the measurement, unmeasured, as a psql script as you "
              "(MariaDB: by the mariadb client) (repeatable, in order)", multiple=True, metavar="FILE"),
        Param("restore", Path, None, "a pg_dump file or folder (custom, directory, tar or plain) restored first, "
              "unmeasured; with --engine mariadb, a mariadb-dump file, run by the mariadb client", metavar="DUMP"),
        Param("restore-jobs", int, 1, "parallel jobs for --restore of a custom or directory dump", maximum=16),
        Param("prepare-command", str, None, "a command run after the setup, unmeasured, as the client is "
              "(split as a shell would, but no shell runs; '$PGHOST'... replaced): sysbench's 'prepare'",
              metavar="COMMAND"),
        Param("connections", int, 1, "the connections the client holds at once (sysbench's --threads), checked "
              "against the lab's max_connections (--set max_connections=N for more)", maximum=10000),
        Param("timeout", float, 0.0, "stop the client if it runs longer than this many seconds (0: never)",
              minimum=None),
        Param("command", str, (), "the client's command line, after '--'", multiple=True, trailing=True,
              metavar="COMMAND"),
    )

    def __init__(self, **values):
        super().__init__(**values)
        p = self.p
        p["command"] = tuple(str(a) for a in p["command"])
        if not p["command"]:
            raise UserError("give the client's command after '--', e.g. dbtier run client -d ssd=nvme-gen4 -- "
                            "sysbench --db-driver=pgsql --pgsql-host='$PGHOST' oltp_read_only run")
        _check_program(list(p["command"]), "the client")
        if p["prepare_command"] is not None:
            try:
                self.prepare_argv = shlex.split(p["prepare_command"])
            except ValueError as exc:
                raise UserError(f"--prepare-command {p['prepare_command']!r}: {exc}") from None
            if not self.prepare_argv:
                raise UserError("--prepare-command is empty; give the command, or leave the option out")
            _check_program(self.prepare_argv, "--prepare-command")
        else:
            self.prepare_argv = None
        timeout = p["timeout"]
        if not 0 <= timeout <= 7 * 86400 or timeout != timeout:
            raise UserError(f"--timeout {timeout:g}: give seconds from 0 (never) to a week")
        for path in p["setup"]:
            sqlfile.read_text(path, "--setup")  # readable, UTF-8: found now, not after a restore
        self.cwd = Path.cwd()
        self._outputs: dict[str, Path | bytes] = {}

    def for_engine(self, engine: str) -> None:
        super().for_engine(engine)
        given = {n: "" for n in ENGINE_VARS[engine]}
        expand([*self.p["command"], *(self.prepare_argv or [])], given)  # another engine's names refused now
        if self.p["restore"] is None:
            return
        if engine == "mariadb":
            restore.check_mariadb_dump(self.p["restore"], self.p["restore_jobs"], "--restore-jobs")
            return
        restore.dump_format(self.p["restore"])  # a PostgreSQL dump, found now, not after the lab is made

    def footprint(self, cache_state: str = "cold") -> Footprint:
        """What a client writes cannot be known from its command; a dump restores to about twice its size."""
        size = restore.dump_bytes(self.p["restore"])
        return Footprint({"the restored database": 2 * size} if size else {}, wal=2 * size, scratch=size,
                         connections=self.p["connections"], connections_option="connections")

    def load_identity(self) -> dict:
        base = super().load_identity() or ({} if self.p["prepare_command"] else None)
        if base is None or not self.p["prepare_command"]:
            return base
        return {**base, "prepare_command": self.p["prepare_command"]}

    def prepare(self, db, progress) -> None:
        mariadb = self.engine == "mariadb"
        if mariadb:
            self.restored = restore.load_mariadb_setup(self, db, self.p["restore"], self.p["setup"], progress)
        else:
            self.restored = restore.load_user_setup(self, db, self.p["restore"], self.p["restore_jobs"],
                                                    self.p["setup"], progress)
        if self.prepare_argv:
            progress.phase(f"prepare: {' '.join(self.prepare_argv)[:60]}")
            self._run(db, self.prepare_argv, "prepare", "--prepare-command")
        if mariadb and self.prepare_argv:
            db.analyze()  # as a loaded database is left: its statistics taken, the prepared tables' too
        elif self.prepare_argv:
            with db.connect() as conn:
                conn.execute("VACUUM ANALYZE")  # as a loaded database is left: its statistics and visibility map

    def phases(self, cache_state: str = "cold") -> list[Phase]:
        return [Phase("client", self._measured)]

    def _run(self, db, argv: list[str], stem: str, what: str) -> tuple[int, float]:
        connection = db.connection_env()
        folder = db.client_dir("client")
        lines, elapsed = run_program(expand(argv, connection), client_env(connection), self.cwd, folder, stem, what,
                                     self.p["timeout"])
        for name in OUTPUTS:
            path = folder / f"{stem}.{name}"
            # the prepare command may run in a lab of its own (loaded once, then copied): its output is
            # read now; the client's is copied from this lab at the end of the run
            self._outputs[path.name] = path.read_bytes()[-MAX_KEPT_OUTPUT:] if stem == "prepare" else path
        return lines, elapsed

    def _measured(self, db, progress) -> dict:
        argv = list(self.p["command"])
        progress.phase(f"client: {' '.join(argv)[:70]}")
        lines, elapsed = self._run(db, argv, "client", "the client")
        return {"command": argv, "exit_status": 0, "client_elapsed_s": elapsed, "output_lines": lines}

    def outputs(self) -> dict[str, Path | bytes]:
        return dict(self._outputs)
