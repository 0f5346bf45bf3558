"""Transaction latencies, predicted: each transaction a client timed (pgbench's log, or the OLTP
driver's own terminals; kept beside the trace) is found on its backend's stream and its start and end
carried through the replay.

The client is not traced, so which backend served which client is inferred: the backend whose
events end just before that client's transactions end (a transaction ends when the backend has
sent its last answer). A recorded time inside an event maps to the same fraction of that event
replayed; a time between events keeps its distance from the event before (the process's own CPU
time, scaled as the replay scales it)."""

from __future__ import annotations

import numpy as np

from dbtier.measure import trace
from dbtier.workloads import pgbench_log

MATCH_NS = 3_000_000  # a transaction's end follows its backend's last answer within this


def _warp(t0, t1, s, e, x, cpu_scale):
    """Recorded times x on one stream (events t0..t1, replayed s..e, in order) as replayed times."""
    k = np.searchsorted(t0, x, side="right") - 1
    kk = np.clip(k, 0, len(t0) - 1)
    dur, rdur = (t1[kk] - t0[kk]).astype(np.float64), (e[kk] - s[kk]).astype(np.float64)
    inside = (k >= 0) & (x <= t1[kk])
    frac = np.where(dur > 0, (x - t0[kk]) / np.maximum(dur, 1), 0.0)
    out = np.where(inside, s[kk] + frac * rdur, e[kk] + (x - t1[kk]) * cpu_scale)
    return np.where(k < 0, s[0] - (t0[0] - x), out)


def _summary(lat_ms: np.ndarray) -> dict:
    return pgbench_log.summary(pgbench_log.ScriptLog(list(lat_ms)))


def predict(txns: dict | None, streams, start, end, clients: set[int], t0_ns: int, t1_ns: int,
            cpu_scale: float) -> tuple[dict, int]:
    """Per script: the recorded and the predicted latency summary; and how many transactions could
    not be placed on a backend."""
    if not txns:
        return {}, 0
    window = (txns["end_ns"] >= t0_ns) & (txns["end_ns"] <= t1_ns)
    script, client, end_ns, lat_us = (txns[k][window] for k in ("script", "client", "end_ns", "latency_us"))
    if not len(end_ns):
        return {}, 0
    ev = streams.events
    backends = {}
    for s, pid in enumerate(streams.pids):
        idx = np.flatnonzero(ev["stream"] == s)
        if int(pid) in clients and np.any(ev["kind"][idx] == trace.CALL):
            backends[s] = (ev["t0"][idx].astype(np.int64), ev["t1"][idx].astype(np.int64),
                           start[idx].astype(np.int64), end[idx].astype(np.int64))
    predicted = np.full(len(end_ns), np.nan)
    for c in np.unique(client):
        mine = client == c
        e_c = end_ns[mine]
        best, best_score = None, 0.0
        for s, (t0, t1, _s, _e) in backends.items():
            ends = np.sort(t1)
            j = np.searchsorted(ends, e_c, side="right") - 1
            ok = (j >= 0) & (e_c - ends[np.clip(j, 0, None)] <= MATCH_NS)
            score = float(ok.mean())
            if score > best_score:
                best, best_score = s, score
        if best is None or best_score < 0.5:
            continue
        t0, t1, s_, e_ = backends[best]
        x_end = e_c
        x_start = e_c - lat_us[mine] * 1000
        predicted[mine] = (_warp(t0, t1, s_, e_, x_end, cpu_scale) - _warp(t0, t1, s_, e_, x_start, cpu_scale)) / 1e6
    placed = ~np.isnan(predicted)
    out = {}
    for name in np.unique(script):
        m = (script == name) & placed
        out[str(name)] = {"recorded": _summary(lat_us[m] / 1e3), "predicted": _summary(predicted[m])}
    return out, int((~placed).sum())
