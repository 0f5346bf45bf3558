"""Who the servers run as. PostgreSQL refuses to run as root, so when dbtier is started as root the
servers run as an unprivileged user (`dbtier`, created on first use; DBTIER_PG_USER names another).
A normal user's servers run as that user, unchanged."""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from dbtier.errors import UserError

DEFAULT_USER = "dbtier"


@dataclass(frozen=True)
class ServerUser:
    name: str
    uid: int
    gid: int

    @property
    def switches(self) -> bool:
        """True when the servers run as another user than dbtier itself."""
        return self.uid != os.geteuid()

    def popen_kwargs(self) -> dict:
        if not self.switches:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def env(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        if self.switches:
            env.update(USER=self.name, LOGNAME=self.name, HOME="/")
        return env

    def give(self, path: Path) -> None:
        """Makes path (and what is below it) the servers' own."""
        if not self.switches:
            return
        os.chown(path, self.uid, self.gid)
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
            elif st.st_gid == self.gid:
                need <<= 3
            if not st.st_mode & need:
                return False
        return True


def server_user() -> ServerUser:
    if os.geteuid() != 0:
        me = pwd.getpwuid(os.geteuid())
        return ServerUser(me.pw_name, me.pw_uid, me.pw_gid)
    name = os.environ.get("DBTIER_PG_USER", DEFAULT_USER)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        if name != DEFAULT_USER:
            raise UserError(f"DBTIER_PG_USER={name}: no such user; create it or unset DBTIER_PG_USER") from None
        entry = _create_user(name)
    if entry.pw_uid == 0:
        raise UserError(f"user {name} is root; PostgreSQL refuses to run as root: set DBTIER_PG_USER to another user")
    return ServerUser(entry.pw_name, entry.pw_uid, entry.pw_gid)


def _create_user(name: str) -> pwd.struct_passwd:
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    cmd = [useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
           "--shell", "/usr/sbin/nologin", "--comment", "dbtier PostgreSQL servers", name]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError:
        proc = None
    if proc is None or proc.returncode not in (0, 9):  # 9: it exists (another run made it meanwhile)
        why = proc.stderr.strip() if proc else "useradd not found"
        raise UserError(f"running as root, dbtier runs PostgreSQL as the unprivileged user '{name}', but could not "
                        f"create it ({why}); create one and set DBTIER_PG_USER, or run dbtier as a normal user")
    return pwd.getpwnam(name)


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
