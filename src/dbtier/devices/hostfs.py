"""What the host's own storage under a directory is: its file system type and block device.

Emulation cannot be faster than the host's own I/O path, so fast devices want their data in RAM."""

from __future__ import annotations

import os
from pathlib import Path

RAM_FILESYSTEMS = {"tmpfs", "ramfs"}
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
