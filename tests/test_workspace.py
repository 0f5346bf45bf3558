"""The workspace's rules: a private root per user, claims that appear whole, and a reaper that removes
only what a killed command recorded (its folders, processes and shared memory), nothing else."""

from __future__ import annotations

import ctypes
import json
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from dbtier import lifecycle
from dbtier.errors import UserError
from dbtier.workspace import OWNER_FILE, Workspace, _sysv_segments
from tests.conftest import stop_session


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def orphan(claim) -> None:
    """Makes a claim look like one whose command was killed: its owner pid is gone."""
    claim.record["pid"] = dead_pid()
    claim.save()


def test_the_root_is_private_and_named_by_uid(shm_dir):
    ws = Workspace.open(shm_dir)
    assert ws.root == shm_dir / f"dbtier-{os.geteuid()}"
    assert stat.S_IMODE(ws.root.stat().st_mode) == 0o700
    ws = Workspace.open(shm_dir, group=os.getegid())  # a lab's servers' group may pass through
    assert stat.S_IMODE(ws.root.stat().st_mode) == 0o710
    Workspace.open(shm_dir)  # and another command does not narrow it under a running lab
    assert stat.S_IMODE(ws.root.stat().st_mode) == 0o710
    assert stat.S_IMODE(shm_dir.stat().st_mode) == 0o755  # the user's folder is never changed


@pytest.mark.parametrize("plant", ["symlink", "file", "group-writable"])
def test_a_suspicious_root_is_refused(shm_dir, tmp_path, plant):
    root = shm_dir / f"dbtier-{os.geteuid()}"
    if plant == "symlink":
        root.symlink_to(tmp_path)
    elif plant == "file":
        root.write_text("x")
    else:
        root.mkdir()
        root.chmod(0o770)
    with pytest.raises(UserError):
        Workspace.open(shm_dir)
    assert os.path.lexists(root) and list(tmp_path.iterdir()) == []


def test_a_missing_or_pseudo_workspace_is_refused(tmp_path):
    for bad in (tmp_path / "missing", Path("/proc/self"), tmp_path / "file"):
        if bad.name == "file":
            bad.write_text("x")
        with pytest.raises(UserError):
            Workspace.open(bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_a_claim_appears_whole_and_goes_whole(shm_dir, tmp_path):
    ws = Workspace.open(shm_dir)
    claim = ws.claim("exec")
    record = json.loads((claim.path / OWNER_FILE).read_text())
    assert record["dbtier_claim"] == claim.name and record["pid"] == os.getpid()
    assert [p.name for p in ws.root.iterdir()] == [claim.name]  # no pending folder left
    outside = claim.outside(tmp_path / claim.child_name("files"))
    (outside / "f").write_text("x")
    claim.remove()
    assert not claim.path.exists() and not outside.exists()


def test_the_reaper_removes_only_what_a_killed_command_recorded(shm_dir, tmp_path):
    ws = Workspace.open(shm_dir)
    killed, live, kept = ws.claim("lab"), ws.claim("exec"), ws.claim("lab")
    ours = killed.outside(tmp_path / killed.child_name("hdd"))
    (ours / "data").write_text("x")
    # recorded, but not the claim's to remove: another name, a link, a folder it did not make
    users = tmp_path / "users-folder"
    users.mkdir()
    link = tmp_path / killed.child_name("link")
    link.symlink_to(users)
    killed.record["folders"] += [str(users), str(link)]
    orphan(killed)
    kept.keep()
    orphan(kept)
    (ws.root / "lab-notes").mkdir()  # not a claim's name
    (ws.root / "lab-0000abcd").mkdir()  # a claim's name, but no record of ours
    old = time.time() - 3600
    os.utime(ws.root / "lab-0000abcd", (old, old))
    done = ws.reap()
    assert any("interrupted run" in line for line in done)
    assert not killed.path.exists() and not ours.exists()
    assert users.exists() and link.is_symlink()
    assert live.path.exists() and kept.path.exists()
    assert (ws.root / "lab-notes").exists() and (ws.root / "lab-0000abcd").exists()
    live.remove()


def test_a_pending_claim_is_removed_once_stale(shm_dir):
    ws = Workspace.open(shm_dir)
    fresh, stale = ws.root / ".new-lab-0000aaaa", ws.root / ".new-lab-0000bbbb"
    fresh.mkdir()
    stale.mkdir()
    old = time.time() - 3600
    os.utime(stale, (old, old))
    ws.reap()
    assert fresh.exists() and not stale.exists()


def test_the_reaper_stops_recorded_processes_and_only_those(shm_dir):
    ws = Workspace.open(shm_dir)
    claim = ws.claim("lab")
    recorded = subprocess.Popen(["sleep", "600"], start_new_session=True)
    decoy = subprocess.Popen(["sh", "-c", "sleep 600", str(claim.path)], start_new_session=True)  # names it
    try:
        claim.watch(recorded.pid, os.geteuid())
        orphan(claim)
        done = ws.reap()
        assert recorded.wait(timeout=10) is not None
        assert decoy.poll() is None
        assert any(f"pid {recorded.pid}" in line for line in done)
    finally:
        for p in (recorded, decoy):
            stop_session(p)


def test_a_reused_pid_is_not_signalled(shm_dir):
    """A record whose process has gone: a live process with its pid but another start time is left alone."""
    ws = Workspace.open(shm_dir)
    claim = ws.claim("lab")
    other = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        claim.record["processes"].append({"pid": other.pid, "start": "1", "uid": os.geteuid(), "first": 15})
        orphan(claim)
        ws.reap()
        assert other.poll() is None and not lifecycle.is_gone(other.pid)
    finally:
        other.kill()
        other.wait()


def test_the_reaper_releases_recorded_shared_memory_nobody_holds(shm_dir):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    IPC_PRIVATE, IPC_CREAT = 0, 0o1000
    free = libc.shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0o600)
    held = libc.shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0o600)
    assert free >= 0 and held >= 0
    addr = libc.shmat(held, None, 0)
    try:
        ws = Workspace.open(shm_dir)
        claim = ws.claim("lab")
        claim.hold_sysv_shm(free, os.geteuid())
        claim.hold_sysv_shm(held, os.geteuid())
        orphan(claim)
        ws.reap()
        segments = _sysv_segments()
        assert free not in segments
        assert held in segments  # someone is attached: not ours to pull away
    finally:
        libc.shmdt(ctypes.c_void_p(addr))
        for shmid in (free, held):
            libc.shmctl(shmid, 0, None)
