"""One PostgreSQL cluster's lifecycle: initdb, configuration, start, stop, connections.

The postmaster is dbtier's direct child, in a session of its own: a Ctrl-C at the terminal reaches
dbtier, which then stops the server in order (fast shutdown, then immediate, then SIGKILL to its
process group). Where util-linux's setpriv is available the server also gets a parent-death signal,
so even a SIGKILL of dbtier stops it; otherwise the next run finds it (workspace.reap_stale)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psycopg

from dbtier.errors import UserError
from dbtier.pg.binaries import PgInstall
from dbtier.pg.osuser import ServerUser
from dbtier.pg.workspace import stop_postmaster

SUPERUSER = "dbtier"
PORT = 5432
CONF_INCLUDE = "dbtier.conf"


def _log_tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def _with_parent_death_signal(cmd: list[str], sig: str) -> list[str]:
    """cmd, started by util-linux's setpriv so that it gets `sig` if dbtier dies (even by SIGKILL)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", sig, "--", *cmd] if setpriv else cmd


def _terminate(proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM to the child, then SIGKILL to its process group if it lingers; waits for it."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            if sig == signal.SIGTERM:
                proc.send_signal(sig)
            else:
                os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


class Cluster:
    def __init__(self, install: PgInstall, user: ServerUser, pgdata: Path, waldir: Path, socket_dir: Path,
                 log_path: Path, env: dict[str, str]):
        self.install = install
        self.user = user
        self.pgdata = pgdata
        self.waldir = waldir
        self.socket_dir = socket_dir
        self.log_path = log_path
        self.env = user.env(env)
        self.proc: subprocess.Popen | None = None

    # -- creation ------------------------------------------------------------------------------

    def initdb(self) -> None:
        cmd = [str(self.install.exe("initdb")), "-D", str(self.pgdata), f"--waldir={self.waldir}", "-U", SUPERUSER,
               "-A", "trust", "-E", "UTF8", "--locale=C", "--no-instructions", "--no-sync"]
        # Not subprocess.run: on Ctrl-C it would SIGKILL initdb, whose bootstrap server then leaves its
        # shared memory behind. SIGTERM to initdb alone lets it finish the step its server is on, then
        # exit and remove what it made.
        proc = subprocess.Popen(_with_parent_death_signal(cmd, "TERM"), env=self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/",
                                start_new_session=True, **self.user.popen_kwargs())
        try:
            output, _ = proc.communicate()
        except BaseException:
            _terminate(proc)
            raise
        if proc.returncode != 0:
            raise UserError(f"initdb failed: {' / '.join(output.strip().splitlines()[-3:])}")
        with open(self.pgdata / "postgresql.conf", "a") as conf:
            conf.write(f"\ninclude '{CONF_INCLUDE}'\n")

    def configure(self, settings: dict[str, str]) -> None:
        """Writes the lab's settings; they take effect at the next start."""
        path = self.pgdata / CONF_INCLUDE
        path.write_text("# written by dbtier\n" + "".join(f"{k} = {v}\n" for k, v in settings.items()))
        if self.user.switches:
            os.chown(path, self.user.uid, self.user.gid)

    # -- running -------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 120.0) -> None:
        if self.running:
            return
        cmd = _with_parent_death_signal([str(self.install.exe("postgres")), "-D", str(self.pgdata)], "INT")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         cwd="/", start_new_session=True, **self.user.popen_kwargs())
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                self.proc = None
                raise UserError(f"PostgreSQL did not start; the end of its log ({self.log_path}):\n"
                                f"{_log_tail(self.log_path)}")
            try:
                with self.connect("postgres", connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise UserError(f"PostgreSQL did not accept connections within {timeout:.0f} s; "
                                    f"see {self.log_path}") from None
                time.sleep(0.05)

    def stop(self, timeout: float = 120.0) -> None:
        """Fast shutdown (SIGINT): a shutdown checkpoint, then exit. Escalates if that takes too long."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                stop_postmaster(proc.pid)
            finally:
                if proc.poll() is None:
                    stop_postmaster(proc.pid)
                proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def connect(self, dbname: str, **kw) -> psycopg.Connection:
        return psycopg.connect(host=str(self.socket_dir), port=PORT, user=SUPERUSER, dbname=dbname,
                               autocommit=True, **kw)

    def server_pid(self) -> int | None:
        return self.proc.pid if self.running else None
