"""QD1 access patterns, and what a device model expects of them.

`dbtier devices show` prints these figures; the fidelity tests run the very same offsets (one C
generator, one seed) live through the interposer and compare."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dbtier.devices import native
from dbtier.devices.profile import Profile

KIB, MIB, GIB = 1024, 1024**2, 1024**3


@dataclass(frozen=True)
class Pattern:
    name: str
    op: int  # native.OP_READ or OP_WRITE
    random: bool
    block: int = 8 * KIB
    span: int = 1 * GIB  # one file of this size, laid out first on a fresh device
    count: int = 2000
    seed: int = 42

    def offsets(self, n: int | None = None) -> np.ndarray:
        return native.pattern_offsets(self.seed, self.random, self.span, self.block, n or self.count)


STANDARD = (
    Pattern("random read 8 KiB", native.OP_READ, True),
    Pattern("random write 8 KiB", native.OP_WRITE, True),
    Pattern("sequential read 8 KiB", native.OP_READ, False, count=4000),
    Pattern("sequential write 8 KiB", native.OP_WRITE, False, count=4000),
)


def warmup_count(profile: Profile, pattern: Pattern) -> int:
    """Requests to issue first so the figure is the steady state: enough writes to fill a disk's
    write-back buffer, after which each write waits for a destage."""
    if pattern.op == native.OP_WRITE and profile.kind == "hdd" and profile.params.get("write_cache", 0) >= 0.5:
        return math.ceil(profile.params["write_cache_mib"] * MIB / pattern.block) + 64
    return 0


@dataclass(frozen=True)
class Figures:
    pattern: str
    mean_us: float
    p50_us: float
    p99_us: float
    iops: float
    mb_s: float  # 10^6 bytes per second

    @classmethod
    def from_latencies(cls, pattern: Pattern, lat_ns: np.ndarray) -> "Figures":
        mean = float(np.mean(lat_ns))
        return cls(
            pattern=pattern.name,
            mean_us=mean / 1e3,
            p50_us=float(np.percentile(lat_ns, 50)) / 1e3,
            p99_us=float(np.percentile(lat_ns, 99)) / 1e3,
            iops=1e9 / mean if mean else float("inf"),
            mb_s=pattern.block * 1e3 / mean if mean else float("inf"),
        )


def expected(profile: Profile, pattern: Pattern, count: int | None = None) -> Figures:
    """The model's figures for the first `count` requests of a pattern (all of them by default) at
    QD1 with no think time, after its warm-up. A run of fewer requests compares with the figures of
    those same requests: a random pattern's first few hundred differ from its whole by several %."""
    model = profile.model()
    warm = warmup_count(profile, pattern)
    lat = model.qd1(pattern.op, pattern.offsets(warm + (count or pattern.count)), pattern.block)
    return Figures.from_latencies(pattern, lat[warm:])
