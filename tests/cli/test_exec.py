"""`dbtier exec`: any program on virtual devices, fio first; figures, JSON, exit status, errors."""

import json
import os
import re
import shutil
import sys

import pytest

from dbtier.devices import patterns, profile
from tests.conftest import dbtier, retry_while_host_steals

needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (make setup installs it as root)")


def fio_randread(directory, seconds):
    return ["fio", "--name=rr", f"--directory={directory}", "--filename=f1", "--ioengine=psync", "--rw=randread",
            "--bs=8k", "--size=256m", f"--runtime={seconds}", "--time_based", "--output-format=json"]


@needs_fio
@pytest.mark.parametrize("name, seconds, rel", [("hdd-sata-7200", 4, 0.12), ("ssd-sata-mlc", 2, 0.06), ("ram-san", 2, 0.06)])
def test_fio_sees_the_model(name, seconds, rel, shm_dir, tmp_path):
    """fio's own median completion latency through the interposer matches the model's QD1 median
    for the same span (fio's file is 256 MiB here, so the model is asked about 256 MiB too). The
    median, because fio's mean carries this shared machine's scheduling tail."""
    out_json = tmp_path / "exec.json"
    pattern = patterns.Pattern("random read 8 KiB over 256 MiB", 1, True, span=256 << 20)
    expect = patterns.expected(profile.load(name), pattern)

    def attempt():
        proc = dbtier("exec", "-d", f"d={name}:{shm_dir}", "--json", str(out_json), "--",
                      *fio_randread(shm_dir, seconds))
        assert proc.returncode == 0, proc.stderr
        return proc

    def check(proc):
        fio_p50_us = json.loads(proc.stdout)["jobs"][0]["read"]["clat_ns"]["percentile"]["50.000000"] / 1e3
        assert fio_p50_us == pytest.approx(expect.p50_us, rel=rel), (fio_p50_us, expect.p50_us)

    proc = retry_while_host_steals(attempt, check)
    fio = json.loads(proc.stdout)["jobs"][0]["read"]
    model_us = expect.mean_us
    doc = json.loads(out_json.read_text())
    assert doc["schema_version"] == 2 and doc["exit_status"] == 0
    dev = doc["devices"][0]
    # fio's layout pass writes the file first, then the timed reads: the interposer saw them all.
    assert dev["counters"]["reads"] >= fio["total_ios"]
    assert dev["iostat"]["r_await"] == pytest.approx(model_us / 1e3, rel=0.12)
    assert 0 < dev["iostat"]["%util"] <= 100
    assert "r_await" in proc.stderr and "late p50/p99" in proc.stderr


def test_exit_status_passes_through(shm_dir):
    proc = dbtier("exec", "-q", "-d", f"d=real:{shm_dir}", "--", "sh", "-c", "exit 7")
    assert proc.returncode == 7


def test_plain_program_and_json(shm_dir, tmp_path):
    """dd on an emulated HDD: sequential reads stream; the JSON counts them exactly."""
    data = shm_dir / "f"
    data.write_bytes(b"\0" * (4 << 20))
    out = tmp_path / "r.json"
    proc = dbtier("exec", "-q", "-d", f"disk=hdd-sata-7200:{shm_dir}", "--json", str(out), "--",
                  "dd", f"if={data}", "of=/dev/null", "bs=8k", "status=none")
    assert proc.returncode == 0, proc.stderr
    dev = json.loads(out.read_text())["devices"][0]
    assert dev["device"] == "disk" and dev["counters"]["reads"] == 512  # the EOF read moves nothing: not an I/O
    assert dev["counters"]["read_bytes"] == 4 << 20
    assert dev["iostat"]["hit_pct"] > 90  # read-ahead buffer


#: a CPU-bound loop with a call now and then: each call charges the CPU time used since the last one.
#: It prints its CPU time, and the CPU time every other process of the machine used meanwhile.
CPU_LOOP = """
import os, time
def busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait
fd = os.open("/dev/null", os.O_WRONLY)
b0, c0 = busy(), time.process_time()
x = 0
for i in range(1500):
    for j in range(3000):
        x += j * j
    os.write(fd, b"x")
print(time.process_time(), busy() - b0 - (time.process_time() - c0))
"""


@pytest.mark.parametrize("k", [2.0, 3.0])
def test_cpu_scale_makes_a_cpu_bound_loop_k_times_longer(k, shm_dir, tmp_path):
    """--cpu-scale K: the program's own CPU time (its CPU time less the dilation's) times K is the
    elapsed time, within 5%; and the dilation is K - 1 times the program's own CPU time. Timing is
    judged only while the machine's other processes left this one a CPU (measured, /proc/stat)."""
    out = tmp_path / "r.json"

    def attempt():
        proc = dbtier("exec", "-q", "-d", f"d=ram-san:{shm_dir}", "--cpu-scale", str(k), "--json", str(out), "--",
                      sys.executable, "-c", CPU_LOOP)  # no launcher script: its CPU would be dilated too
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(out.read_text())
        cpu, others = (float(v) for v in proc.stdout.split())
        return cpu, doc["elapsed_s"], doc["cpu_dilation_s"], others

    def check(result):
        cpu, elapsed, dilation, _others = result
        own = cpu - dilation
        assert own > 0.2, result  # long enough for a clock tick's resolution not to matter
        assert dilation == pytest.approx((k - 1) * own, rel=0.05), result
        assert elapsed == pytest.approx(k * own, rel=0.05), result

    def contended(result):  # two CPUs: others busier than one CPU's tenth can take this one's turn
        cpu, elapsed, _dilation, others = result
        return f"other processes used {others:.2f} s of CPU in {elapsed:.2f} s" if others > 0.1 * elapsed else None
    retry_while_host_steals(attempt, check, host_slow=contended)


@pytest.mark.parametrize(
    "args, message",
    [
        (["exec", "--", "true"], "at least one --device"),
        (["exec", "-d", "/tmp=real", "--cpu-scale", "0.5", "--", "true"], "--cpu-scale 0.5"),
        (["exec", "-d", "/nonexistent-dir=ssd-sata-mlc", "--", "true"], "is not a directory"),
        (["exec", "-d", "/tmp", "--", "true"], "expected NAME=PROFILE"),
        (["exec", "-d", "ssd=ssd-sata-mlc", "--", "true"], "give the folder the program's files are in"),
        (["exec", "-d", "/tmp=no-such-profile", "--", "true"], "unknown device profile"),
        (["exec", "-d", "/tmp=real", "--", "no-such-command-xyz"], "command not found"),
    ],
)
def test_bad_input_is_one_clear_line(args, message):
    proc = dbtier(*args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_the_old_device_form_still_works_with_a_note(shm_dir):
    """exec's [NAME:]DIR=PROFILE is read for one more release; the note says how to write it now."""
    sub = shm_dir / "sub"
    sub.mkdir()
    proc = dbtier("exec", "-d", f"{shm_dir}=ram-san", "-d", f"log:{sub}=ram-san", "--", "true")
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stderr.split())
    assert f"-d {shm_dir.name}=ram-san:{shm_dir}" in said and f"-d log=ram-san:{sub}" in said


def test_nothing_left_behind(shm_dir):
    import glob
    import tempfile

    before = set(glob.glob(f"{tempfile.gettempdir()}/dbtier-exec-*"))
    dbtier("exec", "-q", "-d", f"d=real:{shm_dir}", "--", "true", check=True)
    assert set(glob.glob(f"{tempfile.gettempdir()}/dbtier-exec-*")) == before


def test_fast_device_on_disk_warns(tmp_path):
    import os

    if os.path.realpath(tmp_path).startswith("/dev/shm"):
        pytest.skip("tmp_path is on tmpfs here")
    proc = dbtier("exec", "-d", f"d=nvme-gen4:{tmp_path}", "--", "true")
    assert proc.returncode == 0
    assert re.search(r"warning:.*tmpfs", proc.stderr.replace("\n", " "))


def test_ctrl_c_stops_the_program_and_cleans_up(shm_dir):
    """Ctrl-C from the terminal reaches the whole foreground group: the program stops, dbtier still
    reports, exits 128+SIGINT, and leaves no state behind."""
    import glob
    import signal
    import subprocess
    import sys
    import tempfile
    import time

    before = set(glob.glob(f"{tempfile.gettempdir()}/dbtier-exec-*"))
    proc = subprocess.Popen([sys.executable, "-m", "dbtier", "exec", "-d", f"d=real:{shm_dir}", "--", "sleep", "30"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    import psutil
    deadline = time.monotonic() + 30  # the program has started (a loaded machine starts Python slowly)
    while time.monotonic() < deadline and not any(c.name() == "sleep" for c in psutil.Process(proc.pid).children()):
        time.sleep(0.05)
    time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal does
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert "devices over" in err
    assert set(glob.glob(f"{tempfile.gettempdir()}/dbtier-exec-*")) == before


#: 1,000 fwrite calls of 100 bytes through libc's stdio, an fflush half-way, then fclose.
STDIO_WRITER = """
import ctypes, sys
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.fwrite.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
libc.fflush.argtypes = libc.fclose.argtypes = [ctypes.c_void_p]
fp = libc.fopen(sys.argv[1].encode(), b"w")
for i in range(1000):
    assert libc.fwrite(b"x" * 100, 1, 100, fp) == 100
    if i == 499:
        assert libc.fflush(fp) == 0
assert libc.fclose(fp) == 0
"""


def test_stdio_is_charged_per_libc_buffer_not_per_call(shm_dir, tmp_path):
    """libc hands the file its 4 KiB buffer when it fills, at fflush and at fclose: 50,000 bytes are
    12 full buffers and 848 bytes at the fflush, twice, so 26 writes of 100,000 bytes, not 1,000."""
    out = tmp_path / "r.json"
    target = shm_dir / "stdio.out"
    proc = dbtier("exec", "-q", "-d", f"d=ssd-sata-mlc:{shm_dir}", "--json", str(out), "--",
                  sys.executable, "-c", STDIO_WRITER, str(target))
    assert proc.returncode == 0, proc.stderr
    assert os.stat(target).st_blksize == 4096  # libc's buffer is the file's block size
    counters = json.loads(out.read_text())["devices"][0]["counters"]
    assert counters["write_bytes"] == 100_000 and target.stat().st_size == 100_000
    assert counters["writes"] == 26, counters
