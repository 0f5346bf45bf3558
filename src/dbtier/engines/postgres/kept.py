"""Loaded clusters kept in the workspace, to be copied into later runs instead of loading again.

Restoring a real database takes minutes, and every run, compare and verify would repeat it. A seed
lab's stopped cluster (Lab.seed) is moved here under a key of what made it (the dump's and setup
files' sha256, the workload's load parameters, the server's version, the settings given), and a later
run with the same key adopts a copy of it (Cluster.adopt), as `compare` copies one within a command.

    store = KeptClusters(workspace_root)
    store.keep(seed_lab, seed, key, record)         # moved in, made dbtier's own user's, recorded
    with store.use(key) as kept: kept.seed          # checked, held against removal while it is copied
    store.entries(); store.remove(key)

A kept cluster is content a server wrote, running a user's SQL: it is made dbtier's own user's when it
is kept (the server's pool user serves other labs next), its folder is private (0700, checked as the
workspace is), and on use its configuration file must still be what dbtier checked when it kept it,
and ALTER SYSTEM's file must hold no setting (as Cluster.check_config requires before any start)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from dbtier.engines import osuser
from dbtier.engines.postgres.cluster import AUTO_CONF, Seed, _digest
from dbtier.errors import UserError

FOLDER = "loaded"
RECORD = "loaded.json"
PENDING = ".new-"
PENDING_GRACE_S = 3600.0  # a copy across file systems may take a while
#: what a key looks like: the first 16 hex digits of a sha256
KEY_LENGTH = 16
#: kept clusters may take at most this share of the workspace's file system (in RAM by default)
SHARE_OF_FILESYSTEM = 0.25


def _tree_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _private_folder(path: Path, what: str) -> None:
    """A folder of ours alone: not a link, our own, nobody else may enter."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise UserError(f"{what} {path} is not a private folder of yours; remove it (dbtier will load again)")


@dataclass
class Kept:
    key: str
    path: Path
    record: dict

    @property
    def seed(self) -> Seed:
        s = self.record["seed"]
        return Seed(self.path / "pgdata", self.path / "pg_wal", s["tablespace"], int(s["tablespace_oid"]),
                    self.path / "ts")

    @property
    def created(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.record["created"]))


class KeptClusters:
    def __init__(self, workspace_root: Path):
        self.root = Path(workspace_root) / FOLDER

    def _open_root(self) -> None:
        with contextlib.suppress(FileExistsError):
            os.mkdir(self.root, 0o700)
        _private_folder(self.root, "the kept clusters' folder")
        for entry in os.scandir(self.root):  # what a run killed while keeping or removing one left
            with contextlib.suppress(OSError):
                if entry.name.startswith(PENDING) and time.time() - entry.stat(follow_symlinks=False).st_mtime > \
                        PENDING_GRACE_S:
                    shutil.rmtree(entry.path, ignore_errors=True)

    # -- keeping ----------------------------------------------------------------------------------

    def cap_bytes(self) -> int:
        st = os.statvfs(self.root.parent)
        return int(st.f_blocks * st.f_frsize * SHARE_OF_FILESYSTEM)

    def keep(self, lab, seed: Seed, key: str, record: dict) -> Kept | None:
        """Moves a seed lab's stopped cluster (Lab.seed) in under `key` (None, and it stays where it is, when it would not
        fit under the cap even alone). Older kept clusters go, oldest first, to make room."""
        self._open_root()
        size = sum(_tree_bytes(p) for p in (seed.pgdata, seed.waldir, seed.tablespace_dir))
        cap = self.cap_bytes()
        if size > cap:
            return None
        self._make_room(cap - size)
        final = self.root / key
        pending = self.root / f"{PENDING}{key}-{secrets.token_hex(4)}"
        os.mkdir(pending, 0o700)
        try:
            for source, name in ((seed.pgdata, "pgdata"), (seed.waldir, "pg_wal"), (seed.tablespace_dir, "ts")):
                try:
                    os.rename(source, pending / name)
                except OSError:  # another file system: copied
                    shutil.copytree(source, pending / name, symlinks=True)
            for link, target in ((pending / "pgdata" / "pg_wal", final / "pg_wal"),
                                 (pending / "pgdata" / "pg_tblspc" / str(seed.tablespace_oid), final / "ts")):
                link.unlink()
                link.symlink_to(target)
            osuser.reclaim(pending, lab.user)  # ours now: the server's user serves other labs next
            for path in (pending / "pgdata", pending / "pg_wal", pending / "ts"):
                os.chmod(path, 0o700)
            conf = _digest(pending / "pgdata" / "postgresql.conf")
            full = {**record, "key": key, "created": time.time(), "bytes": size, "conf_sha256": conf,
                    "seed": {"tablespace": seed.tablespace, "tablespace_oid": seed.tablespace_oid}}
            fd = os.open(pending / RECORD, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(full, f)
            try:
                os.rename(pending, final)
            except OSError:  # kept meanwhile by another run of the same: theirs serves
                shutil.rmtree(pending, ignore_errors=True)
        except BaseException:
            shutil.rmtree(pending, ignore_errors=True)
            raise
        return self._read(key)

    def _make_room(self, room: int) -> None:
        entries = sorted(self.entries(), key=lambda k: k.record["created"])
        total = sum(k.record.get("bytes", 0) for k in entries)
        for kept in entries:
            if total <= room:
                return
            with contextlib.suppress(UserError):
                self.remove(kept.key)
                total -= kept.record.get("bytes", 0)

    # -- reading ----------------------------------------------------------------------------------

    def _read(self, key: str) -> Kept | None:
        path = self.root / key
        if not os.path.lexists(path):
            return None
        _private_folder(path, "the kept cluster")
        try:
            with open(path / RECORD, "rb", opener=lambda p, fl: os.open(p, fl | os.O_NOFOLLOW)) as f:
                record = json.loads(f.read(1 << 20))
        except (OSError, ValueError):
            return None  # half-removed, or not ours: not used
        if not isinstance(record, dict) or record.get("key") != key:
            return None
        return Kept(key, path, record)

    def entries(self) -> list[Kept]:
        if not self.root.is_dir():
            return []
        out = []
        for entry in sorted(os.scandir(self.root), key=lambda e: e.name):
            if len(entry.name) == KEY_LENGTH and not entry.name.startswith("."):
                with contextlib.suppress(UserError):
                    kept = self._read(entry.name)
                    if kept is not None:
                        out.append(kept)
        return out

    @contextlib.contextmanager
    def use(self, key: str):
        """The kept cluster of that key, checked and held (a shared lock: `remove` waits for no one and
        refuses while it is held), or None."""
        kept = self._read(key)
        if kept is None:
            yield None
            return
        fd = os.open(kept.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            self._check(kept)
            yield kept
        finally:
            os.close(fd)

    def _check(self, kept: Kept) -> None:
        """Its configuration as dbtier kept it, and nothing in ALTER SYSTEM's file (a server started on a
        copy would read both)."""
        pgdata = kept.path / "pgdata"
        if _digest(pgdata / "postgresql.conf") != kept.record.get("conf_sha256"):
            raise UserError(f"the kept cluster {kept.path}: its postgresql.conf is not what dbtier kept; remove it "
                            f"(dbtier labs remove {kept.key}) and run again")
        auto = pgdata / AUTO_CONF
        if os.path.lexists(auto):
            text = auto.read_bytes()[:1 << 20].decode("utf-8", "replace") if not auto.is_symlink() else "link"
            if any(ln.strip() and not ln.lstrip().startswith("#") for ln in text.splitlines()):
                raise UserError(f"the kept cluster {kept.path}: {AUTO_CONF} holds settings; remove it (dbtier labs "
                                f"remove {kept.key})")

    # -- removing ---------------------------------------------------------------------------------

    def remove(self, key: str) -> int:
        """Removes a kept cluster; refused while a run copies it. Returns its bytes."""
        kept = self._read(key)
        if kept is None:
            raise UserError(f"no kept cluster {key} (dbtier labs lists them)")
        fd = os.open(kept.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise UserError(f"the kept cluster {key} is being copied by a run now; remove it after") from None
            doomed = self.root / f"{PENDING}gone-{key}-{secrets.token_hex(4)}"
            os.rename(kept.path, doomed)  # gone from the list at once; removed below
        finally:
            os.close(fd)
        shutil.rmtree(doomed, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.rmdir(self.root)  # the last one: nothing of them is left in the workspace
        return int(kept.record.get("bytes", 0))
