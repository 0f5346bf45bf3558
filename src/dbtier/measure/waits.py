"""Top timed events, as STATSPACK's table and ASE's monProcessWaits gave them: PostgreSQL's wait
events sampled from pg_stat_activity while the workload runs (as Oracle's ASH samples sessions).

Each round looks at every server process once. A process with no wait event while active is on
CPU (or runnable); idle sessions and idle background processes (wait class Activity, ClientRead
while idle) are not database time, as STATSPACK leaves out idle events. An event's time is its
samples times the round interval; its waits are the episodes seen (consecutive samples of one
process in one event count once). Episodes undercount short waits (a process reading block after
block stays in DataFileRead across samples), so the I/O events take their counts from pg_stat_io,
which counts every call.

The sampler's own backend costs server CPU and its thread client CPU: both are measured and
handed back so the caller can take them out."""

from __future__ import annotations

import signal
import threading
import time
from collections import defaultdict

import psutil

QUERY = ("SELECT pid, backend_type, wait_event_type, wait_event, state FROM pg_stat_activity "
         "WHERE pid <> pg_backend_pid()")
DEFAULT_INTERVAL_S = 0.02
CPU = "CPU"


def block_signals() -> None:
    """For a helper thread: Ctrl-C and SIGTERM go to the main thread, which unwinds the run, rather
    than to whichever thread the kernel picks, where the interruption could sit unnoticed."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


def classify(backend_type: str, wait_type: str | None, wait_event: str | None, state: str | None) -> str | None:
    """The event a sample counts under, or None for an idle process."""
    if backend_type == "client backend" and state != "active":
        return None
    if wait_type == "Activity" or (wait_type == "Client" and state != "active"):
        return None
    if wait_event is None:
        return CPU
    return f"{wait_type}:{wait_event}"


class WaitSampler:
    def __init__(self, connect, interval_s: float = DEFAULT_INTERVAL_S):
        self.connect = connect
        self.interval_s = interval_s
        self.samples: dict[str, int] = defaultdict(int)
        self.waits: dict[str, int] = defaultdict(int)
        self.who: dict[str, set[str]] = defaultdict(set)
        self.rounds = 0
        self.processes: dict[int, str] = {}  # every server process seen: pid -> backend_type
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_cpu_s = 0.0

    def start(self) -> None:
        self.conn = self.connect()
        self.backend_pid = self.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        self.conn.execute(QUERY).fetchall()  # its catalog reads now, before the measured interval
        self._backend_cpu0 = self._backend_cpu()
        self._thread = threading.Thread(target=self._loop, name="dbtier-wait-sampler", daemon=True)
        self._t0 = time.monotonic()
        self._thread.start()

    def _backend_cpu(self) -> float:
        try:
            t = psutil.Process(self.backend_pid).cpu_times()
            return t.user + t.system
        except psutil.Error:
            return 0.0

    def _loop(self) -> None:
        last: dict[int, str] = {}
        block_signals()
        try:
            while not self._stop.wait(self.interval_s):
                now: dict[int, str] = {}
                for pid, btype, wtype, wevent, state in self.conn.execute(QUERY).fetchall():
                    self.processes[pid] = btype
                    event = classify(btype, wtype, wevent, state)
                    if event is None:
                        continue
                    now[pid] = event
                    self.samples[event] += 1
                    self.who[event].add(btype)
                    if last.get(pid) != event:
                        self.waits[event] += 1
                last = now
                self.rounds += 1
        except Exception as exc:  # the server going away ends sampling, not the measurement
            self.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        finally:
            self._thread_cpu_s = time.thread_time()

    def stop(self) -> dict:
        """Ends sampling; returns the events, the sampler's costs, and the rounds taken."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        span = time.monotonic() - self._t0
        backend_cpu = self._backend_cpu() - self._backend_cpu0
        self.conn.close()
        tick = span / self.rounds if self.rounds else self.interval_s
        events = [{"event": name, "waits": self.waits[name] if name != CPU else None,
                   "time_s": n * tick, "samples": n, "processes": sorted(self.who[name])}
                  for name, n in self.samples.items()]
        events.sort(key=lambda e: -e["samples"])
        return {"interval_s": tick, "rounds": self.rounds, "events": events, "error": self.error,
                "processes": dict(self.processes),
                "sampler_server_cpu_s": backend_cpu, "sampler_client_cpu_s": self._thread_cpu_s}


#: I/O wait events and the pg_stat_io counts of the calls they wait on: (objects, count column)
IO_COUNTS = {
    "IO:DataFileRead": (("relation", "temp relation"), "reads"),
    "IO:DataFileWrite": (("relation", "temp relation"), "writes"),
    "IO:DataFileExtend": (("relation", "temp relation"), "extends"),
    "IO:DataFileSync": (("relation",), "fsyncs"),
    "IO:WalRead": (("wal",), "reads"),
    "IO:WalWrite": (("wal",), "writes"),
    "IO:WalSync": (("wal",), "fsyncs"),
}


def io_waits(event: str, stat_io: list[dict]) -> int | None:
    if event not in IO_COUNTS:
        return None
    objects, column = IO_COUNTS[event]
    return int(sum(r[column] or 0 for r in stat_io if r["object"] in objects))


def top_events(waits: dict, server_cpu_s: float, elapsed_s: float, stat_io: list[dict] | None = None,
               limit: int = 8) -> list[dict]:
    """STATSPACK's "Top timed events": measured server CPU time, then the sampled waits (sampled
    CPU is the same time seen another way, so it is left out), with % of elapsed. An I/O event's
    waits are pg_stat_io's count of its calls; other events' are the episodes sampled."""
    rows = [{"event": "CPU time (measured)", "waits": None, "time_s": server_cpu_s}]
    for e in waits.get("events", []):
        if e["event"] == CPU:
            continue
        counted = io_waits(e["event"], stat_io or [])
        rows.append({**e, "waits": counted if counted is not None else e["waits"]})
    rows = sorted(rows, key=lambda e: -e["time_s"])[:limit]
    for r in rows:
        r["elapsed_pct"] = 100.0 * r["time_s"] / elapsed_s if elapsed_s > 0 else 0.0
    return rows
