"""CPU time of a PostgreSQL server: the postmaster, every live child (backends, I/O workers,
checkpointer, ...), and the children it has already reaped."""

from __future__ import annotations

import os
import time

import psutil


def server_cpu_s(postmaster_pid: int) -> float:
    try:
        pm = psutil.Process(postmaster_pid)
        t = pm.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        children = pm.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0.0
    for child in children:
        try:
            ct = child.cpu_times()
        except psutil.NoSuchProcess:
            continue  # exited meanwhile: its time is now in the postmaster's children_*
        total += ct.user + ct.system
    return total


def own_cpu_s() -> float:
    """This process's CPU and its reaped children's (pg_dump, pg_restore): the client side."""
    t = psutil.Process().cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def children(postmaster_pid: int) -> set[int]:
    try:
        return {c.pid for c in psutil.Process(postmaster_pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def settle(postmaster_pid: int, baseline: set[int], timeout: float = 5.0) -> None:
    """Waits until the backends started since `baseline` are gone and reaped: a backend's CPU time
    joins the postmaster's children_* only when the postmaster has waited for it."""
    deadline = time.monotonic() + timeout
    while children(postmaster_pid) - baseline and time.monotonic() < deadline:
        time.sleep(0.01)


def host_steal_s() -> float:
    """CPU time the hypervisor took from this VM, all CPUs, since boot: a sleeping process wakes late
    when its CPU is stolen, which shows as emulation lateness."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0
