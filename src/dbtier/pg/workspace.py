"""Where a lab lives: one folder per run under a workspace root (on tmpfs by default, so emulated
devices keep their data in RAM), with an owner record that lets the next run find and stop a server
left behind by a run that was killed."""

from __future__ import annotations

import getpass
import json
import os
import secrets
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from dbtier.devices import hostfs
from dbtier.errors import UserError

SHM = Path("/dev/shm")
OWNER_FILE = "owner.json"
SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes, with ".s.PGSQL.5432" appended


def default_root() -> Path:
    """/dev/shm/dbtier-USER when /dev/shm is tmpfs, else a folder in the temporary directory."""
    name = f"dbtier-{getpass.getuser()}"
    if SHM.is_dir() and os.access(SHM, os.W_OK) and hostfs.is_ram(SHM):
        return SHM / name
    return Path(os.environ.get("TMPDIR", "/tmp")) / name


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot: with the pid, it names one process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@dataclass
class LabDir:
    """One run's folder: devices, cluster, socket, server log."""

    path: Path
    extra_dirs: list[Path] = field(default_factory=list)  # created inside user-given device folders
    pgdata: Path | None = None
    kept: bool = False  # left for inspection (--keep): the reaper leaves it alone

    @classmethod
    def create(cls, root: Path) -> "LabDir":
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o755)  # the servers' user passes through
        path = root / f"lab-{secrets.token_hex(4)}"
        path.mkdir(mode=0o755)
        lab = cls(path)
        if len(str(lab.socket_dir)) > SOCKET_PATH_MAX:
            shutil.rmtree(path)
            raise UserError(f"workspace {root} is too deep for a unix socket path; choose a shorter --workspace")
        lab.record()
        return lab

    @property
    def socket_dir(self) -> Path:
        return self.path / "s"

    def record(self) -> None:
        doc = {"pid": os.getpid(), "start": _start_time(os.getpid()), "created": time.time(),
               "pgdata": str(self.pgdata) if self.pgdata else None, "extra_dirs": [str(p) for p in self.extra_dirs], "kept": self.kept}
        tmp = self.path / f".{OWNER_FILE}.tmp"
        tmp.write_text(json.dumps(doc))
        tmp.replace(self.path / OWNER_FILE)

    def remove(self) -> None:
        for extra in self.extra_dirs:
            shutil.rmtree(extra, ignore_errors=True)
        shutil.rmtree(self.path, ignore_errors=True)


def _owner_alive(doc: dict) -> bool:
    pid = doc.get("pid")
    return bool(pid) and _start_time(pid) is not None and _start_time(pid) == doc.get("start")


def _postmaster_of(pgdata: Path) -> int | None:
    """The pid of a live postmaster serving pgdata, from postmaster.pid, checked against /proc."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if str(pgdata).encode() in cmdline else None


def stop_postmaster(pid: int, timeout: float = 15.0) -> bool:
    """Immediate shutdown (SIGQUIT), then SIGKILL to its process group. True if it is gone."""
    for sig, wait in ((signal.SIGQUIT, timeout), (signal.SIGKILL, 5.0)):
        try:
            if sig == signal.SIGKILL:
                os.killpg(pid, sig)  # the postmaster leads its own session: this reaches every backend
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if _start_time(pid) is None or _is_zombie(pid):
                return True
            time.sleep(0.05)
    return _start_time(pid) is None


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _stop_processes_in(lab: Path, timeout: float = 15.0) -> None:
    """Ends what still runs from a lab's folder (initdb and its bootstrap server, when the run was
    killed while creating the cluster): SIGTERM, then SIGKILL."""
    needle = str(lab).encode()

    def running() -> list[int]:
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                try:
                    if needle in (entry / "cmdline").read_bytes() and not _is_zombie(int(entry.name)):
                        pids.append(int(entry.name))
                except OSError:
                    continue
        return pids

    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in running():
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + (timeout if sig == signal.SIGTERM else 5.0)
        while running() and time.monotonic() < deadline:
            time.sleep(0.05)


def reap_stale(root: Path) -> list[str]:
    """Stops servers and removes folders of runs under root whose dbtier process is gone.
    Returns one line per thing done, for the user."""
    done: list[str] = []
    if not root.is_dir():
        return done
    for lab in sorted(root.glob("lab-*")):
        try:
            doc = json.loads((lab / OWNER_FILE).read_text())
        except (OSError, ValueError):
            doc = {}
        if doc and (_owner_alive(doc) or doc.get("kept")):
            continue  # another run, still going; or a workspace the user asked to keep
        if not doc and time.time() - lab.stat().st_mtime < 60:
            continue  # just being created
        pgdata = Path(doc["pgdata"]) if doc.get("pgdata") else None
        pid = _postmaster_of(pgdata) if pgdata else None
        if pid is not None:
            if stop_postmaster(pid):
                done.append(f"stopped a server left by an interrupted run (pid {pid}, {pgdata})")
            else:
                done.append(f"could not stop the server left by an interrupted run (pid {pid}); stop it by hand")
                continue
        _stop_processes_in(lab)
        LabDir(lab, [Path(p) for p in doc.get("extra_dirs", [])]).remove()
        done.append(f"removed the workspace of an interrupted run: {lab}")
    return done
