"""Shared fixtures: tmpfs space for emulated devices, and the dbtier command as a user runs it."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.preloaded import Preloaded

SHM = Path("/dev/shm")

# Every JSON document dbtier writes while the suite runs, in this process or in a `dbtier` it starts,
# is checked against the published schema as it is written (report/schema.py).
os.environ["DBTIER_CHECK_SCHEMA"] = "1"


def shm_folder(mode: int = 0o755) -> Path:
    """A fresh folder on tmpfs that the servers' user may pass through (as a user's --workspace or
    device folder would be: dbtier never changes the mode of a folder it is given)."""
    base = SHM if SHM.is_dir() and os.access(SHM, os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="dbtier-test-", dir=base))
    path.chmod(mode)
    return path


@pytest.fixture
def shm_dir():
    """A fresh directory on tmpfs: fast devices are emulated with their data in RAM."""
    path = shm_folder()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def module_shm_dir():
    """Like shm_dir, shared by a module's tests (one workload run, several checks of it)."""
    path = shm_folder()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def disk_dir():
    """A folder on the machine's own disk (not tmpfs) that the servers' user may enter."""
    path = Path(tempfile.mkdtemp(prefix="dbtier-test-disk-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def gib_file():
    """A 1 GiB file on tmpfs, the span of the standard QD1 patterns. Its pages are allocated up front:
    a write into a hole makes tmpfs allocate (and on a VM, the host back) fresh memory, which now and
    then takes longer than a fast device's modelled write, and would count as the host's overrun."""
    path = Path(tempfile.mkdtemp(prefix="dbtier-gib-", dir=SHM if SHM.is_dir() else None))
    f = path / "data"
    with open(f, "wb") as out:
        os.posix_fallocate(out.fileno(), 0, 1 << 30)
    yield f
    shutil.rmtree(path, ignore_errors=True)


#: Modules that judge no timing (no elapsed time, rate or latency of a live run, nothing under
#: retry_while_host_steals) and look at nothing another test changes (their own folders only: no scan of
#: every process, of /tmp or /dev/shm, no machine-wide counter). `make test` runs them first, three at once
#: (pytest -n 3 -m parallel, a module on one worker); every other module after, alone, so that what it
#: times has the machine to itself. A module belongs here only when both hold.
PARALLEL = frozenset(f"tests.{m}" for m in """
    advisor.test_advise_innodb cluster.test_ray
    cli.test_devices_cli cli.test_exec_bypass cli.test_options cli.test_reproduce cli.test_run_cli
    crash.test_crash_findings crash.test_crash_innodb crash.test_ledger crash.test_matrix crash.test_pagestory
    crash.test_safety crash.test_states
    devices.test_bypass_gaps devices.test_dsync_scope devices.test_layout devices.test_profiles
    devices.test_provision devices.test_specs devices.test_spin devices.test_validate
    docs.test_reference
    engines.postgres.test_handle engines.test_osuser engines.postgres.test_placement
    engines.postgres.test_scale_model engines.postgres.test_settings engines.test_production_settings
    engines.test_seam engines.mariadb.test_server engines.mariadb.test_lab engines.mariadb.test_settings
    engines.mariadb.test_runs engines.mariadb.test_production_settings workloads.test_builtins_innodb
    experiments.test_breakdown experiments.test_experiment experiments.test_loaded experiments.test_sweep
    measure.test_iostat measure.test_objects measure.test_observations measure.test_pgpath measure.test_trace
    prediction.test_damaged_recordings prediction.test_error prediction.test_events prediction.test_thread_waits
    production.test_import production.test_stats production.test_tutorial
    report.test_html report.test_output_failure report.test_replayview report.test_schema report.test_terminal
    report.test_verdict report.test_fidelity_notes
    reproduce.test_run
    test_hostile_content test_imports test_isolation test_preloaded test_workspace
    workloads.test_client workloads.test_seed000 workloads.test_seed001 workloads.test_seed003
    workloads.test_seed004 workloads.test_user_sql
""".split())


@pytest.hookimpl(tryfirst=True)  # before -m selects by it
def pytest_collection_modifyitems(items):
    for item in items:
        if item.module is not None and item.module.__name__ in PARALLEL:
            item.add_marker(pytest.mark.parallel)


#: CPU time the hypervisor took during an attempt above which a timing failure may be the host's.
STEAL_LIMIT_S = 0.02
#: CPU time other processes of this machine took, as a share of the attempt's wall time, above which
#: they may have taken the attempt's CPU (two CPUs: an emulated device's sleeper, the server and its
#: client need both at times).
OTHERS_LIMIT = 0.5


def machine_cpu_s() -> tuple[float, float]:
    """(every CPU's busy time since boot, this test's own CPU time: this process's, its waited-for
    descendants', and the preloaded runner's with the commands it ran for the test and reaped: a
    command's server, clients and workers are its waited-for descendants)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:9]]
        user, nice, system, _idle, _iowait, irq, softirq, _steal = fields
        busy = (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        busy = 0.0
    t = os.times()
    return busy, t.user + t.system + t.children_user + t.children_system + _preloaded_cpu_s()


def _preloaded_cpu_s() -> float:
    """The preloaded runner's CPU time and its reaped commands' (0 when there is none). It reaps a
    command's process within half a second of its end: until then that CPU is not yet in its figures,
    so this waits (a second at most) for it to have no command left."""
    runner = _preloaded.proc if _preloaded is not None else None
    if runner is None or runner.poll() is not None:
        return 0.0
    pid = runner.pid
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                if not f.read().split():
                    break
        except OSError:
            break
        time.sleep(0.05)
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(fields[i]) for i in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def retry_while_host_steals(attempt, check, tries: int = 4, host_slow=None):
    """Runs attempt() and check(result). A failed check is retried (up to `tries` in all, a pause
    between) only when the host was measurably the cause during that attempt: the hypervisor stole CPU
    time (a sleeping process whose CPU is stolen wakes late), other processes of this machine used more
    than OTHERS_LIMIT of a CPU (measured, /proc/stat less this test's own processes), or
    host_slow(result) names a measurement of the host's own calls outlasting the model (the emulation
    counts them as overruns). If every attempt ran under such noise, the test is skipped with the
    measurements and the failure: timing fidelity cannot be judged on this host just now. A failure
    without any of them fails. Returns the checked result."""
    from dbtier.measure.cpu import host_steal_s

    for i in range(tries):
        before, (busy0, own0), t0 = host_steal_s(), machine_cpu_s(), time.monotonic()
        result = attempt()
        stolen = host_steal_s() - before
        (busy1, own1), wall = machine_cpu_s(), time.monotonic() - t0
        others = max(0.0, (busy1 - busy0) - (own1 - own0))
        try:
            check(result)
            return result
        except AssertionError as exc:
            slow = host_slow(result) if host_slow else None
            noise = ", ".join(filter(None, [
                f"the hypervisor stole {stolen:.2f} s of CPU" if stolen >= STEAL_LIMIT_S else None,
                f"other processes used {others:.2f} s of CPU in {wall:.2f} s" if others > OTHERS_LIMIT * wall else None,
                slow]))
            if not noise:
                raise AssertionError(f"{exc} (host CPU steal during the attempt: {stolen:.3f} s; other processes' "
                                     f"CPU: {others:.2f} s in {wall:.2f} s)") from exc
            if i == tries - 1:
                pytest.skip(f"{noise}, in each of {tries} attempts; the timing check cannot be judged now "
                            f"(last failure: {str(exc).splitlines()[0][:200]})")
            time.sleep(2)


_preloaded: Preloaded | None = None
_preloaded_lock = threading.Lock()


def _preloaded_dbtier() -> Preloaded | None:
    """The forking parent that has imported dbtier (tests/preloaded.py), started on first use and
    stopped when the session ends; None where it could not start (then every command is a fresh one)."""
    global _preloaded
    with _preloaded_lock:  # the cases of a module run from several threads
        if _preloaded is None:
            _preloaded = Preloaded()
            atexit.register(_preloaded.stop)
            try:
                _preloaded.start()
            except (OSError, RuntimeError):
                pass
    return _preloaded


def compiled(folder: Path, name: str, source: str, *args: str) -> tuple[Path, subprocess.CompletedProcess]:
    """A C program built from source in folder with the compiler's args (skipped where there is no C
    compiler): its path, and how the compiler fared."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    (folder / f"{name}.c").write_text(source)
    proc = subprocess.run([cc, "-O1", "-o", str(folder / name), str(folder / f"{name}.c"), *args],
                          capture_output=True, text=True)
    return folder / name, proc


def dbtier(*args: str, check: bool = False, fresh: bool = False, **kw) -> subprocess.CompletedProcess:
    """Runs `dbtier ARGS` as a process of its own, as a user would: forked from a process that has
    imported dbtier (its output, exit status, environment and folder its own), or, with fresh=True or
    an environment that changes what is loaded, a new interpreter."""
    preloaded = None if fresh or set(kw) - {"env", "cwd", "timeout"} else _preloaded_dbtier()
    if preloaded is not None and preloaded.can_run(kw.get("env")):
        proc = preloaded.run(list(args), env=kw.get("env"), cwd=kw.get("cwd"), timeout=kw.get("timeout"))
    else:
        proc = subprocess.run([sys.executable, "-m", "dbtier", *args], capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"dbtier {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def dbtier_in_terminal(*args: str, columns: int = 80, timeout: float = 900) -> tuple[int, str]:
    """Runs `dbtier ARGS` in a terminal of `columns` columns (a pseudo-terminal, its window size set
    as a terminal emulator sets it), as a user at that terminal sees it. Returns the exit status and
    what the terminal showed, without colours or cursor movements."""
    import fcntl
    import pty
    import re
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "dbtier", *args], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave, close_fds=True)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every writer of the terminal closed it
            break
        if not data:
            break
        chunks.append(data)
        if time.monotonic() > deadline:
            proc.kill()
    os.close(master)
    proc.wait()
    text = b"".join(chunks).decode("utf-8", "replace")
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", text)  # colours, cursor, titles
    lines = [line.rsplit("\r", 1)[-1] for line in text.replace("\r\n", "\n").split("\n")]  # what stayed on screen
    return proc.returncode, "\n".join(lines)


def shown_whole(text: str, value: str) -> bool:
    """Every word of `value` (a figure such as "1.01x (16,932 against 16,836 tpm)") stands whole in
    `text`: a cell may wrap between words, never inside a number."""
    import re

    return all(re.search(r"(?<!\S)" + re.escape(word) + r"(?!\S)", text) for word in value.split())


def stop_session(proc: subprocess.Popen) -> None:
    """Kills a process started with start_new_session=True and everything in its group: a shell's
    child (`sh -c "sleep 600"` forks its sleep) would otherwise outlive the test."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group outlives its leader: killed even if the shell is gone
    except ProcessLookupError:
        pass
    proc.wait()


def assert_refused_in_one_line(proc: subprocess.CompletedProcess, message: str, fresh: dict) -> str:
    """A user's mistake, as every command answers one: exit status 2, one line on stderr,
    `dbtier: error: ...` holding `message`, no traceback, and nothing left in the `fresh` folders
    (name -> folder) the command was given. Returns the line."""
    everything = proc.stdout + proc.stderr
    assert "Traceback" not in everything and "internal error" not in everything, everything
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, f"status {proc.returncode}: {everything}"
    assert len(lines) == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert lines[0].startswith("dbtier: error: ") and len(lines[0]) > len("dbtier: error: ") + 10, lines[0]
    assert message in lines[0], lines[0]
    for name, folder in fresh.items():
        left = sorted(p.name for p in folder.iterdir())
        assert not left, f"{name} folder {folder} holds {left} after: {lines[0]}"
    return lines[0]
