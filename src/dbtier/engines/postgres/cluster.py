"""One PostgreSQL cluster's lifecycle: initdb, configuration, start, stop, connections.

The postmaster is dbtier's direct child, in a session of its own: a Ctrl-C at the terminal reaches
dbtier, which then stops the server in order (fast shutdown, then immediate, then SIGKILL to its
session). Where util-linux's setpriv is available the server also gets a parent-death signal, so
even a SIGKILL of dbtier stops it; otherwise the next run finds it: every process the cluster starts
is recorded in the run's claim (see dbtier.workspace), with the System V segment the server holds.

Only the lab's users reach the server: it listens on a unix socket in a folder private to the
servers' user (no TCP), and authenticates by `peer`, mapping dbtier's own OS user and the servers'
to the superuser."""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from dbtier import lifecycle
from dbtier.devices.session import CPU_SCALE_ENV
from dbtier.errors import UserError
from dbtier.engines.postgres.binaries import PgInstall
from dbtier.engines.osuser import ServerUser
from dbtier.workspace import Claim

SUPERUSER = "dbtier"
PORT = 5432
DATABASE = "dbtier"  # the lab's own database, where workloads run
SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes, with "/.s.PGSQL.5432" appended
CONF_INCLUDE = "dbtier.conf"
IDENT_MAP = "lab"
#: Dynamic shared memory lives in files under the data directory's pg_dynshmem, which the lab points at a
#: folder of its own outside every device: nothing in /dev/shm can outlive the run, and no device is charged.
DYNSHMEM = "pg_dynshmem"
#: the layout of a kept initdb output (Cluster.initdb's templates): a new value makes the old ones unused
INITDB_FORMAT = 1


def _log_tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


AUTO_CONF = "postgresql.auto.conf"


def _nofollow(path, flags):
    return os.open(path, flags | os.O_NOFOLLOW)


def _digest(path: Path) -> str | None:
    """sha256 of a regular file, read without following a link; None if it is not one."""
    try:
        with open(path, "rb", opener=_nofollow) as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _write_new(path: Path, text: str) -> None:
    """Writes a file dbtier owns in the data directory afresh: a link or file put in its place goes."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


@dataclass(frozen=True)
class Seed:
    """A stopped cluster with a workload's data loaded, to be copied into other layouts."""
    pgdata: Path
    waldir: Path
    tablespace: str      # its one tablespace, where the data is
    tablespace_oid: int
    tablespace_dir: Path



class Cluster:
    def __init__(self, install: PgInstall, user: ServerUser, pgdata: Path, waldir: Path, socket_dir: Path,
                 log_path: Path, env: dict[str, str], claim: Claim, dynshmem: Path, cpu_scale: float = 1.0):
        self.claim = claim
        self.cpu_scale = cpu_scale  # the server's own processes only: clients keep this machine's CPU
        self.dynshmem = dynshmem
        self.install = install
        self.user = user
        self.pgdata = pgdata
        self.waldir = waldir
        self.socket_dir = socket_dir
        self.log_path = log_path
        self.env = user.env(env)
        self.proc: subprocess.Popen | None = None
        self.proc_start: str | None = None
        self._digests: dict[str, str] = {}  # configuration file -> the sha256 of what dbtier wrote there

    # -- creation ------------------------------------------------------------------------------

    def initdb(self, templates: Path | None = None) -> None:
        """A new cluster. templates: a folder where initdb's output is kept, per binaries and time zone,
        the first time, and copied from after (initdb is most of a second; a copy of its 40 MB on tmpfs
        a few hundredths)."""
        template = templates / f"initdb-{self._initdb_key()}" if templates is not None else None
        if template is not None and template.is_dir():
            shutil.copytree(template / "pgdata", self.pgdata, symlinks=True)
            shutil.copytree(template / "pg_wal", self.waldir, symlinks=True)
            (self.pgdata / "pg_wal").symlink_to(self.waldir)
            for path in (self.pgdata, self.waldir):
                self.user.give(path)
        else:
            self._run_initdb()
            if template is not None:
                self._keep_template(template)
        self._restrict_access()
        with open(self.pgdata / "postgresql.conf", "a") as conf:
            conf.write(f"\ninclude '{CONF_INCLUDE}'\n")
        self._remember("postgresql.conf")
        (self.pgdata / DYNSHMEM).rmdir()
        (self.pgdata / DYNSHMEM).symlink_to(self.dynshmem)
        if self.user.switches:
            os.chown(self.pgdata / DYNSHMEM, self.user.uid, self.user.gid, follow_symlinks=False)

    def _initdb_key(self) -> str:
        """What initdb's output depends on beyond its fixed arguments: the binaries and the time zone it
        writes into postgresql.conf."""
        exe = self.install.exe("initdb")
        st = exe.stat()
        localtime = os.path.realpath("/etc/localtime") if os.path.exists("/etc/localtime") else ""
        parts = (INITDB_FORMAT, str(exe.resolve()), st.st_mtime_ns, st.st_size, self.install.version,
                 self.env.get("TZ", ""), localtime)
        return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]

    def _keep_template(self, template: Path) -> None:
        """initdb's output as it made it, kept for the next cluster (made aside, then renamed: a run
        beside this one, or a Ctrl-C, never sees half of it). Not kept is no failure: another run kept
        one first, or the folder has no room or no access, and the next cluster runs initdb again."""
        tmp = template.parent / f".{template.name}.{os.getpid()}"
        try:
            template.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(self.pgdata, tmp / "pgdata", symlinks=True)
            (tmp / "pgdata" / "pg_wal").unlink()
            shutil.copytree(self.waldir, tmp / "pg_wal", symlinks=True)
            os.rename(tmp, template)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _run_initdb(self) -> None:
        cmd = [str(self.install.exe("initdb")), "-D", str(self.pgdata), f"--waldir={self.waldir}", "-U", SUPERUSER,
               "--auth-local=peer", "--auth-host=reject", "-E", "UTF8", "--locale=C", "--no-instructions",
               "--no-sync"]
        # Not subprocess.run: on Ctrl-C it would SIGKILL initdb, whose bootstrap server then leaves its
        # shared memory behind. SIGTERM to initdb alone lets it finish the step its server is on, then
        # exit and remove what it made.
        proc = subprocess.Popen(lifecycle.dies_with_us(cmd, "TERM"), env=self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/",
                                start_new_session=True, **self.user.popen_kwargs())
        try:
            self.claim.watch(proc.pid, self.user.uid, signal.SIGTERM)
            output, _ = proc.communicate()
        except BaseException:
            lifecycle.terminate(proc)
            raise
        self.claim.unwatch(proc.pid)
        if proc.returncode != 0:
            raise UserError(f"initdb failed: {' / '.join(output.strip().splitlines()[-3:])}")

    def adopt(self, seed: "Seed", seed_space: Path) -> None:
        """A copy of a stopped, loaded cluster instead of a new one (`dbtier compare` loads once): its data
        directory copied here, its WAL into the WAL device's folder, its one tablespace into seed_space (on
        the data device), and each link pointed at its new place. Copied by dbtier itself, outside the
        emulation: a copy costs no device time, as a load with the emulation paused costs none."""
        shutil.copytree(seed.pgdata, self.pgdata, symlinks=True,
                        ignore=shutil.ignore_patterns("postmaster.pid", "postmaster.opts"))
        for link, target, source in ((self.pgdata / "pg_wal", self.waldir, seed.waldir),
                                     (self.pgdata / "pg_tblspc" / str(seed.tablespace_oid), seed_space,
                                      seed.tablespace_dir)):
            link.unlink()
            shutil.copytree(source, target, symlinks=True)
            link.symlink_to(target)
        (self.pgdata / DYNSHMEM).unlink()
        (self.pgdata / DYNSHMEM).symlink_to(self.dynshmem)
        for path in (self.pgdata, self.waldir, seed_space):
            self.user.give(path)
        self._remember("postgresql.conf")  # checked in the loaded cluster before it was copied (Lab.seed)
        if self.user.switches:
            for link in (self.pgdata / "pg_wal", self.pgdata / DYNSHMEM,
                         self.pgdata / "pg_tblspc" / str(seed.tablespace_oid)):
                os.chown(link, self.user.uid, self.user.gid, follow_symlinks=False)
        self._restrict_access()

    def _restrict_access(self) -> None:
        """Peer authentication on the unix socket only, for dbtier's own OS user and the servers'."""
        hba = self.pgdata / "pg_hba.conf"
        _write_new(hba, "# written by dbtier: the lab's own users, on its private socket, nobody else\n"
                        f"local all all peer map={IDENT_MAP}\n")
        me = pwd.getpwuid(os.geteuid()).pw_name
        ident = self.pgdata / "pg_ident.conf"
        _write_new(ident, "# written by dbtier\n" + "".join(f"{IDENT_MAP} {name} {SUPERUSER}\n"
                                                          for name in sorted({me, self.user.name})))
        for path in (hba, ident):
            self._remember(path.name)

    def configure(self, settings: dict[str, str]) -> None:
        """Writes the lab's settings; they take effect at the next start."""
        path = self.pgdata / CONF_INCLUDE
        _write_new(path, "# written by dbtier\n" + "".join(f"{k} = {v}\n" for k, v in settings.items()))
        self._remember(CONF_INCLUDE)

    # -- the configuration is dbtier's --------------------------------------------------------

    def _remember(self, name: str) -> None:
        """A configuration file as dbtier left it: read back, root's own, readable by the server."""
        path = self.pgdata / name
        if self.user.switches:  # the servers' user may read it, not change it (it could still replace it:
            os.chown(path, os.geteuid(), self.user.gid, follow_symlinks=False)  # check_config finds that)
            os.chmod(path, 0o640, follow_symlinks=False)
        self._digests[name] = _digest(path)

    def check_config(self) -> None:
        """Before every start: the server's configuration files are what dbtier wrote, and
        postgresql.auto.conf (ALTER SYSTEM's) holds no setting. A superuser's SQL (a dump's, a setup's)
        can write files as the server's user; a setting it slipped in (listen_addresses, an hba file
        that trusts TCP) must never take effect at a restart."""
        for name, digest in self._digests.items():
            if _digest(self.pgdata / name) != digest:
                raise UserError(f"the server's {name} was changed during the run (by the run's own SQL, which "
                                "runs as the server's superuser); dbtier will not restart a server whose "
                                "configuration it does not own")
        auto = self.pgdata / AUTO_CONF
        try:
            with open(auto, "rb", opener=_nofollow) as f:
                text = f.read(1 << 20).decode("utf-8", "replace")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise UserError(f"the server's {AUTO_CONF} cannot be read ({exc.strerror}): it was replaced during the "
                            "run") from None
        settings = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        if settings:
            raise UserError(f"the run's SQL set '{settings[0][:80]}' in {AUTO_CONF} (ALTER SYSTEM, or a file "
                            "written as the server's user); the lab's settings are dbtier's (--set), so it will "
                            "not restart the server with it")

    # -- running -------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 120.0) -> None:
        if self.running:
            return
        self.check_config()
        # its socket folder said on the command line too: a crash state's copy of the configuration names
        # the lab's, and states recovered side by side each listen in a folder of their own
        cmd = lifecycle.dies_with_us([str(self.install.exe("postgres")), "-D", str(self.pgdata),
                                      "-k", str(self.socket_dir)], "INT")
        env = dict(self.env)
        if self.cpu_scale != 1.0:
            env[CPU_SCALE_ENV] = repr(float(self.cpu_scale))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         cwd="/", start_new_session=True, **self.user.popen_kwargs())
        self.proc_start = lifecycle.start_time(self.proc.pid)
        self.claim.watch(self.proc.pid, self.user.uid, signal.SIGQUIT)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                self.proc = None
                self._after_exit()
                raise UserError(f"PostgreSQL did not start; the end of its log ({self.log_path}):\n"
                                f"{_log_tail(self.log_path)}")
            try:
                with self.connect("postgres", connect_timeout=2):
                    self._record_shared_memory()
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise UserError(f"PostgreSQL did not accept connections within {timeout:.0f} s; "
                                    f"see {self.log_path}") from None
                time.sleep(0.05)

    def _record_shared_memory(self) -> None:
        """The System V segment the postmaster holds (postmaster.pid's seventh line: key and id)."""
        try:
            lines = (self.pgdata / "postmaster.pid").read_text().splitlines()
            shmid = int(lines[6].split()[1])
        except (OSError, IndexError, ValueError):
            return
        self.claim.hold_sysv_shm(shmid, self.user.uid)

    def _after_exit(self) -> None:
        """The server is gone: what is left of its session is stopped, and what shared memory it left
        (only if it was killed) released. Then the claim forgets it."""
        self.claim.settle()

    def stop(self, timeout: float = 120.0) -> None:
        """Fast shutdown (SIGINT): a shutdown checkpoint, then exit. Escalates if that takes too long:
        immediate shutdown (SIGQUIT), then SIGKILL to what is left of its session."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            if proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGINT)
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            if proc.poll() is None:
                lifecycle.stop_recorded(proc.pid, self.proc_start, self.user.uid, signal.SIGQUIT)
            proc.wait()
            self._after_exit()

    def restart(self) -> None:
        self.stop()
        self.start()

    def connect(self, dbname: str, **kw) -> psycopg.Connection:
        return psycopg.connect(host=str(self.socket_dir), port=PORT, user=SUPERUSER, dbname=dbname,
                               autocommit=True, **kw)

    def server_pid(self) -> int | None:
        return self.proc.pid if self.running else None
