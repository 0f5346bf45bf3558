"""From trace records to the replay's event streams: one stream per process (thread), each call with
its recorded host time and lateness, each sleep tied to the wake from another process that ended it.

A sleep is tied to the first wake aimed at it (kill to its pid, for a latch; sem_post on its
semaphore, for an LWLock; a wake of its futex or a signal of its condition variable, for a thread's
lock, row lock or group commit in MariaDB) that came after it began and before it ended, and no more than
WAKE_WINDOW_NS before it ended; a sleep with no such wake (a timeout, a client's next query) keeps its
recorded length in the replay. A reap of asynchronous requests (io_getevents) is tied to the request
whose completion it waited for: the one its record names by process and completion time (a buffered
one, done at once in io_submit: the call of its process that ended then)."""

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
    tids: np.ndarray | None = None  # per stream: its thread id


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
          same_devices: set[int] | None = None, pooled: set[int] | None = None) -> Streams:
    """recs: one interval's calls and syncs (interval_records), sorted by submit time. foreground: the
    pids that served the workload's client (its backends), whose connections the client made one after
    another when none overlapped. same_devices: the recorded devices the prediction keeps as they were
    (a call that stays on one of them keeps its recorded lateness). pooled: see prepare."""
    return place(prepare(recs, foreground, pooled), file_device, same_devices)


def prepare(recs: np.ndarray, foreground: set[int] | None = None, pooled: set[int] | None = None) -> Streams:
    """The streams of one interval, each call on the device it was recorded on (place, or the replay
    itself, puts it where a placement says): what does not depend on the placement, computed once
    however many placements are replayed. The events are the records as native/iotap/replay.h says a
    replay takes them.

    pooled: the thread ids of a thread pool's workers (MariaDB's InnoDB runs its I/O completions, its
    periodic and background work as tasks on any free worker). A worker's tasks do not wait for each
    other; only the thread they happened to run on made them look so, and a replay that kept them in
    line would hold a completion a client waits for behind a timer's task the worker ran before it. So
    a worker's stream is cut at each of its sleeps: each task from its wake on is a stream of its own."""
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
    new = key[1:] != key[:-1]
    if pooled:  # a pool worker's each task (from a sleep on) a stream of its own
        new |= np.isin(recs["tid"][1:], list(pooled)) & (recs["kind"][1:] == trace.SYNC) & (recs["op"][1:] == SLEEP)
    stream = np.r_[0, np.cumsum(new)] if len(key) else np.zeros(0, dtype=np.int64)
    dep = _dependencies(recs, stream)
    ev = native.replay_events(recs, stream, dep, _guards(recs, stream, dep))
    pids = np.zeros(stream.max() + 1 if len(stream) else 0, dtype=np.int64)
    pids[stream] = recs["pid"]
    tids = np.zeros_like(pids)
    tids[stream] = recs["tid"]
    return Streams(ev, pids, recs, tids)


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
    return Streams(ev, streams.pids, streams.records, streams.tids)


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
    """For each lock wait (a semaphore: an LWLock; a futex: MariaDB's locks and latches) tied to a
    wake: the waker's own last sleep before that wake (it has been awake, holding the lock, since that
    sleep ended), or -1. A latch wait (for work to do, an I/O's completion, a commit) and a condition
    variable's (a row lock, held for its transaction whatever the holder waited for meanwhile) always
    wait for their wake. MariaDB's group commit waits on a futex too, and so is taken as a lock: a
    follower the replay brings before the leader's last sleep does not wait for its log write (it would
    have written the log itself, a write its stream does not hold)."""
    guard = np.full(len(recs), -1, dtype=np.int64)
    sleeping = (recs["kind"] == trace.SYNC) & (recs["op"] == SLEEP)
    # per event: the index of its stream's latest sleep at or before it (events are grouped by stream)
    idx = np.where(sleeping, np.arange(len(recs)), -1)
    starts = np.r_[0, np.flatnonzero(np.diff(stream)) + 1]
    latest = np.maximum.accumulate(idx) if len(idx) else idx  # an earlier stream's sleep is not its own
    latest = np.where(latest >= np.repeat(starts, np.diff(np.r_[starts, len(recs)])), latest, -1)
    lock = (recs["flags"] & (SEM | trace.SYNC_FUTEX)) != 0
    tied = np.flatnonzero((dep >= 0) & lock & ((recs["flags"] & CLIENT) == 0))
    held_since = latest[dep[tied]]
    # A futex whose waker woke for an I/O's completion (its last sleep a reap, or a wake from a thread whose
    # last sleep was one: MariaDB's reaping thread hands each completion to a pool worker) is a page latch
    # held by the I/O in flight, not by the waker: its sleeper always waits for that wake.
    reap = _reaps(recs)
    via = np.where(held_since >= 0, dep[np.maximum(held_since, 0)], -1)
    io_driven = (held_since >= 0) & (reap[np.maximum(held_since, 0)] |
                                     ((via >= 0) & (latest[np.maximum(via, 0)] >= 0) & reap[latest[np.maximum(via, 0)]]))
    futex = (recs["flags"][tied] & trace.SYNC_FUTEX) != 0
    guard[tied] = np.where(futex & io_driven, -1, held_since)
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
    if not len(reaps):
        return
    if not len(calls):
        _reaped_at_once(recs, dep, reaps)
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
    _reaped_at_once(recs, dep, reaps[dep[reaps] < 0])


def _reaped_at_once(recs: np.ndarray, dep: np.ndarray, reaps: np.ndarray) -> None:
    """A reap whose request was buffered: done at once in io_submit, an ordinary call of its process
    (trace.h) that ended at the completion the reap names. MariaDB reads ahead so, its pool workers
    reaping what the client's thread submitted."""
    if not len(reaps):
        return
    calls = np.flatnonzero((recs["kind"] == trace.CALL) & ~_async_calls(recs))
    calls = calls[np.lexsort((recs["pid"][calls], recs["end_ns"][calls]))]  # by end, then process
    ends, pid = recs["end_ns"][calls], recs["pid"][calls]
    want = recs["complete_ns"][reaps]
    at = np.searchsorted(ends, want)
    upto = np.searchsorted(ends, want, side="right")
    for k in np.flatnonzero(at < upto):
        mine = calls[at[k]:upto[k]][pid[at[k]:upto[k]] == recs["pid"][reaps[k]]]
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
    # a futex's or condition variable's wait that timed out was a timer's: nobody's wake ends it
    timed_out = ((recs["flags"] & (trace.SYNC_FUTEX | trace.SYNC_COND)) != 0) & (recs["len"] == 0)
    sleeps = np.flatnonzero(is_sync & ~client & (recs["op"] == SLEEP) & ~_reaps(recs) & ~timed_out)
    if not len(wakes) or not len(sleeps):
        return dep
    cls, target = _aims(recs, np.r_[wakes, sleeps], len(wakes))
    wake_class, sleep_class = cls[:len(wakes)], cls[len(wakes):]
    wake_target, sleep_target = target[:len(wakes)], target[len(wakes):]
    submit, end = recs["submit_ns"], recs["end_ns"]
    for kind in np.intersect1d(wake_class, sleep_class):
        # the wakes by target, each target's in time order; the sleeps by target
        w, wt = wakes[wake_class == kind], wake_target[wake_class == kind]
        by = np.lexsort((submit[w], wt))
        w, wt = w[by], wt[by]
        s, st = sleeps[sleep_class == kind], sleep_target[sleep_class == kind]
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


#: what a wake aims at and a sleep waits for, by class: a latch (kill to a pid), a semaphore (its
#: address, shared by the processes), a futex (its address; a process's own futex within that process),
#: a condition variable (its address, within its process)
_LATCH, _SEM, _FUTEX, _OWN_FUTEX, _COND = range(5)


def _aims(recs: np.ndarray, idx: np.ndarray, first_sleep: int) -> tuple[np.ndarray, np.ndarray]:
    """Each wake's or sleep's (idx: the wakes, then the sleeps from first_sleep on) class and target.
    What is a process's own (a private futex, a condition variable) has its targets numbered by
    (pid, address): two processes may use one address for two things."""
    flags = recs["flags"][idx]
    futex = (flags & trace.SYNC_FUTEX) != 0
    cls = np.select([(flags & trace.SYNC_COND) != 0, futex & (recs["aux"][idx] != 0), futex, (flags & SEM) != 0],
                    [_COND, _OWN_FUTEX, _FUTEX, _SEM], _LATCH)
    target = recs["offset"][idx].astype(np.uint64)
    sleeper = np.arange(len(idx)) >= first_sleep
    target = np.where(sleeper & (cls == _LATCH), recs["pid"][idx].astype(np.uint64), target)  # a latch's sleeper: its pid
    own = (cls == _OWN_FUTEX) | (cls == _COND)
    if own.any():
        pairs = np.stack([cls[own].astype(np.uint64), recs["pid"][idx][own].astype(np.uint64), target[own]], axis=1)
        _keys, number = np.unique(pairs, axis=0, return_inverse=True)
        target[own] = number.reshape(-1).astype(np.uint64)
    return cls, target
