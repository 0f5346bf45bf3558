"""What a machine is, as a run on it needs to be judged: CPU model and count, memory, kernel, the
versions of dbtier and PostgreSQL, and the host's measured wake-up delay (how late a 1 ms sleep
ends: what an emulated device's waits are made of)."""

from __future__ import annotations

import os
import platform
import socket
import statistics
import time
from pathlib import Path

#: the facts that must equal the driver's for a node to take runs: a run judged by another dbtier or
#: PostgreSQL is not the same experiment
MUST_MATCH = ("dbtier", "postgres")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return 0.0


def _postgres_version() -> str:
    from dbtier.engines.postgres import binaries
    from dbtier.errors import UserError

    try:
        return binaries.find().version
    except UserError:
        return "missing"


def wakeup_delay_us(samples: int = 200) -> dict:
    """How late a 1 ms sleep wakes, median and 99th percentile, in microseconds."""
    late = []
    for _ in range(samples):
        t = time.perf_counter_ns()
        time.sleep(0.001)
        late.append((time.perf_counter_ns() - t) / 1e3 - 1000)
    late.sort()
    return {"p50": round(statistics.median(late), 1), "p99": round(late[int(0.99 * (len(late) - 1))], 1)}


def collect(wakeup: bool = True) -> dict:
    from dbtier.version import __version__

    return {"host": socket.gethostname(), "cpu_model": _cpu_model(), "cpus": os.cpu_count(),
            "memory_gib": _memory_gib(), "kernel": platform.release(), "python": platform.python_version(),
            "dbtier": __version__, "postgres": _postgres_version(),
            **({"wakeup_delay_us": wakeup_delay_us()} if wakeup else {})}


def mismatch(driver: dict, node: dict) -> str | None:
    """Why a node may not take the driver's runs, or None."""
    for key in MUST_MATCH:
        if node.get(key) != driver.get(key):
            name = "dbtier" if key == "dbtier" else "PostgreSQL"
            return f"{name} {node.get(key)} (the driver has {driver.get(key)})"
    return None
