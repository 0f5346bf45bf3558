"""From trace records to the replay's event streams: one stream per process (thread), each call with
its recorded host time and lateness, each sleep tied to the wake from another process that ended it.

A sleep is tied to the first wake aimed at it (kill to its pid, for a latch; sem_post on its
semaphore, for an LWLock) that came after it began and before it ended, and no more than
WAKE_WINDOW_NS before it ended; a sleep with no such wake (a timeout, a client's next query) keeps its
recorded length in the replay. A reap of asynchronous requests (io_getevents) is tied to the request
whose completion it waited for: the one its record names by process and completion time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dbtier.devices import native
from dbtier.errors import UserError
from dbtier.measure import trace

WAKE, SLEEP, SEM = trace.WAKE, trace.SLEEP, trace.SYNC_SEM
#: the bit C reserves in a record's flags for this mark (trace.h): a wake and sleep never recorded,
#: added because the client's next connection came after the last one finished (see _client_order)
CLIENT = native.layout().reserved("trace")["client"]
WAKE_WINDOW_NS = 5_000_000


@dataclass
class Streams:
    events: np.ndarray        # REPLAY_EVENT, grouped by stream, each in order
    pids: np.ndarray          # per stream: its process id
    records: np.ndarray       # per event: its record (trace.RECORD), in the events' order


def interval_records(records: np.ndarray, t0_ns: int, t1_ns: int) -> np.ndarray:
    """The calls and syncs the program made in [t0, t1] (device requests are what the replay
    recomputes), and the sleeps that began before t0 and ended in it, cut at t0: an idle process woken
    in the interval (an I/O worker given its first read) waits for whoever woke it, not for the clock."""
    inside = (records["submit_ns"] >= t0_ns) & (records["submit_ns"] <= t1_ns) & (records["kind"] != trace.REQUEST)
    straddle = ((records["kind"] == trace.SYNC) & (records["op"] == SLEEP) & (records["submit_ns"] < t0_ns)
                & (records["end_ns"] >= t0_ns) & (records["end_ns"] <= t1_ns))
    out = np.compress(inside | straddle, records)  # (compress and take copy records whole, unlike [mask])
    cut = out["submit_ns"] < t0_ns
    out["submit_ns"][cut] = t0_ns
    out["start_ns"][cut] = t0_ns
    submit = out["submit_ns"]
    if len(out) > 1 and not (submit[1:] >= submit[:-1]).all():
        out = np.take(out, np.argsort(submit, kind="stable"))
    return out


def build(recs: np.ndarray, file_device: dict[int, int], foreground: set[int] | None = None,
          same_devices: set[int] | None = None) -> Streams:
    """recs: one interval's calls and syncs (interval_records), sorted by submit time. foreground: the
    pids that served the workload's client (its backends), whose connections the client made one after
    another when none overlapped. same_devices: the recorded devices the prediction keeps as they were
    (a call that stays on one of them keeps its recorded lateness)."""
    return place(prepare(recs, foreground), file_device, same_devices)


def prepare(recs: np.ndarray, foreground: set[int] | None = None) -> Streams:
    """The streams of one interval, each call on the device it was recorded on (place, or the replay
    itself, puts it where a placement says): what does not depend on the placement, computed once
    however many placements are replayed. The events are the records as native/iotap/replay.h says a
    replay takes them."""
    submitted = np.count_nonzero(_async_calls(recs))
    reaped = np.count_nonzero(_reaps(recs))
    if submitted and not reaped:  # the replay could not tell when the program took each back: no answer
        raise UserError(f"the recording holds {submitted:,} asynchronous requests (libaio) but no record of their "
                        "reaps (it was made by an older dbtier); record it again")
    added = _client_order(recs, foreground) if foreground else recs[:0]
    column = {k: np.concatenate([recs[k], added[k]]) for k in ("pid", "tid", "submit_ns")}
    key = column["pid"].astype(np.uint64) << np.uint64(32) | column["tid"].astype(np.uint64)
    order = np.lexsort((column["submit_ns"], key))  # by stream, each in time order
    recs, key = _taken(recs, added, order), key[order]
    stream = np.r_[0, np.cumsum(key[1:] != key[:-1])] if len(key) else np.zeros(0, dtype=np.int64)
    dep = _dependencies(recs, stream)
    ev = native.replay_events(recs, stream, dep, _guards(recs, stream, dep))
    pids = np.zeros(stream.max() + 1 if len(stream) else 0, dtype=np.int64)
    pids[stream] = recs["pid"]
    return Streams(ev, pids, recs)


def _taken(recs: np.ndarray, added: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The records of recs followed by those added, in the given order (indexes into the two, one after
    the other), without joining the two first."""
    n = len(recs)
    if not len(added) or not n:
        return np.take(recs if n else added, order)
    out = np.take(recs, np.minimum(order, n - 1))
    mine = np.flatnonzero(order >= n)
    out[mine] = added[order[mine] - n]
    return out


def place(streams: Streams, file_device: dict[int, int], same_devices: set[int] | None = None) -> Streams:
    """The prepared streams with each call on its file's device in the placement (file index ->
    device index), and the recorded lateness kept where it still belongs: what a replay given
    same_devices does itself (native.Replay.run), for a caller that wants the events placed."""
    ev = streams.events.copy()
    is_call = ev["kind"] == trace.CALL
    lut = np.full(max(file_device, default=0) + 2, -1, dtype=np.int64)  # file index -> placed device
    lut[np.fromiter(file_device.keys(), dtype=np.int64)] = np.fromiter(file_device.values(), dtype=np.int64)
    placed = lut[np.clip(ev["file"], -1, len(lut) - 2)]  # -1 (no file) reads the spare last slot: -1
    recorded = streams.events["dev"]
    ev["dev"] = np.where(is_call & (placed >= 0), placed, recorded)
    # The live emulation's lateness (its wake-up delay past the modelled completion) belongs to the
    # emulation of that device on this host, not to the device: a call that stays on an unchanged
    # device keeps it (as a live run of the same layout would have it); a call moved elsewhere does not.
    stays = is_call & (ev["dev"] == recorded) & np.isin(recorded, list(same_devices or ()))
    ev["late_ns"] = np.where(stays, ev["late_ns"], 0)
    return Streams(ev, streams.pids, streams.records)


def _client_order(recs: np.ndarray, foreground: set[int]) -> np.ndarray:
    """The client is not traced, but when its backends come one after another (no other of them busy
    when the next one starts), the next one started because the client had its last answer: tied here
    as a wake at the end of the last one and a sleep at the start of the next, so that a faster
    replay brings the next connection forward with it."""
    out = []
    pid = recs["pid"]
    fg = [p for p in np.unique(pid) if int(p) in foreground]
    # each client backend's first call, its last end, and its first thread: one pass over its records
    mine = np.flatnonzero(np.isin(pid, fg))
    mine = mine[np.argsort(pid[mine], kind="stable")]  # by pid, each in the records' order
    cut = np.r_[0, np.flatnonzero(np.diff(pid[mine])) + 1] if len(mine) else np.zeros(0, dtype=np.int64)
    submit = recs["submit_ns"][mine]
    first = np.minimum.reduceat(submit, cut) if len(mine) else []
    last = np.maximum.reduceat(np.maximum(recs["end_ns"][mine], submit), cut) if len(mine) else []
    span = {int(p): (int(f), int(l), int(t)) for p, f, l, t in zip(pid[mine[cut]], first, last, recs["tid"][mine[cut]])}
    for p, (first, _last, tid) in span.items():
        busy = [q for q, (f, l, _t) in span.items() if q != p and f < first < l]
        before = [(l, q) for q, (f, l, _t) in span.items() if q != p and l <= first]
        if busy or not before:
            continue
        ended, q = max(before)
        wake = np.zeros(2, dtype=trace.RECORD)
        wake["kind"], wake["file"] = trace.SYNC, -1
        wake[0]["pid"], wake[0]["tid"], wake[0]["op"], wake[0]["offset"] = q, span[q][2], WAKE, p
        wake[1]["pid"], wake[1]["tid"], wake[1]["op"] = p, tid, SLEEP
        wake["flags"] = CLIENT
        wake["submit_ns"] = wake["start_ns"] = ended
        wake[0]["end_ns"] = wake[0]["complete_ns"] = ended
        wake[1]["end_ns"] = wake[1]["complete_ns"] = first
        out.append(wake)
    return np.concatenate(out) if out else np.zeros(0, dtype=trace.RECORD)


def _guards(recs: np.ndarray, stream: np.ndarray, dep: np.ndarray) -> np.ndarray:
    """For each lock wait (a semaphore: an LWLock) tied to a wake: the waker's own last sleep before
    that wake (it has been awake, holding the lock, since that sleep ended), or -1. A latch wait (for
    work to do, an I/O's completion, a commit) always waits for its wake."""
    guard = np.full(len(recs), -1, dtype=np.int64)
    sleeping = (recs["kind"] == trace.SYNC) & (recs["op"] == SLEEP)
    # per event: the index of its stream's latest sleep at or before it (events are grouped by stream)
    idx = np.where(sleeping, np.arange(len(recs)), -1)
    starts = np.r_[0, np.flatnonzero(np.diff(stream)) + 1]
    latest = np.maximum.accumulate(idx) if len(idx) else idx  # an earlier stream's sleep is not its own
    latest = np.where(latest >= np.repeat(starts, np.diff(np.r_[starts, len(recs)])), latest, -1)
    tied = np.flatnonzero((dep >= 0) & ((recs["flags"] & SEM) != 0) & ((recs["flags"] & CLIENT) == 0))
    guard[tied] = latest[dep[tied]]
    return guard


def _async_calls(recs: np.ndarray) -> np.ndarray:
    return (recs["kind"] == trace.CALL) & ((recs["flags"] & trace.FLAGS["async"]) != 0)


def _reaps(recs: np.ndarray) -> np.ndarray:
    return (recs["kind"] == trace.SYNC) & (recs["op"] == SLEEP) & ((recs["flags"] & trace.SYNC_AIO) != 0)


def _reaped(recs: np.ndarray, dep: np.ndarray) -> None:
    """Each reap that returned emulated requests depends on the one it waited for: the asynchronous
    call of its process whose completion its record gives (trace.h), submitted before the reap ended."""
    reaps = np.flatnonzero(_reaps(recs) & (recs["len"] > 0))
    calls = np.flatnonzero(_async_calls(recs))
    if not len(reaps) or not len(calls):
        return
    calls = calls[np.lexsort((recs["pid"][calls], recs["complete_ns"][calls]))]  # by completion, then process
    done, pid = recs["complete_ns"][calls], recs["pid"][calls]
    want, want_pid = recs["complete_ns"][reaps], recs["pid"][reaps]
    at = np.searchsorted(done, want)
    j = np.minimum(at, len(calls) - 1)
    same = (at < len(calls)) & (done[j] == want)
    first = same & (pid[j] == want_pid) & (recs["submit_ns"][calls[j]] <= recs["end_ns"][reaps])
    dep[reaps[first]] = calls[j[first]]
    upto = np.searchsorted(done, want, side="right")
    for k in np.flatnonzero(same & ~first):  # a completion shared with another process's request (rare)
        mine = calls[at[k]:upto[k]][pid[at[k]:upto[k]] == want_pid[k]]
        mine = mine[recs["submit_ns"][mine] <= recs["end_ns"][reaps[k]]]
        if len(mine):
            dep[reaps[k]] = mine[0]


def _dependencies(recs: np.ndarray, stream: np.ndarray) -> np.ndarray:
    dep = np.full(len(recs), -1, dtype=np.int64)
    _reaped(recs, dep)
    is_sync = recs["kind"] == trace.SYNC
    client = (recs["flags"] & CLIENT) != 0
    first_wake = {}  # the client's first wake aimed at each backend
    for i in np.flatnonzero(is_sync & client & (recs["op"] == WAKE)):
        first_wake.setdefault(int(recs["offset"][i]), int(i))
    for i in np.flatnonzero(is_sync & client & (recs["op"] == SLEEP)):
        dep[i] = first_wake[int(recs["pid"][i])]
    wakes = np.flatnonzero(is_sync & ~client & (recs["op"] == WAKE))
    sleeps = np.flatnonzero(is_sync & ~client & (recs["op"] == SLEEP) & ~_reaps(recs))
    if not len(wakes) or not len(sleeps):
        return dep
    # what a wake aims at, and what a sleep waits for: (kind, pid or semaphore address)
    wake_sem = (recs["flags"][wakes] & SEM) != 0
    sleep_sem = (recs["flags"][sleeps] & SEM) != 0
    wake_target = np.where(wake_sem, recs["offset"][wakes], recs["offset"][wakes])
    sleep_target = np.where(sleep_sem, recs["offset"][sleeps], recs["pid"][sleeps].astype(np.uint64))
    submit, end = recs["submit_ns"], recs["end_ns"]
    for sem in (False, True):
        # the wakes by target, each target's in time order; the sleeps by target
        w, wt = wakes[wake_sem == sem], wake_target[wake_sem == sem]
        by = np.lexsort((submit[w], wt))
        w, wt = w[by], wt[by]
        s, st = sleeps[sleep_sem == sem], sleep_target[sleep_sem == sem]
        by = np.argsort(st, kind="stable")
        s, st = s[by], st[by]
        targets = np.intersect1d(wt, st)
        w_from, w_to = np.searchsorted(wt, targets), np.searchsorted(wt, targets, side="right")
        s_from, s_to = np.searchsorted(st, targets), np.searchsorted(st, targets, side="right")
        for a, b, c, d in zip(w_from, w_to, s_from, s_to):
            ws, si = w[a:b], s[c:d]
            times = submit[ws]
            at = np.searchsorted(times, submit[si])  # each sleep's first wake at or after its start
            j = np.minimum(at, len(ws) - 1)
            ok = (at < len(ws)) & (times[j] <= end[si]) & (end[si] - times[j] <= WAKE_WINDOW_NS)
            ok &= stream[ws[j]] != stream[si]
            dep[si[ok]] = ws[j[ok]]
    return dep
