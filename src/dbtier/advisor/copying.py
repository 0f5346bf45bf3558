"""A table's (or index's) copy to another device, as a migration script makes it: the bytes, the two
devices, and its time estimated from the device models it reads from and writes to (and the log's:
the copy is logged)."""

from __future__ import annotations

from dataclasses import dataclass

from dbtier.devices import native, patterns
from dbtier.devices.profile import Profile

#: the copy's I/O as the model is asked it: sequential, 128 KiB at a time (the kernel's read-ahead and
#: the writer's batching), 256 of them
COPY_BLOCK = 128 << 10
COPY_COUNT = 256


@dataclass
class Move:
    name: str
    kind: str
    bytes: int
    source: str
    target: str
    seconds: float | None

    def lock(self) -> str:
        """What PostgreSQL's move locks meanwhile (MariaDB's rebuild says its own: migration_innodb)."""
        if self.kind == "database":
            return "needs every other session of the database gone until it ends"
        return f"holds ACCESS EXCLUSIVE on the {'index' if self.kind == 'index' else 'table'}: no reads or writes of " \
               "it until the copy ends"


def _rate(profile: Profile | None, op: int) -> float | None:
    """Sequential MB/s of the model (10^6 B/s), or None for a device with no model."""
    if profile is None or profile.kind == "real":
        return None
    pat = patterns.Pattern("copy", op, False, block=COPY_BLOCK, count=COPY_COUNT)
    return patterns.expected(profile, pat).mb_s


def copy_seconds(nbytes: int, source: Profile | None, target: Profile | None, wal: Profile | None) -> float | None:
    """The copy reads the source, writes the target, and (wal_level replica or above) writes every
    page to the WAL too: the slowest of the three sets the pace."""
    rates = [_rate(source, native.OP_READ), _rate(target, native.OP_WRITE), _rate(wal, native.OP_WRITE)]
    if any(r is None or r <= 0 for r in rates):
        return None
    return nbytes / 1e6 / min(rates)


def duration(seconds: float) -> str:
    return f"{seconds:,.1f} s" if seconds < 120 else f"{seconds / 60:,.0f} min"
