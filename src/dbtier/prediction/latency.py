"""Transaction latencies, predicted: each transaction a client timed (pgbench's log, or the OLTP
driver's own terminals; kept beside the trace) is found on its backend's stream and its start and end
carried through the replay.

The client is not traced, so which backend served which client is inferred: the backend whose
events end just before that client's transactions end (a transaction ends when the backend has
sent its last answer). A recorded time inside an event maps to the same fraction of that event
replayed; a time between events keeps its distance from the event before (the process's own CPU
time, scaled as the replay scales it)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from dbtier.measure import trace
from dbtier.workloads import pgbench_log

MATCH_NS = 3_000_000  # a transaction's end follows its backend's last answer within this


@dataclass
class _Times:
    """Recorded instants on backends' streams, made ready to carry through any replay of them: where
    each falls among its stream's events (_times), so that a replay's starts and ends give its
    replayed time at once."""
    at: np.ndarray       # the event (global index) each instant falls in or after
    past: np.ndarray     # how long after that event's end (scaled as CPU time)
    inside: np.ndarray   # the instants within their event (indexes)...
    frac: np.ndarray     # ...and how far into it
    before: np.ndarray   # the instants before their stream's first event (indexes)...
    first: np.ndarray    # ...that event (global index)...
    ahead: np.ndarray    # ...and how long before it

    def replayed(self, start: np.ndarray, end: np.ndarray, cpu_scale: float) -> np.ndarray:
        # replay times are below 2^62: read as int64 in place, as the recorded ones are
        start, end = start.view(np.int64), end.view(np.int64)
        e = end[self.at]
        out = e + self.past * cpu_scale
        s = start[self.at[self.inside]]
        out[self.inside] = s + self.frac * (e[self.inside] - s).astype(np.float64)
        out[self.before] = start[self.first] - self.ahead
        return out


def _joined(parts: list[_Times]) -> _Times:
    """Several streams' instants as one, one stream's after another."""
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return _Times(empty, empty.astype(np.float64), empty, empty.astype(np.float64), empty, empty, empty)
    sizes = np.cumsum([0] + [len(p.at) for p in parts[:-1]])
    return _Times(*(np.concatenate([getattr(p, f.name) + (k if f.name in ("inside", "before") else 0)
                                    for p, k in zip(parts, sizes)]) for f in fields(_Times)))


def _times(idx: np.ndarray, t0: np.ndarray, t1: np.ndarray, x: np.ndarray) -> _Times:
    """Recorded times x on one stream (events idx, recorded t0..t1, in order). Replayed, a time inside
    an event comes at the same fraction of it; one after it as far after its end (scaled as CPU time);
    one before the stream's first event as far before its start."""
    k = np.searchsorted(t0, x, side="right") - 1
    kk = np.clip(k, 0, len(t0) - 1)
    dur = (t1[kk] - t0[kk]).astype(np.float64)
    frac = np.where(dur > 0, (x - t0[kk]) / np.maximum(dur, 1), 0.0)
    inside = np.flatnonzero((k >= 0) & (x <= t1[kk]))
    before = np.flatnonzero(k < 0)
    return _Times(idx[kk], x - t1[kk], inside, frac[inside], before, np.full(len(before), idx[0]), (t0[0] - x)[before])


def _summary(lat_ms: np.ndarray) -> dict:
    return pgbench_log.summary(pgbench_log.ScriptLog(lat_ms))


@dataclass
class Placed:
    """An interval's timed transactions, each found on its backend's stream (prepare): what a replay's
    starts and ends turn into predicted latencies at once (replayed)."""
    count: int            # the transactions in the interval
    rows: np.ndarray      # those found on a backend (indexes), in the order of ends and starts
    ends: _Times          # their ends and starts, on their backends
    starts: _Times
    scripts: dict         # per script: its transactions (indexes)
    recorded: dict        # per script: the recorded latency summary


def prepare(txns: dict | None, streams, clients: np.ndarray, t0_ns: int, t1_ns: int) -> Placed | None:
    """The transactions a client timed in [t0, t1], each client's found on the backend (a stream
    marked in clients: one flag per stream) whose events end just before its transactions do (None:
    no transactions)."""
    if not txns:
        return None
    window = (txns["end_ns"] >= t0_ns) & (txns["end_ns"] <= t1_ns)
    script, client, end_ns, lat_us = (txns[k][window] for k in ("script", "client", "end_ns", "latency_us"))
    if not len(end_ns):
        return None
    ev = streams.events
    stream = ev["stream"]
    bounds = np.r_[0, np.flatnonzero(np.diff(stream)) + 1, len(ev)]  # events are grouped by stream, in order
    backends = {}
    for a, b in zip(bounds[:-1], bounds[1:]):
        s = int(stream[a])
        if clients[s] and np.any(ev["kind"][a:b] == trace.CALL):
            backends[s] = (np.arange(a, b), ev["t0"][a:b].astype(np.int64), ev["t1"][a:b].astype(np.int64))
    ends_sorted = {s: np.sort(t1) for s, (_idx, _t0, t1) in backends.items()}
    by_pid: dict[int, list[int]] = {}
    for s in backends:
        by_pid.setdefault(int(streams.pids[s]), []).append(s)
    rows, ends, starts = [], [], []
    for c in np.unique(client):
        mine = client == c
        e_c = end_ns[mine]
        best, best_score = None, 0.0
        # a client that names its server process is matched among that process's streams alone
        among = by_pid.get(int(c), []) if txns.get("on_backend") else ends_sorted
        for s in among:
            ends_s = ends_sorted[s]
            j = np.searchsorted(ends_s, e_c, side="right") - 1
            ok = (j >= 0) & (e_c - ends_s[np.clip(j, 0, None)] <= MATCH_NS)
            score = float(ok.mean())
            if score > best_score:
                best, best_score = s, score
        if txns.get("on_backend") and len(among) == 1:
            best = among[0]  # its own process: nothing to infer
        elif best is None or best_score < 0.5:
            continue
        idx, t0, t1 = backends[best]
        rows.append(np.flatnonzero(mine))
        ends.append(_times(idx, t0, t1, e_c))
        starts.append(_times(idx, t0, t1, e_c - lat_us[mine] * 1000))
    rows = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    placed = np.zeros(len(end_ns), dtype=bool)
    placed[rows] = True
    # (a few names among many transactions: found by hashing, not sorted)
    scripts = {str(name): np.flatnonzero(script == name) for name in sorted(set(script.tolist()))}
    recorded = {name: _summary(lat_us[m[placed[m]]] / 1e3) for name, m in scripts.items()}
    return Placed(len(end_ns), rows, _joined(ends), _joined(starts), scripts, recorded)


def replayed(placed: Placed | None, start: np.ndarray, end: np.ndarray, cpu_scale: float) -> tuple[dict, int]:
    """Per script: the recorded and the predicted latency summary; and how many transactions could
    not be placed on a backend."""
    if placed is None:
        return {}, 0
    predicted = np.full(placed.count, np.nan)
    predicted[placed.rows] = (placed.ends.replayed(start, end, cpu_scale)
                              - placed.starts.replayed(start, end, cpu_scale)) / 1e6
    ok = ~np.isnan(predicted)
    out = {}
    for name, m in placed.scripts.items():
        out[name] = {"recorded": placed.recorded[name], "predicted": _summary(predicted[m[ok[m]]])}
    return out, int(placed.count - ok.sum())
