"""Processes dbtier starts and signals it takes: children that die with it, cleanup that a second
signal cannot cut short, and stopping a recorded process (never one found by a name or a pattern)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time
from pathlib import Path

#: The signals that end dbtier in order (the CLI turns them into KeyboardInterrupt).
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def shielded():
    """Cleanup that must finish: Ctrl-C, SIGTERM and SIGHUP are ignored until it has. The first signal
    already started the unwinding that runs it; a second one would leave half-removed folders."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in ENDING_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def terminate(proc, timeout: float = 30.0, whole_session: bool = False) -> None:
    """SIGTERM to a child we started in a session of its own (or to its whole session), then SIGKILL to
    the session if it lingers; waits for it."""
    import subprocess
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            if sig == signal.SIGTERM and not whole_session:
                proc.send_signal(sig)
            else:
                os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def dies_with_us(cmd: list[str], sig: str = "TERM") -> list[str]:
    """cmd, started through util-linux's setpriv so that it gets `sig` if dbtier dies, even by SIGKILL."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", sig, "--", *cmd] if setpriv else cmd


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name: state, ppid, pgrp, session, ..., starttime at [19]."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot: with the pid, it names one process."""
    fields = _stat_fields(pid)
    return fields[19] if fields and len(fields) > 19 else None


def is_gone(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is None or fields[0] in ("Z", "X")


def alive(pid: int | None, start: str | None) -> bool:
    """Whether the process recorded as (pid, start) still runs (a reused pid has another start time)."""
    return bool(pid) and start is not None and start_time(int(pid)) == start and not is_gone(int(pid))


def _uid_of(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def session_members(leader: int, since: str, uid: int) -> list[int]:
    """Live processes of the session `leader` started (dbtier starts its servers in sessions of their
    own), started no earlier than it and owned by uid: what is left of it if the leader died."""
    if start_time(leader) not in (None, since):
        return []  # the pid names another process now, and the session it leads is that one's
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        fields = _stat_fields(int(entry.name))
        if (fields and len(fields) > 19 and fields[3] == str(leader) and fields[0] not in ("Z", "X")
                and int(fields[19]) >= int(since) and _uid_of(int(entry.name)) == uid):
            out.append(int(entry.name))
    return out


def stop_recorded(pid: int, start: str, uid: int, first: int = signal.SIGTERM, timeout: float = 15.0) -> bool:
    """Stops a process dbtier started and recorded as (pid, start), and what is left of its session:
    `first` to the leader if it is still that process (SIGQUIT asks a postmaster for an immediate
    shutdown, SIGTERM makes initdb clean up), then SIGKILL to every member. True if all are gone."""
    if alive(pid, start):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, first)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not is_gone(pid):
            time.sleep(0.05)
    members = session_members(pid, start, uid)
    for member in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(member, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(not is_gone(m) for m in members):
        time.sleep(0.05)
    return not alive(pid, start) and all(is_gone(m) for m in members)
