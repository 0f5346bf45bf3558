"""What one iobench measurement is, and the figures it yields. Both engines take a Job and return
Figures, so their results line up row by row."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

PATTERNS = ("read", "write", "randread", "randwrite")
MODES = ("direct", "buffered", "dsync")


@dataclass(frozen=True)
class Job:
    rw: str          # one of PATTERNS, as fio names them
    bs: int          # bytes per request
    jobs: int        # concurrent workers, each on its own file
    mode: str        # direct (O_DIRECT), buffered, dsync (O_DSYNC)
    size: int        # bytes per worker's file
    runtime: float   # seconds

    @property
    def is_read(self) -> bool:
        return self.rw in ("read", "randread")

    @property
    def is_random(self) -> bool:
        return self.rw.startswith("rand")

    def label(self) -> str:
        return f"{self.rw} {size_label(self.bs)} x{self.jobs} {self.mode}"


@dataclass(frozen=True)
class Figures:
    ios: int
    mb_s: float     # MiB/s, as fio prints
    iops: float
    mean_us: float
    p50_us: float
    p99_us: float
    elapsed_s: float  # the measured loop, start-up excluded
    per_second: list[int] | None = None  # completions in each second (the model engine)

    @classmethod
    def from_latencies(cls, lat_ns: np.ndarray, bytes_moved: int, elapsed_s: float) -> "Figures":
        if not len(lat_ns):
            return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0, elapsed_s)
        return cls(int(len(lat_ns)), bytes_moved / 1048576 / elapsed_s, len(lat_ns) / elapsed_s,
                   float(np.mean(lat_ns)) / 1e3, float(np.percentile(lat_ns, 50)) / 1e3,
                   float(np.percentile(lat_ns, 99)) / 1e3, elapsed_s)

    def asdict(self) -> dict:
        return asdict(self)


def size_label(n: int) -> str:
    """A size exactly, in fio's units: 512, 1536, 8k, 1m."""
    for unit, mult in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return str(n)


def parse_size(text: str) -> int:
    """4k, 1m, 256m, 1g (binary units, as fio reads them) or bytes."""
    t = str(text).strip().lower()
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(t[-1:], 1)
    digits = t[:-1] if t[-1:] in "kmg" else t
    if not digits.isdigit() or int(digits) <= 0:
        raise ValueError(text)
    return int(digits) * mult
