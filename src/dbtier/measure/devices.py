"""Per-device figures of a measured interval, from two snapshots of the interposer's state."""

from __future__ import annotations

from dbtier.measure import iostat, lateness, limits

_NOT_COUNTERS = ("params", "lateness", "dir", "kind", "name", "first_ns", "last_ns", "late_max_ns")


def delta(before: dict | None, after: dict) -> dict:
    """One device's counters over the interval. late_max_ns cannot be differenced: it is the
    interval's maximum only if it grew, else it is reported as the run-so-far maximum."""
    if before is None:
        return after
    out = dict(after)
    for key, value in after.items():
        if key not in _NOT_COUNTERS and isinstance(value, int):
            out[key] = value - before.get(key, 0)
    prior = {floor: n for floor, n in before["lateness"]}
    out["lateness"] = [[floor, n - prior.get(floor, 0)] for floor, n in after["lateness"] if n - prior.get(floor, 0)]
    return out


def rows(devices, after: dict, elapsed_s: float, before: dict | None = None) -> list[dict]:
    """devices: the session's Device list, in state order. One row per device: iostat figures,
    lateness and raw counters over the interval."""
    out = []
    for i, spec in enumerate(devices):
        dev = delta(before["devices"][i] if before else None, after["devices"][i])
        counters = {k: v for k, v in dev.items() if k not in ("params", "lateness", "dir", "kind", "name")}
        out.append({
            "device": spec.name, "dir": str(spec.directory), "profile": spec.profile.name, "kind": spec.profile.kind,
            "iostat": iostat.figures(dev, elapsed_s), "page_cache": iostat.page_cache(dev),
            "lateness": lateness.summary(dev), "counters": counters,
            **({"limits": held} if (held := limits.held(dev, elapsed_s)) else {}),
        })
    return out


def wait_s(rows_: list[dict]) -> float:
    """Time the server's calls spent on the devices, summed over all I/Os (like ASE's IOTime)."""
    return sum((r["counters"]["read_ns"] + r["counters"]["write_ns"] + r["counters"]["flush_ns"]) / 1e9 for r in rows_)


def spin_s(rows_: list[dict]) -> float:
    return sum(r["counters"].get("spin_ns", 0) / 1e9 for r in rows_)
