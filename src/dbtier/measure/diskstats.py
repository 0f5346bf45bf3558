"""iostat -x figures of a real block device from /proc/diskstats, as `iostat` computes them.

For devices of kind `real`, beside the interposer's own counting: the kernel's view includes what
the interposer cannot see (the host's page cache writeback, read-ahead, other programs)."""

from __future__ import annotations

import os
from pathlib import Path

MB = 1048576.0
SECTOR = 512
FIELDS = ("reads", "rd_merges", "rd_sectors", "rd_ticks", "writes", "wr_merges", "wr_sectors", "wr_ticks",
          "in_flight", "io_ticks", "time_in_queue", "discards", "disc_merges", "disc_sectors", "disc_ticks",
          "flushes", "flush_ticks")


def block_device(path: Path) -> str | None:
    """The kernel's name of the block device holding path (vda, nvme0n1p2, ...), or None (tmpfs,
    overlay and other file systems without one)."""
    dev = os.stat(path).st_dev
    link = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    return link.resolve().name if os.major(dev) and link.exists() else None


def read(name: str) -> dict[str, int]:
    with open("/proc/diskstats") as f:
        for line in f:
            parts = line.split()
            if parts[2] == name:
                values = [int(v) for v in parts[3:]]
                return dict(zip(FIELDS, values + [0] * (len(FIELDS) - len(values))))
    raise KeyError(name)


def figures(before: dict[str, int], after: dict[str, int], elapsed_s: float) -> dict:
    d = {k: after[k] - before[k] for k in FIELDS if k != "in_flight"}
    r, w, f = d["reads"], d["writes"], d["flushes"]
    el_ms = elapsed_s * 1e3 if elapsed_s > 0 else float("nan")
    return {
        "r/s": r / elapsed_s, "w/s": w / elapsed_s, "f/s": f / elapsed_s,
        "rMB/s": d["rd_sectors"] * SECTOR / MB / elapsed_s, "wMB/s": d["wr_sectors"] * SECTOR / MB / elapsed_s,
        "rrqm/s": d["rd_merges"] / elapsed_s, "wrqm/s": d["wr_merges"] / elapsed_s,
        "rareq-sz": d["rd_sectors"] * SECTOR / 1024 / r if r else 0.0,
        "wareq-sz": d["wr_sectors"] * SECTOR / 1024 / w if w else 0.0,
        "r_await": d["rd_ticks"] / r if r else 0.0,
        "w_await": d["wr_ticks"] / w if w else 0.0,
        "f_await": d["flush_ticks"] / f if f else 0.0,
        "aqu-sz": d["time_in_queue"] / el_ms,
        "svctm": d["io_ticks"] / (r + w) if r + w else 0.0,
        "%util": min(100.0, 100.0 * d["io_ticks"] / el_ms),
        "read_bytes": d["rd_sectors"] * SECTOR, "write_bytes": d["wr_sectors"] * SECTOR,
    }
