"""From trace records to the replay's event streams: one stream per process (thread), each call with
its recorded host time and lateness, each sleep tied to the wake from another process that ended it.

A sleep is tied to the first wake aimed at it (kill to its pid, for a latch; sem_post on its
semaphore, for an LWLock) that came after it began and before it ended, and no more than
WAKE_WINDOW_NS before it ended; a sleep with no such wake (a timeout, a client's next query) keeps its
recorded length in the replay."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dbtier.devices.native import REPLAY_EVENT
from dbtier.measure import trace

WAKE, SLEEP = 1, 2  # enum dbt_sync_op
KILL, SEM = 0x01, 0x02  # sync record flags
WAKE_WINDOW_NS = 5_000_000
PAGE = 4096


@dataclass
class Streams:
    events: np.ndarray        # REPLAY_EVENT, grouped by stream, each in order
    pids: np.ndarray          # per stream: its process id
    record_index: np.ndarray  # per event: the index of its record in the interval's records


def interval_records(records: np.ndarray, t0_ns: int, t1_ns: int) -> np.ndarray:
    """The calls and syncs the program made in [t0, t1] (device requests are what the replay recomputes)."""
    keep = (records["submit_ns"] >= t0_ns) & (records["submit_ns"] <= t1_ns) & (records["kind"] != trace.REQUEST)
    return records[keep]


def build(recs: np.ndarray, file_device: dict[int, int]) -> Streams:
    """recs: one interval's calls and syncs (interval_records), sorted by submit time."""
    key = recs["pid"].astype(np.uint64) << np.uint64(32) | recs["tid"].astype(np.uint64)
    order = np.lexsort((recs["submit_ns"], key))  # by stream, each in time order
    recs, key = recs[order], key[order]
    _, stream = np.unique(key, return_inverse=True)
    ev = np.zeros(len(recs), dtype=REPLAY_EVENT)
    is_call = recs["kind"] == trace.CALL
    ev["t0"] = recs["submit_ns"]
    ev["t1"] = np.maximum(recs["end_ns"], recs["submit_ns"])
    host_end = np.maximum(recs["start_ns"], recs["submit_ns"])
    ev["host_ns"] = np.where(is_call, host_end - recs["submit_ns"], 0)
    waited_until = np.maximum(recs["complete_ns"], host_end)
    ev["late_ns"] = np.where(is_call & (recs["end_ns"] > waited_until), recs["end_ns"] - waited_until, 0)
    ev["off"], ev["len"], ev["file"] = recs["offset"], recs["len"], recs["file"]
    size_known = is_call & (recs["op"] == 1) & (recs["aux"] != trace.SIZE_UNKNOWN)
    ev["file_size"] = np.where(size_known, recs["aux"].astype(np.uint64) * PAGE, np.uint64(2**64 - 1))
    ev["aux"] = np.where(is_call & (recs["op"] != 1), recs["aux"], 0)
    ev["stream"] = stream
    ev["kind"], ev["op"] = recs["kind"], recs["op"]
    ev["flags"] = np.where(is_call, recs["flags"] & (trace.FLAGS["direct"] | trace.FLAGS["dsync"]), recs["flags"])
    devs = np.array([file_device.get(int(f), int(d)) for f, d in zip(recs["file"], recs["dev"])], dtype=np.uint8) \
        if len(recs) else np.zeros(0, dtype=np.uint8)
    ev["dev"] = np.where(is_call, devs, 0)
    ev["dep"] = _dependencies(recs, stream)
    pids = np.zeros(stream.max() + 1 if len(stream) else 0, dtype=np.int64)
    pids[stream] = recs["pid"]
    return Streams(ev, pids, order)


def _dependencies(recs: np.ndarray, stream: np.ndarray) -> np.ndarray:
    dep = np.full(len(recs), -1, dtype=np.int64)
    is_sync = recs["kind"] == trace.SYNC
    wakes = np.flatnonzero(is_sync & (recs["op"] == WAKE))
    sleeps = np.flatnonzero(is_sync & (recs["op"] == SLEEP))
    if not len(wakes) or not len(sleeps):
        return dep
    # what a wake aims at, and what a sleep waits for: (kind, pid or semaphore address)
    wake_sem = (recs["flags"][wakes] & SEM) != 0
    sleep_sem = (recs["flags"][sleeps] & SEM) != 0
    wake_target = np.where(wake_sem, recs["offset"][wakes], recs["offset"][wakes])
    sleep_target = np.where(sleep_sem, recs["offset"][sleeps], recs["pid"][sleeps].astype(np.uint64))
    for sem in (False, True):
        w = wakes[wake_sem == sem]
        s = sleeps[sleep_sem == sem]
        wt, st = wake_target[wake_sem == sem], sleep_target[sleep_sem == sem]
        for target in np.intersect1d(wt, st):
            ws = w[wt == target]
            ws = ws[np.argsort(recs["submit_ns"][ws], kind="stable")]
            times = recs["submit_ns"][ws]
            for i in s[st == target]:
                j = np.searchsorted(times, recs["submit_ns"][i])
                if j < len(ws) and times[j] <= recs["end_ns"][i] and recs["end_ns"][i] - times[j] <= WAKE_WINDOW_NS \
                        and stream[ws[j]] != stream[i]:
                    dep[i] = ws[j]
    return dep
