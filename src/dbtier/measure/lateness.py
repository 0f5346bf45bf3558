"""Emulation lateness (actual minus modelled completion) from the interposer's histogram."""

from __future__ import annotations


def percentile(hist: list[list[int]], q: float) -> float:
    """q-th percentile (0-100) in ns from [[bucket floor ns, count], ...], bucket floors ascending.

    Buckets are ~9% wide; the value is the bucket's floor, so it never overstates."""
    total = sum(c for _, c in hist)
    if not total:
        return 0.0
    need = q / 100.0 * total
    seen = 0
    for floor, count in hist:
        seen += count
        if seen >= need:
            return float(floor)
    return float(hist[-1][0])


def summary(dev: dict) -> dict:
    hist = dev["lateness"]
    n = sum(c for _, c in hist)
    return {
        "count": n,
        "p50_us": percentile(hist, 50) / 1e3,
        "p99_us": percentile(hist, 99) / 1e3,
        "mean_us": dev["late_sum_ns"] / n / 1e3 if n else 0.0,
        "max_us": dev["late_max_ns"] / 1e3,
        "overruns": dev["overruns"],
    }
