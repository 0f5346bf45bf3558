"""Per-device figures as `iostat -x` defines them, from the interposer's counters.

r_await/w_await/f_await: mean time from issue to completion (queue + service), ms.
aqu-sz: summed request time over the interval. svctm: busy time per I/O (iostat's historic
definition: %util x interval / I/Os). %util: time with at least one request in flight. MB is
1,048,576 bytes, as `iostat -m` prints."""

from __future__ import annotations

MB = 1048576.0


def figures(dev: dict, elapsed_s: float) -> dict:
    r, w, f = dev["reads"], dev["writes"], dev["flushes"]
    ios = r + w
    el = elapsed_s if elapsed_s > 0 else float("nan")
    busy_s = dev["busy_ns"] / 1e9
    return {
        "r/s": r / el,
        "w/s": w / el,
        "f/s": f / el,
        "rMB/s": dev["read_bytes"] / MB / el,
        "wMB/s": dev["write_bytes"] / MB / el,
        "rareq-sz": dev["read_bytes"] / 1024 / r if r else 0.0,
        "wareq-sz": dev["write_bytes"] / 1024 / w if w else 0.0,
        "r_await": dev["read_ns"] / 1e6 / r if r else 0.0,
        "w_await": dev["write_ns"] / 1e6 / w if w else 0.0,
        "f_await": dev["flush_ns"] / 1e6 / f if f else 0.0,
        "aqu-sz": (dev["read_ns"] + dev["write_ns"] + dev["flush_ns"]) / 1e9 / el,
        "svctm": busy_s * 1e3 / (ios + f) if ios + f else 0.0,
        "%util": min(100.0, 100.0 * busy_s / el),
        "hit_pct": 100.0 * dev["cache_hits"] / ios if ios else 0.0,
        # a queueing drive (NCQ/TCQ) started these before an older request it held
        "reordered_pct": 100.0 * dev.get("reordered", 0) / ios if ios else 0.0,
    }


COLUMNS = ("r/s", "w/s", "f/s", "rMB/s", "wMB/s", "r_await", "w_await", "f_await", "aqu-sz", "svctm", "%util")


def page_cache(dev: dict) -> dict:
    """The emulated OS page cache as this device's files met it."""
    hits, misses = dev.get("pc_hit_pages", 0), dev.get("pc_miss_pages", 0)
    return {
        "hit_pages": hits, "miss_pages": misses,
        "hit_pct": 100.0 * hits / (hits + misses) if hits + misses else 0.0,
        "readahead_mb": dev.get("pc_readahead_bytes", 0) / MB,
        "writeback_mb": dev.get("pc_writeback_bytes", 0) / MB,
    }
