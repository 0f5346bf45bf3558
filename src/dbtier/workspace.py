"""The workspace: one private folder per user (`dbtier-UID`, in RAM by default) where every command
keeps what it makes in a *claim*: a folder with an owner record that lists, before they exist, the
processes it starts, the folders it makes elsewhere and the shared memory its servers hold.

The next command reaps the claims of commands that were killed: it stops the recorded processes,
releases the recorded shared memory and removes the recorded folders, and nothing else. The root is
ours alone (made 0700, or 0710 with the servers' group when root runs them as another user; one
that is a symlink, another's, or writable by others is refused), so no other user can plant a record.

    ws = Workspace.open(option_or_None, server_group)
    ws.reap(say)
    claim = ws.claim("lab")
    folder = claim.outside(user_dir / claim.child_name("hdd"))   # recorded, then made
    claim.watch(pid, ...) / claim.unwatch(pid)
    claim.remove()"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from dbtier import lifecycle, ownership
from dbtier.errors import UserError

SHM = Path("/dev/shm")
OWNER_FILE = "owner.json"
MARK = "dbtier_claim"  # the record names its own folder: a record and a folder match or are not ours
CLAIM_NAME = re.compile(r"^(?P<kind>[a-z]+)-(?P<token>[0-9a-f]{8})$")
PENDING = ".new-"  # a claim being made: renamed into place once its record is written
PENDING_GRACE_S = 60.0
#: Places no workspace or output may be: the kernel's own views.
PSEUDO_FILESYSTEMS = (Path("/proc"), Path("/sys"), Path("/dev/pts"))


def _is_ram(path: Path) -> bool:
    from dbtier.devices import hostfs
    return hostfs.is_ram(path)


def default_base() -> Path:
    """/dev/shm when it is tmpfs (emulated devices keep their data in RAM), else the temporary folder."""
    if SHM.is_dir() and os.access(SHM, os.W_OK | os.X_OK) and _is_ram(SHM):
        return SHM
    return Path(tempfile.gettempdir())


def check_not_pseudo(path: Path, what: str) -> None:
    real = Path(os.path.realpath(path))
    for pseudo in PSEUDO_FILESYSTEMS:
        if real == pseudo or pseudo in real.parents:
            raise UserError(f"{what} {path}: {pseudo} is the kernel's, not a place for files; choose a folder on a "
                            "real file system")


def _read_json_nofollow(path: Path) -> dict | None:
    """A record written by us: a regular file we own, read without following a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > 1 << 20:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            doc = json.loads(f.read())
        return doc if isinstance(doc, dict) else None
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def write_private(path: Path, text: str, mode: int = 0o600) -> None:
    """Writes a file through a fresh temporary name (never following a planted link) and renames it."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "w", closefd=False) as f:
            f.write(text)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@dataclass
class Workspace:
    root: Path
    group: int | None = None  # the servers' group, when they run as another user and must pass through

    @property
    def mode(self) -> int:
        return 0o710 if self.group is not None else 0o700

    @staticmethod
    def locate(base: Path | None = None) -> Path:
        """Where the user's root will be (BASE/dbtier-UID, BASE being --workspace, or /dev/shm or the
        temporary folder), after checking BASE; nothing is made."""
        if base is None:
            base = default_base()
        else:
            base = Path(base).expanduser()
            check_not_pseudo(base, "--workspace")
            if not base.exists():
                raise UserError(f"--workspace {base}: no such folder; create it first")
            if not base.is_dir():
                raise UserError(f"--workspace {base}: not a folder; give a folder (dbtier makes its own inside)")
            base = base.resolve()
        if not os.access(base, os.W_OK | os.X_OK):
            raise UserError(f"--workspace {base}: you cannot write there; choose a folder of yours")
        ownership.check_yours(base, "--workspace", "keeps there")
        return base / f"dbtier-{os.geteuid()}"

    @classmethod
    def open(cls, base: Path | None = None, group: int | None = None) -> "Workspace":
        """The user's root under `base`, made if missing. `base` itself is the user's: it is never
        created, chmod'ed or deleted."""
        ws = cls(cls.locate(base), group)
        ws._make_root()
        return ws

    def _make_root(self) -> None:
        try:
            os.mkdir(self.root, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise UserError(f"cannot make the workspace {self.root}: {exc.strerror}") from None
        st = os.lstat(self.root)
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise UserError(f"workspace {self.root} is a link or not a folder; remove it (dbtier makes its own)")
        if st.st_uid != os.geteuid():
            raise UserError(f"workspace {self.root} belongs to another user (uid {st.st_uid}); remove it or choose "
                            "another --workspace")
        if st.st_mode & 0o022:
            raise UserError(f"workspace {self.root} can be written by other users; remove it (dbtier makes its "
                            "own, private)")
        # Our own folder. A lab whose servers run as another user lets their group pass through; other
        # commands leave it as it is (narrowing it would lock out the servers of a lab running now).
        if self.group is not None and st.st_gid != self.group:
            os.chown(self.root, -1, self.group)
        if self.group is not None and stat.S_IMODE(st.st_mode) != self.mode:
            os.chmod(self.root, self.mode)

    def claim(self, kind: str, group: int | None = None) -> "Claim":
        """A new claim: its folder appears under its final name only with its owner record inside.
        group: a lab's servers' own group, which may pass through it (0710); no other lab's may."""
        token = secrets.token_hex(4)
        name = f"{kind}-{token}"
        pending = self.root / f"{PENDING}{name}"
        os.mkdir(pending, 0o700)
        if group is not None:
            os.chown(pending, -1, group)
            os.chmod(pending, 0o710)
        claim = Claim(self, self.root / name, {
            MARK: name, "kind": kind, "pid": os.getpid(), "start": lifecycle.start_time(os.getpid()),
            "uid": os.geteuid(), "created": time.time(), "kept": False, "folders": [], "processes": [],
            "sysv_shm": []})
        claim.group = group
        claim.save(at=pending)
        os.rename(pending, claim.path)
        return claim

    def reap(self, say: Callable[[str], None] = lambda _line: None) -> list[str]:
        """Cleans up after commands of this user that were killed. Returns (and says) one line per
        thing done."""
        done: list[str] = []
        for entry in sorted(os.scandir(self.root), key=lambda e: e.name):
            with contextlib.suppress(FileNotFoundError):
                done += self._reap_one(entry)
        for line in done:
            say(line)
        return done

    def _reap_one(self, entry: os.DirEntry) -> list[str]:
        st = entry.stat(follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            return []
        path = Path(entry.path)
        if entry.name.startswith(PENDING):
            if time.time() - st.st_mtime > PENDING_GRACE_S and CLAIM_NAME.match(entry.name[len(PENDING):]):
                _rmtree(path)  # killed between making the folder and renaming it: holds only its record
            return []
        if not CLAIM_NAME.match(entry.name):
            return []
        record = _read_json_nofollow(path / OWNER_FILE)
        if not record or record.get(MARK) != entry.name:
            return []  # not a claim of ours: left alone
        if record.get("kept") or lifecycle.alive(record.get("pid"), record.get("start")):
            return []
        return Claim(self, path, record).release(interrupted=True)


@dataclass
class Claim:
    workspace: Workspace
    path: Path
    record: dict = field(default_factory=dict)
    group: int | None = None  # the lab servers' group that may pass through its folders

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def token(self) -> str:
        return self.name.rsplit("-", 1)[1]

    def child_name(self, label: str, hidden: bool = False, suffix: str = "") -> str:
        """A name for a folder of this claim's outside the workspace; it carries the claim's name, so the
        reaper can tell it from anything else there."""
        return f"{'.' if hidden else ''}dbtier-{self.name}-{label}{suffix}"

    def save(self, at: Path | None = None) -> None:
        folder = at or self.path
        if at is None and not folder.is_dir():
            return  # removed already (by the reaper, when a test plays a killed run): nothing left to record
        write_private(folder / OWNER_FILE, json.dumps(self.record))

    def inside(self, relative: str, mode: int | None = None) -> Path:
        """A folder in the claim's: ours alone, or (mode None, a lab's claim) one its servers pass through."""
        path = self.path / relative
        path.mkdir(mode=mode if mode is not None else 0o700)
        if self.group is not None and mode is None:
            os.chown(path, -1, self.group)
            os.chmod(path, 0o710)
        return path

    def outside(self, path: Path, mode: int = 0o700) -> Path:
        """Makes a folder outside the workspace (a device on the user's folder, a run directory being
        written), recorded first so that a killed run's is found. Its name must carry the claim's."""
        path = Path(path)
        if self.name not in path.name:
            raise ValueError(f"{path.name} does not carry the claim's name {self.name}")
        self.record["folders"].append(str(path))
        self.save()
        try:
            os.mkdir(path, mode)
        except FileExistsError:
            self.record["folders"].remove(str(path))
            self.save()
            raise UserError(f"{path} exists already; remove it or choose another folder") from None
        return path

    def forget(self, path: Path) -> None:
        """A folder of the claim's that is no longer its to remove (a run directory, renamed into place)."""
        with contextlib.suppress(ValueError):
            self.record["folders"].remove(str(path))
            self.save()

    def watch(self, pid: int, uid: int, first: int = signal.SIGTERM) -> None:
        """Records a process this claim started (in a session of its own): a killed run's is stopped."""
        self.record["processes"].append({"pid": pid, "start": lifecycle.start_time(pid), "uid": uid,
                                         "first": int(first)})
        self.save()

    def unwatch(self, pid: int) -> None:
        self.record["processes"] = [p for p in self.record["processes"] if p["pid"] != pid]
        self.save()

    def mount_tmpfs(self, relative: str, size_bytes: int) -> Path:
        """A tmpfs of the claim's own (root only) at a folder inside it: a file system other than
        /dev/shm's, for a server that treats a file there as persistent memory (MariaDB's redo log).
        Recorded first, so that a killed run's is unmounted by the reaper."""
        path = self.inside(relative, mode=0o755)
        self.record.setdefault("mounts", []).append(str(path))
        self.save()
        run = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=755,nosuid,nodev", "dbtier",
                              str(path)], capture_output=True, text=True)
        if run.returncode != 0:
            raise UserError(f"could not mount a tmpfs at {path}: {run.stderr.strip() or run.returncode}")
        return path

    def hold_sysv_shm(self, shmid: int, uid: int) -> None:
        """A System V segment a server of the claim's holds: a server killed outright leaves it."""
        entry = {"id": shmid, "uid": uid}
        if entry not in self.record["sysv_shm"]:
            self.record["sysv_shm"].append(entry)
            self.save()

    def settle(self) -> None:
        """Forgets processes that have ended (stopping what is left of their sessions) and releases shared
        memory nobody is attached to any more: after a server stops, or dies."""
        running = []
        for proc in self.record["processes"]:
            if lifecycle.alive(proc["pid"], proc["start"]):
                running.append(proc)
            elif lifecycle.session_members(proc["pid"], proc["start"], proc["uid"]):
                lifecycle.stop_recorded(proc["pid"], proc["start"], proc["uid"], signal.SIGKILL)
        held = [seg for seg in self.record["sysv_shm"]
                if seg["id"] in _sysv_segments() and not release_sysv_shm(seg["id"], seg["uid"])]
        if running != self.record["processes"] or held != self.record["sysv_shm"]:
            self.record.update(processes=running, sysv_shm=held)
            self.save()

    def keep(self) -> None:
        self.record["kept"] = True
        self.save()

    def unmount_keeping(self, relative: str) -> None:
        """The file system this claim mounted at `relative` taken down, what it held copied first into a
        folder of the same name (owners, modes and links kept): a kept lab's files outlive the mount."""
        mount = self.path / relative
        if str(mount) not in self.record.get("mounts", []):
            raise ValueError(f"{mount} is not a mount of this claim's")
        copy = self.path / f"{relative}.kept"
        shutil.copytree(mount, copy, symlinks=True, copy_function=shutil.copy2)
        for root, dirs, files in os.walk(mount):
            for name in [".", *dirs, *files]:
                src = os.path.join(root, name)
                st = os.lstat(src)
                os.lchown(os.path.join(copy, os.path.relpath(src, mount)), st.st_uid, st.st_gid)
        _unmount_inside(mount, self.path)
        self.record["mounts"].remove(str(mount))
        self.save()
        mount.rmdir()
        copy.rename(mount)

    def release(self, interrupted: bool = False) -> list[str]:
        """Stops what the claim recorded, releases its shared memory, removes its folders. Returns a line
        per thing a user should hear of (only for a claim left by an interrupted run)."""
        done = []
        stuck = False
        for proc in self.record.get("processes", []):
            if not (lifecycle.alive(proc["pid"], proc["start"])
                    or lifecycle.session_members(proc["pid"], proc["start"], proc["uid"])):
                continue
            if lifecycle.stop_recorded(proc["pid"], proc["start"], proc["uid"], proc.get("first", signal.SIGTERM)):
                done.append(f"stopped a process left by an interrupted run (pid {proc['pid']})")
            else:
                done.append(f"could not stop the process left by an interrupted run (pid {proc['pid']}); stop it "
                            "by hand")
                stuck = True
        if stuck:
            return done  # its folders may still be in use: the next run tries again
        for mount in self.record.get("mounts", []):  # before its folder is removed: nothing under it is ours
            if _unmount_inside(Path(mount), self.path) and interrupted:
                done.append(f"unmounted a file system an interrupted run had mounted ({mount})")
        for seg in self.record.get("sysv_shm", []):
            if release_sysv_shm(seg["id"], seg["uid"]) and interrupted:
                done.append(f"released the shared memory of a server that was killed (System V id {seg['id']})")
        for folder in self.record.get("folders", []):
            _remove_outside(Path(folder), self.name, self.record.get("server_uid"))
        _rmtree(self.path)
        if interrupted:
            done.append(f"removed what an interrupted run left: {self.path}")
        return done

    def remove(self) -> None:
        """The end of a command: everything it recorded goes (it has stopped its processes itself)."""
        self.release()


def _unmount_inside(mount: Path, claim: Path) -> bool:
    """Unmounts a file system the claim mounted (only at a folder inside the claim's). True if one was."""
    if claim not in mount.parents or not os.path.ismount(mount):
        return False
    return subprocess.run(["umount", "-l", str(mount)], capture_output=True).returncode == 0


def _rmtree(path: Path) -> None:
    """Removes a folder without following links (shutil uses the fd-based, race-safe walk here)."""
    shutil.rmtree(path, ignore_errors=True)


def _remove_outside(path: Path, claim_name: str, server_uid: int | None) -> None:
    """A recorded folder outside the workspace: removed only if it still is what the claim made, a real
    folder named after the claim and owned by us or by the servers' user."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    owners = {os.geteuid()} | ({server_uid} if server_uid is not None else set())
    if stat.S_ISDIR(st.st_mode) and claim_name in path.name and st.st_uid in owners:
        _rmtree(path)


# -- System V shared memory ------------------------------------------------------------------

IPC_RMID = 0


def _sysv_segments() -> dict[int, dict]:
    """/proc/sysvipc/shm: shmid -> {nattch, uid}."""
    out = {}
    try:
        with open("/proc/sysvipc/shm") as f:
            header = f.readline().split()
            for line in f:
                row = dict(zip(header, line.split()))
                out[int(row["shmid"])] = {"nattch": int(row["nattch"]), "uid": int(row["uid"])}
    except (OSError, KeyError, ValueError):
        pass
    return out


def release_sysv_shm(shmid: int, uid: int) -> bool:
    """Removes a recorded segment if it still exists, belongs to uid and nobody is attached. PostgreSQL
    removes its own at shutdown; a server killed outright leaves it."""
    seg = _sysv_segments().get(int(shmid))
    if not seg or seg["uid"] != uid or seg["nattch"] != 0:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.shmctl(ctypes.c_int(int(shmid)), IPC_RMID, None) == 0
