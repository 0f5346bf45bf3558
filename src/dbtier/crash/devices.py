"""What a power cut takes from a device, from its profile's parameters: how many acknowledged bytes
its write cache may hold and lose, whether it obeys a flush, and the largest write it never tears.

A hard disk's write cache is volatile unless it is protected (a controller's battery-backed cache);
a flash drive's unless it has power-loss protection; a cloud volume acknowledges a write once it is
replicated, and a RAM SAN is battery-backed, so neither loses what it acknowledged. A `real` device
cannot be cut: nothing about it is modelled."""

from __future__ import annotations

from dataclasses import dataclass

from dbtier.devices.profile import Profile
from dbtier.errors import UserError

MIB = 1 << 20


@dataclass(frozen=True)
class Durability:
    volatile_bytes: int    # acknowledged writes a power cut may take (0: none)
    flush_honoured: bool   # a flush (and FUA) makes what came before it durable
    atomic_bytes: int      # the largest aligned write never torn

    def describe(self) -> str:
        cache = (f"a volatile write cache of {self.volatile_bytes / MIB:g} MiB" if self.volatile_bytes
                 else "no volatile write cache")
        flush = "" if self.flush_honoured or not self.volatile_bytes else ", flushes ignored"
        return f"{cache}{flush}, writes of {_size(self.atomic_bytes)} never torn"


def _size(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} B"


def volatile_bytes(kind: str, p: dict) -> int:
    """Acknowledged bytes the device's write cache may lose (params: a profile's, every one given)."""
    if kind == "hdd":
        return int(p["write_cache_mib"] * MIB) if p["write_cache"] >= 0.5 and p["write_cache_protected"] < 0.5 else 0
    if kind == "ssd":
        return 0 if p["power_loss_protection"] >= 0.5 else int(p["volatile_cache_mib"] * MIB)
    return 0  # cloud volumes acknowledge replicated writes; a RAM SAN's memory is battery-backed


def of(name: str, profile: Profile) -> Durability:
    p = profile.params
    if profile.kind == "real":
        raise UserError(f"device {name} is a real folder ({profile.name}): nothing about its writes is modelled, so "
                        "it cannot be cut; give it an emulated profile (dbtier devices list)")
    return Durability(volatile_bytes(profile.kind, p), p["flush_honoured"] >= 0.5,
                      max(512, int(round(p["atomic_write_kib"] * 1024))))
