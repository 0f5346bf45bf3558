"""One MariaDB server over a lab's folders: its data directory made (mariadb-install-db), started on a
private socket with no TCP, reached by dbtier's own OS user through unix_socket authentication, and
stopped with nothing left running.

InnoDB's files go where the lab says: the data directory (the system tablespace with the doublewrite
buffer, file-per-table tablespaces), the redo log (innodb_log_group_home_dir), the undo tablespaces
(innodb_undo_directory) and temp (innodb_temp_data_file_path and tmpdir). Its I/O is kept where the
interposer sees it: libaio for data pages (`innodb_linux_aio = aio`: the default picks io_uring, whose
rings no interposer can see) and a redo log written with pwrite (never on tmpfs, where InnoDB maps it
into memory instead).

    server = Server(install, user, folders, env, settings)
    server.install_db(); server.start()
    with server.connect() as conn: ...
    server.stop()"""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pymysql

from dbtier.devices.session import CPU_SCALE_ENV
from dbtier.engines.mariadb.binaries import MariaInstall
from dbtier.engines.osuser import ServerUser
from dbtier.errors import UserError

#: the settings dbtier owns in every lab: what keeps the server private and its I/O visible
OWNED = {
    "skip-networking": "ON",
    "innodb-use-native-aio": "ON",
    "innodb-linux-aio": "aio",
    "performance-schema": "ON",
    "innodb-file-per-table": "ON",
    # a cold start is cold: the buffer pool is not dumped at shutdown and loaded again as it starts
    "innodb-buffer-pool-dump-at-shutdown": "OFF",
    "innodb-buffer-pool-load-at-startup": "OFF",
}
#: how InnoDB does asynchronous I/O: the bootstrap that mariadb-install-db runs too (its default takes
#: io_uring through liburing, which the interposer counts as I/O it cannot see)
ASYNC_IO = ("innodb-use-native-aio", "innodb-linux-aio")
#: what only mariadb-install-db can set (the undo tablespaces are made with the data directory)
AT_CREATION = ("innodb-undo-tablespaces", "innodb-page-size", "innodb-undo-directory", "innodb-data-home-dir",
               "innodb-log-group-home-dir", "innodb-temp-data-file-path", "innodb-data-file-path")
START_TIMEOUT_S = 120.0
#: a placed table's folder as its server names it: under its own data directory (mariadbd works in
#: it), where a folder of links (no database: --ignore-db-dirs) leads to each device's tables
OWN_DATA_DIRECTORY = "/proc/self/cwd"
PLACES = ".dbtier-places"
#: the log's words for a start given up, and how long a server that said so has to end by itself
ABORTED = ("] Aborting", "Plugin initialization aborted")
ABORT_GRACE_S = 5.0
STOP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Folders:
    """Where a server's files go; each folder exists and is the server user's."""
    data: Path      # the data directory (system tablespace, doublewrite buffer, tables)
    log: Path       # the redo log
    undo: Path      # the undo tablespaces
    temp: Path      # the temporary tablespace and tmpdir (sort files)
    run: Path       # the socket, the pid file, the error log (short: a socket path holds 107 bytes)


class Server:
    def __init__(self, install: MariaInstall, user: ServerUser, folders: Folders, env: dict[str, str],
                 settings: dict[str, str] | None = None, cpu_scale: float = 1.0):
        self.install, self.user, self.folders = install, user, folders
        self.env = user.env(install.env(env))
        self.cpu_scale = cpu_scale  # the server's CPU K times slower once started (not its install)
        self.settings = dict(settings or {})
        self.proc: subprocess.Popen | None = None
        self.socket = folders.run / "mysqld.sock"
        self.error_log = folders.run / "mysqld.err"
        if _on_dev_shm(folders.log):
            raise UserError(f"the redo log's folder {folders.log} is on /dev/shm, where MariaDB {install.version} maps "
                            "the log into memory and no interposer sees its writes; give it a folder on another file "
                            "system (another tmpfs, or a disk)")
        if len(str(self.socket).encode()) > 107:
            raise UserError(f"the socket path {self.socket} is longer than a unix socket takes; choose a shorter "
                            "--workspace")

    def _files_options(self) -> list[str]:
        f = self.folders
        return [f"--basedir={self.install.basedir}", f"--datadir={f.data}",
                f"--innodb-log-group-home-dir={f.log}", f"--innodb-undo-directory={f.undo}",
                f"--innodb-temp-data-file-path={os.path.relpath(f.temp, f.data)}/ibtmp1:12M:autoextend",
                f"--tmpdir={f.temp}", f"--ignore-db-dirs={PLACES}"]

    def _setting_options(self, creation: bool) -> list[str]:
        merged = {**{"innodb-undo-tablespaces": "2"}, **self.settings, **OWNED}
        return [f"--{k}={v}" for k, v in merged.items() if creation or k not in ("innodb-undo-tablespaces",)]

    def install_db(self) -> None:
        """The data directory, its system tables, and an account for dbtier's OS user (unix_socket)."""
        me = _my_name()
        cmd = [str(self.install.exe("mariadb-install-db")), "--no-defaults", *self._files_options(),
               "--auth-root-authentication-method=socket", f"--auth-root-socket-user={me}", "--skip-test-db",
               *(f"--{k}={v}" for k, v in {**{"innodb-undo-tablespaces": "2"}, **self.settings, **OWNED}.items()
                 if k in AT_CREATION or k.startswith("innodb-buffer-pool") or k in ASYNC_IO)]
        run = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=300,
                             **self.user.popen_kwargs())
        if run.returncode != 0:
            said = _first_error((run.stderr + "\n" + run.stdout).splitlines())
            raise UserError(f"mariadb-install-db failed: {said}")

    def start(self) -> None:
        if self.proc is not None:
            return
        cmd = [str(self.install.exe("mariadbd")), "--no-defaults", *self._files_options(),
               f"--socket={self.socket}", f"--pid-file={self.folders.run / 'mysqld.pid'}",
               f"--log-error={self.error_log}", *self._setting_options(creation=False)]
        env = dict(self.env)
        if self.cpu_scale != 1.0:
            env[CPU_SCALE_ENV] = repr(float(self.cpu_scale))
        log_from = self.error_log.stat().st_size if self.error_log.exists() else 0  # this start's words only
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True, **self.user.popen_kwargs())
        deadline = time.monotonic() + START_TIMEOUT_S
        aborted_at = None
        while True:
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                raise UserError(f"the MariaDB server stopped as it started (exit {code}): {self._last_error()}")
            try:
                self.connect().close()
                return
            except pymysql.err.OperationalError:
                now = time.monotonic()
                if aborted_at is None and self._aborting(log_from):
                    aborted_at = now
                if now > deadline or (aborted_at is not None and now > aborted_at + ABORT_GRACE_S):
                    proc, self.proc = self.proc, None
                    _signal(proc, signal.SIGKILL)  # it said it would not start; it may never end by itself
                    proc.wait()
                    if aborted_at is not None:
                        raise UserError(f"the MariaDB server stopped as it started: {self._last_error()}") from None
                    raise UserError(f"the MariaDB server did not accept connections in {START_TIMEOUT_S:.0f} s: "
                                    f"{self._last_error()}") from None
                time.sleep(0.05)

    def connect(self, database: str | None = None, autocommit: bool = True,
                local_infile: bool = False) -> pymysql.connections.Connection:
        """A connection as dbtier's own OS user; local_infile lets its LOAD DATA LOCAL send a file."""
        return pymysql.connect(unix_socket=str(self.socket), user=_my_name(), database=database,
                               autocommit=autocommit, connect_timeout=10, local_infile=local_infile)

    def status(self) -> dict[str, int]:
        """SHOW GLOBAL STATUS, the numeric ones."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS")
            return {k: int(v) for k, v in cur.fetchall() if v.lstrip("-").isdigit()}

    def stop(self) -> None:
        """A clean shutdown (InnoDB's pages written, its log checkpointed); killed if it will not."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                with self.connect() as conn, conn.cursor() as cur:
                    cur.execute("SHUTDOWN")
            except pymysql.err.MySQLError:
                _signal(proc, signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _signal(proc, signal.SIGKILL)
            proc.wait()

    def _aborting(self, log_from: int) -> bool:
        """Whether the server's log since byte log_from says it gave up starting (InnoDB could not
        recover, say): it shuts down, and MariaDB 10.11 was seen spinning in that shutdown for minutes
        after a failed crash recovery."""
        try:
            with open(self.error_log, "rb") as f:
                f.seek(log_from)
                text = f.read().decode(errors="replace")
        except OSError:
            return False
        return any(sign in text for sign in ABORTED)

    def _last_error(self) -> str:
        try:
            lines = self.error_log.read_text(errors="replace").splitlines()
        except OSError:
            return "no error log"
        return _first_error(lines)


def _first_error(lines: list[str]) -> str:
    """The server's first error (the cause; its last is 'Aborting'), or its last line."""
    errors = [ln.split("[ERROR]", 1)[1].strip() for ln in lines if "[ERROR]" in ln and "Aborting" not in ln]
    said = errors[0] if errors else next((ln.strip() for ln in reversed(lines) if ln.strip()), "no message")
    return said[:300]


def _on_dev_shm(path: Path) -> bool:
    """Whether path is on /dev/shm's file system: InnoDB takes a log there for persistent memory."""
    try:
        return os.stat(path).st_dev == os.stat("/dev/shm").st_dev
    except OSError:
        return False


def _signal(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def _my_name() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name
