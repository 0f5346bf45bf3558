"""No server outlives its run: Ctrl-C and SIGTERM stop it and leave neither workspace nor partial
results; a server left by a run that was killed outright is stopped by the next start."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dbtier.devices import native
from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import Lab, LabOptions
from dbtier.devices.spec import parse_all
from dbtier.workspace import Workspace


def postgres_pids(workspace: Path) -> list[int]:
    """Live processes whose command line names the workspace (the postmaster: postgres -D ...)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if str(workspace).encode() in cmd and b"postgres" in cmd and state != "Z":
                pids.append(int(entry.name))
    return pids


def ipc_leftovers() -> set[str]:
    """Shared memory PostgreSQL servers left: POSIX segments in /dev/shm, and System V segments nobody
    is attached to whose creator is gone. A server stopped in order removes its own; one killed
    outright leaves them. (A server running meanwhile, another test's elsewhere on the machine, holds
    its segment attached: not a leftover.)"""
    found = {f"dsm:{p.name}" for p in Path("/dev/shm").glob("PostgreSQL.*")}
    try:
        with open("/proc/sysvipc/shm") as f:
            header = f.readline().split()
            rows = [dict(zip(header, line.split())) for line in f if line.strip()]
    except OSError:
        rows = []
    for row in rows:
        if int(row["nattch"]) == 0 and not Path(f"/proc/{row['cpid']}").exists():
            found.add(f"shm:{row['shmid']}")
    return found


def ipc_left_since(before: set[str], settle_s: float = 5.0) -> set[str]:
    """What ipc_leftovers() holds now that it did not before, and still holds settle_s later: an
    initdb anywhere on the machine (another test's) makes and removes POSIX segments of its own in
    /dev/shm within a second; what a killed server left stays."""
    new = ipc_leftovers() - before
    if new:
        time.sleep(settle_s)
        new &= ipc_leftovers()
    return new


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def measuring(workspace: Path) -> bool:
    """True once a lab under workspace has resumed its emulation: the measured phase has begun."""
    for state in workspace.glob("dbtier-*/lab-*/iotap/iotap.state"):
        try:
            if native.dump_state(state)["paused"] == 0:
                return True
        except Exception:
            pass
    return False


def start_run(workspace: Path, output: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "dbtier", "run", "random-index", "-d", "hdd=hdd-sata-7200", "--rows", "3000",
           "--workspace", str(workspace), "-o", str(output), "-q"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("sig, phase", [(signal.SIGINT, "measuring"), (signal.SIGTERM, "loading")])
def test_interrupt_leaves_nothing_behind(shm_dir, tmp_path, sig, phase):
    ipc_before = ipc_leftovers()
    proc = start_run(shm_dir, tmp_path)
    try:
        wait_for(lambda: postgres_pids(shm_dir), 60, "the server to start")
        if phase == "measuring":
            wait_for(lambda: measuring(shm_dir), 60, "the measured phase")
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert postgres_pids(shm_dir) == []
    assert list(shm_dir.glob("dbtier-*/lab-*")) == []
    assert list(tmp_path.iterdir()) == []  # no run directory, not even a partial one
    assert ipc_left_since(ipc_before) == set()


def test_a_killed_runs_server_is_stopped_by_the_next_start(shm_dir, tmp_path):
    ipc_before = ipc_leftovers()
    proc = start_run(shm_dir, tmp_path)
    wait_for(lambda: postgres_pids(shm_dir), 60, "the server to start")
    proc.kill()
    proc.wait()
    Workspace.open(shm_dir).reap()  # what the next run does first
    wait_for(lambda: not postgres_pids(shm_dir), 30, "the server to stop")
    assert list(shm_dir.glob("dbtier-*/lab-*")) == []
    assert ipc_left_since(ipc_before) == set()


def test_reaper_stops_a_live_server_whose_owner_is_gone(shm_dir):
    reqs = parse_all(["ssd=ssd-sata-mlc"])
    with Lab(reqs, placement.parse([], ["ssd"]), LabOptions(workspace=shm_dir), say=lambda _l: None) as lab:
        owner = lab.claim.path / "owner.json"
        doc = json.loads(owner.read_text())
        child = subprocess.Popen(["true"])  # a pid that has certainly exited: the "killed" owner
        child.wait()
        owner.write_text(json.dumps({**doc, "pid": child.pid}))
        assert lab.cluster.running and postgres_pids(shm_dir)
        done = Workspace.open(shm_dir).reap()
        assert any("stopped a process" in line for line in done), done
        assert not postgres_pids(shm_dir)
        assert not lab.claim.path.exists()
    # the lab's own close() copes with a server and folder already gone
    assert not lab.cluster.running


def test_another_live_run_is_left_alone(shm_dir):
    reqs = parse_all(["ssd=ssd-sata-mlc"])
    with Lab(reqs, placement.parse([], ["ssd"]), LabOptions(workspace=shm_dir), say=lambda _l: None) as lab:
        assert Workspace.open(shm_dir).reap() == []
        assert lab.cluster.running and lab.claim.path.exists()
    assert list(shm_dir.glob("dbtier-*/lab-*")) == []
