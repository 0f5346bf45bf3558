"""Loaded databases kept in the workspace, to be copied into later runs instead of loading again.

Restoring a real database takes minutes, and every run, compare and verify would repeat it. A seed
lab's stopped server (its Lab.seed) is moved here under a key of what made it (the dump's and setup
files' sha256, the workload's load parameters, the engine and its version, the settings given), and a
later run with the same key starts a copy of it, as `compare` copies one within a command. What a
seed is made of, and what must still hold of it when it is used, is the engine's (its KeptLoads
subclass: engines/postgres/kept.py, engines/mariadb/kept.py); keeping, listing, holding and removing
are here, one folder for every engine's.

    store = engine.kept_clusters(workspace_root)
    store.keep(seed_lab, seed, key, record)         # moved in, made dbtier's own user's, recorded
    with store.use(key) as kept: kept.seed          # checked, held against removal while it is copied
    store.entries(); store.remove(key)

A kept load is content a server wrote, running a user's SQL: it is made dbtier's own user's when it
is kept (the server's pool user serves other labs next), its folder is private (0700, checked as the
workspace is), and on use the engine checks that nothing a server would read from it was changed."""

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
    store: "KeptLoads"

    @property
    def seed(self):
        """The engine's Seed of it, as its labs copy one."""
        return self.store.seed_of(self.path, self.record)

    @property
    def created(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.record["created"]))


class KeptLoads:
    """The workspace's kept loads; an engine's subclass says what a seed is made of (parts, settle,
    seed_of) and what must still hold of a kept one (check)."""

    def __init__(self, workspace_root: Path):
        self.root = Path(workspace_root) / FOLDER

    # -- the engine's part -------------------------------------------------------------------------

    def parts(self, seed) -> list[tuple[Path, str]]:
        """The seed's folders, each with the name it is kept under."""
        raise NotImplementedError

    def settle(self, pending: Path, final: Path, seed) -> dict:
        """After the parts were moved into `pending` (to be renamed `final`): what the engine must mend
        (links between the parts) and record of the seed (returned, into the record)."""
        return {}

    def seed_of(self, path: Path, record: dict):
        raise NotImplementedError

    def check(self, kept: Kept) -> None:
        """A UserError if what a server would read of it is not what dbtier kept."""

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

    def keep(self, lab, seed, key: str, record: dict) -> Kept | None:
        """Moves a seed lab's stopped server (its Lab.seed) in under `key` (None, and it stays where it
        is, when it would not fit under the cap even alone). Older kept loads go, oldest first, to make
        room."""
        self._open_root()
        parts = self.parts(seed)
        size = sum(_tree_bytes(source) for source, _name in parts)
        cap = self.cap_bytes()
        if size > cap:
            return None
        self._make_room(cap - size)
        final = self.root / key
        pending = self.root / f"{PENDING}{key}-{secrets.token_hex(4)}"
        os.mkdir(pending, 0o700)
        try:
            for source, name in parts:
                try:
                    os.rename(source, pending / name)
                except OSError:  # another file system: copied
                    shutil.copytree(source, pending / name, symlinks=True)
            settled = self.settle(pending, final, seed)
            osuser.reclaim(pending, lab.user)  # ours now: the server's user serves other labs next
            for _source, name in parts:
                os.chmod(pending / name, 0o700)
            full = {**record, "key": key, "created": time.time(), "bytes": size, **settled}
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
        return Kept(key, path, record, self)

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
            self.check(kept)
            yield kept
        finally:
            os.close(fd)

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
