"""pgbench's per-transaction log (`pgbench -l`), read once for every driver that runs pgbench.

A line: client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries], where
time is the transaction's latency in microseconds, or `skipped` (a --rate schedule it could not keep
within --latency-limit) or `failed` (a serialization or deadlock error, after its retries)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

PERCENTILES = (50, 90, 95, 99, 99.9)


@dataclass
class ScriptLog:
    latency_ms: list[float] = field(default_factory=list)
    skipped: int = 0
    failed: int = 0
    late: int = 0  # over --latency-limit (counted by the caller, who knows the limit)
    # per completed transaction, beside latency_ms: its client and when it ended (epoch, us)
    clients: list[int] = field(default_factory=list)
    ends_us: list[int] = field(default_factory=list)


def read(prefix: Path, remove: bool = True) -> dict[int, ScriptLog]:
    """Every log file pgbench wrote under prefix (one per thread), by script number."""
    out: dict[int, ScriptLog] = {}
    for path in sorted(prefix.parent.glob(prefix.name + ".*")):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) < 4 or not parts[3].isdigit():
                continue
            log = out.setdefault(int(parts[3]), ScriptLog())
            if parts[2] == "skipped":
                log.skipped += 1
            elif parts[2] == "failed":
                log.failed += 1
            elif parts[2].isdigit():
                log.latency_ms.append(int(parts[2]) / 1e3)
                if len(parts) >= 6 and parts[0].isdigit() and parts[4].isdigit() and parts[5].isdigit():
                    log.clients.append(int(parts[0]))
                    log.ends_us.append(int(parts[4]) * 1_000_000 + int(parts[5]))
        if remove:
            path.unlink()
    return out


def note_transactions(db, logs: dict[int, ScriptLog], names: list[str]) -> None:
    """Hands each completed transaction (script, client, end, latency) to the lab, which keeps them
    beside a trace: a prediction replays each one's time on its backend."""
    for i, name in enumerate(names):
        log = logs.get(i)
        if log and len(log.ends_us) == len(log.latency_ms):
            db.note_transactions(name, log.clients, log.ends_us, log.latency_ms)


def summary(log: ScriptLog, quantiles=PERCENTILES) -> dict:
    lat = np.asarray(log.latency_ms)
    at = np.percentile(lat, quantiles) if lat.size else ()  # all at once: one pass over the latencies
    return {"count": int(lat.size), "skipped": log.skipped, "failed": log.failed,
            "mean_ms": float(lat.mean()) if lat.size else 0.0,
            **{percentile_key(q): float(v) for q, v in zip(quantiles, at)}}


def per_second(ends_us: list[int]) -> list[int]:
    """Transactions completed in each second from the first one's end: throughput over time."""
    if not ends_us:
        return []
    ends = np.asarray(ends_us, dtype=np.int64)
    return np.bincount((ends - ends.min()) // 1_000_000).astype(int).tolist()


def percentile_key(q: float) -> str:
    """p50_ms, p99_ms, p999_ms (99.9): a key of letters, digits and underscores."""
    return f"p{q:g}".replace(".", "") + "_ms"
