"""Interrupted commands leave nothing behind: a `run`, an `exec` or an `iobench` killed outright
(SIGKILL, nothing of dbtier runs after it) is cleaned up by the next command; two SIGTERMs in quick
succession cannot cut a command's own cleanup short."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dbtier.devices import native
from tests.conftest import dbtier
from tests.engines.postgres.test_lifecycle import ipc_leftovers, ipc_left_since, postgres_pids, wait_for


def dbtier_litter() -> set[str]:
    """What dbtier may have left in the shared temporary folders."""
    return {str(p) for base in (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm")) for p in base.glob("dbtier-*")
            if not p.name.startswith("dbtier-test")}


def leftovers(workspace: Path, output: Path | None = None) -> list[str]:
    """Everything of dbtier's under the workspace (beyond the root and its binary copies) and the output
    folder, and its live processes."""
    found = [str(p) for p in workspace.glob("dbtier-*/*") if p.name != "runtime"]
    if output is not None:
        found += [str(p) for p in output.iterdir()] if output.exists() else []
    found += [f"process {pid}" for pid in postgres_pids(workspace)]
    return found


def describe_process(pid: int) -> str:
    """pid, parent, state, where it sleeps, its blocked/ignored signals and command line, for a failure."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ":\t" in line)
        wchan = Path(f"/proc/{pid}/wchan").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
        return (f"pid {pid} ppid {stat[1]} state {stat[0]} wchan {wchan} SigBlk {status.get('SigBlk', '?').strip()} "
                f"SigIgn {status.get('SigIgn', '?').strip()} SigPnd {status.get('ShdPnd', '?').strip()}: {cmd}")
    except (OSError, IndexError, ValueError) as exc:
        return f"pid {pid}: {exc}"


def processes_naming(text: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z":
                        pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def emulating(workspace: Path, kind: str) -> bool:
    """True once a command's emulation under workspace has been resumed (the measured phase began)."""
    where = "session-*" if kind == "iobench" else "iotap"  # not a recursive walk: folders go as it runs
    for state in workspace.glob(f"dbtier-*/{kind}-*/{where}/iotap.state"):
        try:
            if native.dump_state(state)["paused"] == 0 and native.dump_state(state)["attached"] > 0:
                return True
        except Exception:
            pass
    return False


def start(args: list[str], env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dbtier", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def kill_once(proc: subprocess.Popen, ready, timeout: float, what: str) -> None:
    """SIGKILL, nothing of dbtier runs after it, once ready() holds."""
    try:
        wait_for(ready, timeout, what)
        proc.kill()
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("parent_death_signal", [True, False], ids=["setpriv", "no-setpriv"])
def test_a_killed_run_is_cleaned_up_by_the_next(shm_dir, tmp_path, parent_death_signal):
    """Killed while measuring: the server stops by itself (parent-death signal) or is stopped by the next
    command, which also removes the run's folders, its partial results and the server's shared memory."""
    ipc_before, litter_before = ipc_leftovers(), dbtier_litter()
    out = tmp_path / "out"
    env = dict(os.environ)
    if not parent_death_signal:  # where util-linux's setpriv is missing, the server outlives the kill
        env["PATH"] = str(tmp_path)
    proc = start(["run", "random-index", "-d", "hdd=hdd-sata-7200", "--rows", "3000", "--workspace", str(shm_dir),
                  "-o", str(out), "-q"], env)
    kill_once(proc, lambda: emulating(shm_dir, "lab"), 90, "the measured phase")
    assert leftovers(shm_dir, out), "the kill left nothing: the test did not test"
    dbtier("exec", "--workspace", str(shm_dir), "-q", "-d", f"d=ram-san:{tmp_path}", "--", "true", check=True)
    wait_for(lambda: not postgres_pids(shm_dir), 30, "the server to stop")
    assert leftovers(shm_dir, out) == []
    assert ipc_left_since(ipc_before) == set()
    assert dbtier_litter() <= litter_before


def test_a_killed_exec_is_cleaned_up_by_the_next(shm_dir, tmp_path):
    litter_before = dbtier_litter()
    dev = tmp_path / "dev"
    dev.mkdir()
    marker = f"dbtier-test-exec-{os.getpid()}"
    proc = start(["exec", "--workspace", str(shm_dir), "-q", "-d", f"d=hdd-sata-7200:{dev}", "--", "sh", "-c",
                  f"while true; do dd if=/dev/zero of={dev}/f bs=8k count=8 oflag=direct 2>/dev/null; done; "
                  f": {marker}"])
    kill_once(proc, lambda: emulating(shm_dir, "exec"), 30, "the program's I/O")
    try:
        wait_for(lambda: not processes_naming(marker), 10, "the program to end with dbtier (parent-death signal)")
    except AssertionError as exc:  # say which process stayed, and where it waited
        raise AssertionError(f"{exc}: {[describe_process(pid) for pid in processes_naming(marker)]}") from None
    assert leftovers(shm_dir)
    dbtier("exec", "--workspace", str(shm_dir), "-q", "-d", f"d=ram-san:{dev}", "--", "true", check=True)
    assert leftovers(shm_dir) == []
    assert dbtier_litter() <= litter_before


@pytest.mark.parametrize("where", ["scratch", "own-folder"])
def test_a_killed_iobench_is_cleaned_up_by_the_next(shm_dir, tmp_path, where):
    litter_before = dbtier_litter()
    folder = tmp_path / "bench"
    folder.mkdir()
    device = "b=hdd-sata-7200" + (f":{folder}" if where == "own-folder" else "")
    proc = start(["iobench", "--workspace", str(shm_dir), "-d", device, "--rw", "randread", "--bs", "8k",
                  "--size", "4m", "--runtime", "30", "-q"])
    kill_once(proc, lambda: emulating(shm_dir, "iobench"), 60, "the benchmark's I/O")
    wait_for(lambda: not processes_naming("dbtier.devices.bench.worker"), 10, "the workers to end with dbtier")
    assert leftovers(shm_dir) or list(folder.iterdir())
    dbtier("exec", "--workspace", str(shm_dir), "-q", "-d", f"d=ram-san:{tmp_path}", "--", "true", check=True)
    assert leftovers(shm_dir) == []
    assert list(folder.iterdir()) == []
    assert dbtier_litter() <= litter_before


@pytest.mark.parametrize("gap_s", [0.05, 0.15, 0.3])
def test_two_quick_sigterms_leave_nothing(shm_dir, tmp_path, gap_s):
    """The second signal lands in the middle of the cleanup the first one started: the cleanup finishes."""
    ipc_before = ipc_leftovers()
    out = tmp_path / "out"
    proc = start(["run", "random-index", "-d", "hdd=hdd-sata-7200", "--rows", "3000", "--workspace", str(shm_dir),
                  "-o", str(out), "-q"])
    try:
        wait_for(lambda: emulating(shm_dir, "lab"), 90, "the measured phase")
        proc.send_signal(signal.SIGTERM)
        time.sleep(gap_s)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert leftovers(shm_dir, out) == []  # without any reaping: the command cleaned up after itself
    assert ipc_left_since(ipc_before) == set()
