"""What the host's own storage under a directory is (its file system type and block device), and
the memory the host can give.

Emulation cannot be faster than the host's own I/O path, so fast devices want their data in RAM."""

from __future__ import annotations

import os
from pathlib import Path

RAM_FILESYSTEMS = {"tmpfs", "ramfs"}
MEMINFO = Path("/proc/meminfo")
#: share of the memory available a run may plan to use (the host and its other processes keep the rest)
MEMORY_SHARE = 0.9
#: Below this modelled latency the host's disk is a floor; keep the data on tmpfs.
FAST_DEVICE_US = 200.0


def mount_of(path: Path) -> tuple[str, str, str]:
    """(mount point, file system type, source) of the mount holding path."""
    real = os.path.realpath(path)
    best = ("/", "unknown", "")
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            source, point, fstype = line.split()[:3]
            point = point.replace("\\040", " ")
            inside = real == point or real.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best[0]):
                best = (point, fstype, source)
    return best


def is_ram(path: Path) -> bool:
    return mount_of(path)[1] in RAM_FILESYSTEMS


def evict_from_page_cache(directory: Path) -> int:
    """Makes the host's page cache forget the files under directory (after a sync writes their dirty
    pages), as a cold start on a real device needs. No root needed. Returns the files evicted."""
    os.sync()
    n = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            try:
                fd = os.open(os.path.join(root, name), os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                n += 1
            finally:
                os.close(fd)
    return n


def _meminfo(key: str) -> int | None:
    try:
        for line in MEMINFO.read_text().splitlines():
            name, _, rest = line.partition(":")
            if name == key:
                return int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def mem_available() -> int | None:
    """Memory the kernel can give without swapping (MemAvailable), or None where unknown."""
    return _meminfo("MemAvailable")


def mem_total() -> int | None:
    return _meminfo("MemTotal")
