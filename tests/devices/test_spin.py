"""The CPU a wait spends spinning (the end of each emulated wait, where a sleep would wake too late)
is counted from the thread's CPU clock: it is taken out of the server's CPU, so it must never exceed
the CPU the processes used. Counted as wall time, spinners preempted on a busy machine once made a
60 s OLTP run's server CPU come out as 0."""

from __future__ import annotations

import resource
import subprocess
import sys

from dbtier.devices.profile import load
from dbtier.devices.session import Device, Session

#: 8 KiB reads of one file, as fast as the device answers (no emulated page cache: each one goes to it)
READER = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
for i in range(int(sys.argv[2])):
    os.pread(fd, 8192, (i * 7919 % 4096) * 8192)
"""


def test_spin_is_the_spinners_cpu_time(shm_dir, tmp_path):
    data = shm_dir
    with open(data / "f", "wb") as f:
        f.write(b"\0" * (32 << 20))
    session = Session([Device("d", data, load("pcie-flash-mlc"))], tmp_path / "s")
    session.create()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # four readers on this 2-CPU machine: each spin is preempted now and then
    procs = [subprocess.Popen([sys.executable, "-c", READER, str(data / "f"), "3000"], env=session.env())
             for _ in range(4)]
    assert all(p.wait() == 0 for p in procs)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    counters = session.snapshot()["devices"][0]
    assert counters["reads"] == 4 * 3000
    assert 0 < counters["spin_ns"] / 1e9 <= cpu_s, (counters["spin_ns"] / 1e9, cpu_s)
