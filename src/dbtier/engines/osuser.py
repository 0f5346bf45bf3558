"""Who the servers run as, for every engine.

PostgreSQL refuses to run as root (MariaDB too, unless told), and a lab runs content dbtier did not write (a user's dump, their
setup files), which can start programs as the server's user (`COPY ... TO PROGRAM`). So when dbtier
is started as root, each lab's server runs as an unprivileged user of its own for as long as the lab
lives: one of a pool (`dbtier-lab1`, `dbtier-lab2`, ..., made on first use), leased exclusively (a
lock under /run/dbtier that dies with its holder), and every process of that user is stopped when
the lab ends and again before the next lab takes it. No lab can reach another's files, socket or
emulation state, and nothing a lab started outlives it. DBTIER_PG_USER names one user to use
instead of the pool (one lab at a time; it must have no processes of its own).

A normal user's servers run as that user, unchanged: what a dump runs, runs with that user's rights.

    lease = osuser.lease()          # the lab's user, exclusively
    ... lease.user.popen_kwargs() ...
    lease.release()                 # every process of it stopped, the user free for the next lab"""

from __future__ import annotations

import contextlib
import fcntl
import grp
import hashlib
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from dbtier.errors import UserError

POOL_PREFIX = "dbtier-lab"
#: every pool user's servers carry this group too: it may pass through root's workspace folder
POOL_GROUP = "dbtier-labs"
#: what marks a pool user as dbtier's own: its processes are all a lab's, and stopped with it
POOL_COMMENT = "dbtier lab server"
POOL_MAX = 64
LEASES = Path("/run/dbtier")
PG_USER_ENV = "DBTIER_PG_USER"


@dataclass(frozen=True)
class ServerUser:
    name: str
    uid: int
    gid: int
    #: the group that lets the servers pass through the workspace's root (0710): a pool's shared one
    pass_gid: int | None = None

    @property
    def switches(self) -> bool:
        """True when the servers run as another user than dbtier itself."""
        return self.uid != os.geteuid()

    @property
    def groups(self) -> list[int]:
        return [self.pass_gid] if self.pass_gid is not None and self.pass_gid != self.gid else []

    def popen_kwargs(self) -> dict:
        if not self.switches:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": self.groups}

    def env(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        if self.switches:
            env.update(USER=self.name, LOGNAME=self.name, HOME="/")
        return env

    def give(self, path: Path) -> None:
        """Makes path (and what is below it) the servers' own."""
        if not self.switches:
            return
        os.chown(path, self.uid, self.gid, follow_symlinks=False)
        if path.is_dir() and not path.is_symlink():
            for root, dirs, files in os.walk(path):
                for n in dirs + files:
                    os.chown(os.path.join(root, n), self.uid, self.gid, follow_symlinks=False)

    def can_read(self, path: Path) -> bool:
        """Whether this user can reach path: every folder above it searchable, the file readable."""
        if not self.switches:
            return True
        path = Path(path).resolve()
        for p in [*reversed(path.parents), path]:
            st = p.stat()
            need = stat.S_IXOTH if p != path or p.is_dir() else stat.S_IROTH
            if st.st_uid == self.uid:
                need <<= 6
            elif st.st_gid == self.gid or st.st_gid in self.groups:
                need <<= 3
            if not st.st_mode & need:
                return False
        return True


@dataclass
class Lease:
    """A server user held by one lab: released, every process of it is stopped first."""
    user: ServerUser
    lock_fd: int | None = None
    #: whether every process of the user is the lab's (a pool user, or DBTIER_PG_USER, checked idle)
    owned: bool = False
    stopped: list[int] = field(default_factory=list)

    def release(self, keep: list[Path] = ()) -> None:
        """Stops every process of the user (what a dump or setup started and detached too), makes what
        it owns under `keep` ours (a kept lab's folders: the user serves the next lab), removes what
        else it left, then frees it."""
        if self.owned:
            self.stopped += stop_every_process(self.user)
            for folder in keep:
                reclaim(folder, self.user)
            remove_leftovers(self.user)
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


def me() -> ServerUser:
    entry = pwd.getpwuid(os.geteuid())
    return ServerUser(entry.pw_name, entry.pw_uid, entry.pw_gid)


def prospective() -> ServerUser:
    """The servers' user as the checks before a run see it (which user a lab gets is decided when it
    starts): as root, a user that owns none of the user's folders, so only what others may do counts."""
    if os.geteuid() != 0:
        return me()
    name = os.environ.get(PG_USER_ENV)
    if name:
        return _named_user(name)
    return ServerUser(POOL_PREFIX, -1, -1)


def lease(say: Callable[[str], None] = lambda _line: None) -> Lease:
    """The user a new lab's servers run as, held until release(): as root a pool user of its own (or
    DBTIER_PG_USER), with nothing of it running; otherwise dbtier's own user."""
    if os.geteuid() != 0:
        return Lease(me())
    name = os.environ.get(PG_USER_ENV)
    if name:
        user = _named_user(name)
        fd = _try_lock(name)
        if fd is None:
            raise UserError(f"{PG_USER_ENV}={name}: another dbtier run is using that user now; wait for it, or unset "
                            f"{PG_USER_ENV} (each run then gets a user of its own)")
        running = processes_of(user.uid)
        if running:
            os.close(fd)
            raise UserError(f"{PG_USER_ENV}={name}: that user has processes running (pid {running[0]}); dbtier stops "
                            f"every process of its servers' user when a run ends, so give it a user of its own, or "
                            f"unset {PG_USER_ENV}")
        return Lease(user, fd, owned=True)
    pass_gid = _pool_group()
    for i in range(1, POOL_MAX + 1):
        name = f"{POOL_PREFIX}{i}"
        fd = _try_lock(name)
        if fd is None:
            continue  # another lab has it
        try:
            entry = _pool_user(name)
            held = Lease(ServerUser(name, entry.pw_uid, entry.pw_gid, pass_gid), fd, owned=True)
            left = stop_every_process(held.user)  # what a killed run of this user left
            remove_leftovers(held.user)
            if left:
                say(f"stopped {len(left)} process(es) left by an interrupted run (user {name})")
            return held
        except BaseException:
            os.close(fd)
            raise
    raise UserError(f"all {POOL_MAX} lab users ({POOL_PREFIX}1 to {POOL_PREFIX}{POOL_MAX}) are in use by other dbtier "
                    "runs; wait for some to finish")


def sweep_idle_pool(say: Callable[[str], None] = lambda _line: None) -> None:
    """Stops what killed runs left running as pool users that no lab holds now."""
    if os.geteuid() != 0:
        return
    for i in range(1, POOL_MAX + 1):
        name = f"{POOL_PREFIX}{i}"
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            return  # the pool is made in order: none beyond
        if entry.pw_gecos != POOL_COMMENT or not processes_of(entry.pw_uid):
            continue
        fd = _try_lock(name)
        if fd is None:
            continue
        try:
            left = stop_every_process(ServerUser(name, entry.pw_uid, entry.pw_gid))
            if left:
                say(f"stopped {len(left)} process(es) left by an interrupted run (user {name})")
        finally:
            os.close(fd)


def _named_user(name: str) -> ServerUser:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise UserError(f"{PG_USER_ENV}={name}: no such user; create it or unset {PG_USER_ENV}") from None
    if entry.pw_uid == 0:
        raise UserError(f"{PG_USER_ENV}={name} is root; PostgreSQL refuses to run as root: name another user")
    return ServerUser(entry.pw_name, entry.pw_uid, entry.pw_gid)


def _lease_dir() -> Path:
    """/run/dbtier: root's alone (a lock another user could hold would block every run)."""
    folder = LEASES if LEASES.parent.is_dir() else Path(tempfile.gettempdir()) / "dbtier-leases"
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o077:
        raise UserError(f"{folder} is not a folder private to root; remove it (dbtier makes its own)")
    return folder


def _try_lock(name: str) -> int | None:
    """The lock on a server user, or None if another run holds it. Released when its fd closes, so a
    run that is killed frees it."""
    fd = os.open(_lease_dir() / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _run_admin(cmd: list[str], what: str) -> None:
    tool = shutil.which(cmd[0]) or f"/usr/sbin/{cmd[0]}"
    proc = None
    for _attempt in range(100):
        try:
            proc = subprocess.run([tool, *cmd[1:]], capture_output=True, text=True)
        except OSError:
            break
        if proc.returncode != 10:  # 10: /etc/passwd is locked by another useradd (another run's) just now
            break
        time.sleep(0.1)
    if proc is None or proc.returncode not in (0, 9):  # 9: it exists (another run made it meanwhile)
        why = proc.stderr.strip() if proc else f"{cmd[0]} not found"
        raise UserError(f"running as root, dbtier runs each lab's PostgreSQL as an unprivileged user of its own, but "
                        f"could not create {what} ({why}); set {PG_USER_ENV} to an unprivileged user, or run dbtier "
                        "as a normal user")


def _pool_group() -> int:
    try:
        return grp.getgrnam(POOL_GROUP).gr_gid
    except KeyError:
        _run_admin(["groupadd", "--system", POOL_GROUP], f"the group {POOL_GROUP}")
        return grp.getgrnam(POOL_GROUP).gr_gid


def _pool_user(name: str) -> pwd.struct_passwd:
    """A pool user, made on first use; one of that name that dbtier did not make is refused."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        _run_admin(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                    "--shell", "/usr/sbin/nologin", "--comment", POOL_COMMENT, name], f"the user {name}")
        entry = pwd.getpwnam(name)
    if entry.pw_gecos != POOL_COMMENT or entry.pw_uid == 0:
        raise UserError(f"the user {name} exists but dbtier did not make it (its comment is not '{POOL_COMMENT}'); "
                        f"dbtier stops every process of its lab users, so it will not use that one: remove it, or "
                        f"set {PG_USER_ENV}")
    return entry


def reclaim(path: Path, user: ServerUser) -> None:
    """What of path the user owns becomes ours (a kept lab's folders, before its user serves another lab)."""
    if not user.switches or not os.path.lexists(path):
        return
    me_ = (os.geteuid(), os.getegid())
    for root, dirs, files in os.walk(path):
        for n in [*dirs, *files, *([""] if root == str(path) else [])]:
            p = os.path.join(root, n) if n else root
            with contextlib.suppress(OSError):
                if os.lstat(p).st_uid == user.uid:
                    os.chown(p, *me_, follow_symlinks=False)


#: folders everyone may write in, where a lab's processes could leave files for the next lab of its user
SHARED_FOLDERS = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), Path("/run/lock"))
IPC_RMID = 0


def remove_leftovers(user: ServerUser) -> None:
    """What a lab's user made outside the lab (files in the shared folders, System V shared memory,
    semaphores and message queues) goes with the lab: its user serves the next lab."""
    if not user.switches or user.uid <= 0:
        return
    for folder in SHARED_FOLDERS:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_uid != user.uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    for table, remove in (("shm", lambda i: libc.shmctl(i, IPC_RMID, None)),
                          ("sem", lambda i: libc.semctl(i, 0, IPC_RMID)),
                          ("msg", lambda i: libc.msgctl(i, IPC_RMID, None))):
        try:
            with open(f"/proc/sysvipc/{table}") as f:
                header = f.readline().split()
                rows = [dict(zip(header, line.split())) for line in f]
        except OSError:
            continue
        for row in rows:
            with contextlib.suppress(KeyError, ValueError):
                if int(row["uid"]) == user.uid:
                    remove(ctypes.c_int(int(row["shmid" if table == "shm" else "semid" if table == "sem" else "msqid"])))


# -- every process of a user -------------------------------------------------------------------


def processes_of(uid: int) -> list[int]:
    """Live processes whose real, effective or saved user is uid (zombies are already gone)."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as f:
                status = f.read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        ids = fields.get("Uid", "").split()[:3]
        if str(uid) in ids and not fields.get("State", "").strip().startswith(("Z", "X")):
            out.append(int(entry.name))
    return out


def _kill_all_as(user: ServerUser) -> None:
    """kill(-1, SIGKILL) from a child that has become the user: every process of the user at once, a
    forking one included, and nobody else's."""
    pid = os.fork()
    if pid == 0:  # only async-signal-safe calls from here: no Python-level locks are taken
        try:
            os.setgroups([])
            os.setresgid(user.gid, user.gid, user.gid)
            os.setresuid(user.uid, user.uid, user.uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def stop_every_process(user: ServerUser, timeout: float = 10.0) -> list[int]:
    """Stops every process of a user dbtier holds (never its own user's). Returns the pids it found."""
    if not user.switches or user.uid <= 0:
        return []
    found: list[int] = []
    deadline = time.monotonic() + timeout
    while True:
        pids = processes_of(user.uid)
        if not pids:
            return found
        found += [p for p in pids if p not in found]
        if time.monotonic() > deadline:
            raise UserError(f"could not stop the processes of the lab user {user.name} (pid {pids[0]}); stop them "
                            "by hand")
        _kill_all_as(user)
        time.sleep(0.02)


# -- binaries the servers' user can reach --------------------------------------------------------


def _open_up(path: str) -> None:
    """Readable by all, and searchable/executable by all where the owner may execute."""
    mode = os.stat(path).st_mode
    os.chmod(path, mode | stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
             | ((stat.S_IXGRP | stat.S_IXOTH) if mode & stat.S_IXUSR else 0))


def reachable_copy(anchor: Path, parts: list[str], user: ServerUser, cache_root: Path) -> Path:
    """anchor itself if the servers' user can reach what is under it, else the anchor of a copy of
    `parts` (paths under anchor, copied with their relative layout) that it can: made once, reused.

    As root in a private home folder (mode 700), the wheel's binaries and the interposer are out of the
    server user's reach; a copy under a world-readable cache folder is not."""
    probe = anchor / parts[0]
    if user.can_read(probe / "bin" if probe.is_dir() else probe):
        return anchor
    stamp = ":".join(f"{anchor / p}:{(anchor / p).stat().st_mtime_ns}" for p in parts)
    dest = cache_root / f"{Path(parts[0]).name}-{hashlib.sha256(stamp.encode()).hexdigest()[:12]}"
    if dest.exists():
        return dest
    cache_root.mkdir(parents=True, exist_ok=True)
    os.chmod(cache_root, 0o755)
    tmp = cache_root / f".{dest.name}.{os.getpid()}"
    tmp.mkdir()
    for part in parts:
        source, target = anchor / part, tmp / part
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True)
        else:
            shutil.copy2(source, target)
    for root, dirs, files in os.walk(tmp):
        for n in dirs + files:
            if not os.path.islink(os.path.join(root, n)):
                _open_up(os.path.join(root, n))
    _open_up(str(tmp))
    try:
        os.rename(tmp, dest)
    except OSError:  # another run made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def lab_claim(lease: Lease, workspace_base: Path | None, say: Callable[[str], None]):
    """A lab's claim in the workspace, for servers run by the lease's user: the workspace opened so that
    the user may pass through it (refused, in one line, where it cannot), what killed runs left reaped,
    idle pool users swept, and the claim recording whose folders the reaper may remove. (workspace, claim)"""
    from dbtier.workspace import Workspace

    user = lease.user
    pass_group = (user.pass_gid if user.pass_gid is not None else user.gid) if user.switches else None
    workspace = Workspace.open(workspace_base, pass_group)
    if not user.can_read(workspace.root):
        raise UserError(f"the server user {user.name} cannot pass through {workspace.root.parent}; "
                        "choose a --workspace it can enter")
    workspace.reap(say)
    sweep_idle_pool(say)
    claim = workspace.claim("lab", user.gid if user.switches else None)
    claim.record["server_uid"] = user.uid  # whose folders the reaper may remove too
    claim.save()
    return workspace, claim

