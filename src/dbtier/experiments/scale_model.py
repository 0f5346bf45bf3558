"""The scale model: a run whose data is 1/F of the system it stands for, with every cache and distance
shrunk by the same F, so the data meets its caches and platters as it did at full size.

With `--scale-model F` every size a user gives is the real system's: `--cache` (shared_buffers),
`--page-cache`, work_mem, maintenance_work_mem, effective_cache_size and min_wal_size (given with
--set, or PostgreSQL's defaults and dbtier's preset), and each device's profile (an HDD's write
cache or controller cache; its seeks stretched, so the data spans as many cylinders as at full size
and seeks are as long). This module is the one place that divides them; the run reports each size
as given and as run, and says where a floor (PostgreSQL's minimum, a drive's one segment of write
cache) kept a size larger than its share."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from dbtier.devices.profile import Profile
from dbtier.devices.spec import DeviceSpec
from dbtier import units
from dbtier import engines
from dbtier.devices.pagecache import MIN_PAGE_CACHE
from dbtier.errors import UserError

MAX_FACTOR = 1e6


@dataclass(frozen=True)
class Scaled:
    """One size as given (the real system's) and as the run has it."""
    what: str
    system: float
    run: float
    unit: str
    floor: str = ""  # why the run's is more than system / F, if it is

    def describe(self) -> dict:
        out = {"what": self.what, "system": self.system, "run": self.run, "unit": self.unit}
        if self.floor:
            out["floor"] = self.floor
        return out


@dataclass
class ScaleModel:
    factor: float
    sizes: list[Scaled] = field(default_factory=list)

    def size(self, what: str, system: float, unit: str, minimum: float = 0.0, why: str = "") -> float:
        run = system / self.factor
        floor = ""
        if run < minimum:
            run, floor = minimum, why
        self.sizes.append(Scaled(what, system, run, unit, floor))
        return run

    def describe(self) -> dict:
        return {"factor": self.factor, "sizes": [s.describe() for s in self.sizes]}

    def profile(self, name: str, p: Profile) -> Profile:
        """An HDD's write cache divided, and its seeks stretched over the span the full-size data
        covered; other kinds keep their figures (nothing in a flash device depends on how much data
        it holds). An HDD's read segments are kept: they serve streams, whose number and length do not
        shrink with the data (one segment instead of sixteen made seed 000's scans 17% slower)."""
        if p.kind != "hdd":
            return p
        params = dict(p.params)
        # The data covers 1/F of the cylinders the full-size data did: each seek beyond a segment's
        # reach crosses F times as many (devmodel.c, span_scale), not the data's own few.
        params["span_scale"] = p.params["span_scale"] * self.factor
        self.sizes.append(Scaled(f"{name}: seek span (cylinders crossed beyond a segment's reach)", p.params["span_scale"],
                                 params["span_scale"], "x"))
        if p.params.get("write_cache", 0) > 0.5:
            # What a write cache holds shrinks with the data; how much of a stream it gathers into one
            # destage does not (a host's writes are no smaller at scale): at least a segment's worth.
            segment_mib = p.params["cache_mib"] / p.params["cache_segments"]
            params["write_cache_mib"] = self.size(f"{name}: write cache", p.params["write_cache_mib"], "MiB",
                                                  min(segment_mib, p.params["write_cache_mib"]),
                                                  "a drive gathers at least a segment of writes")
        return replace(p, params=params, summary=f"{p.summary} (scale model 1/{self.factor:g})")

    def page_cache(self, nbytes: float) -> float:
        return self.size("OS page cache (--page-cache)", nbytes, "bytes", MIN_PAGE_CACHE,
                         "the emulation's smallest page cache")


def check_factor(factor: float) -> None:
    if not (math.isfinite(factor) and 1.0 <= factor <= MAX_FACTOR):
        raise UserError(f"--scale-model {factor:g}: give how many times larger the real system's data is than "
                        f"this run's, from 1 (off) to {MAX_FACTOR:g}, for example --scale-model 1000")


def _kib_floor(nbytes: float) -> int:
    """A scaled size in whole kB (PostgreSQL's memory settings are kB), at least 1 kB."""
    return max(1, int(nbytes // 1024)) * 1024


def apply(factor: float, options, requests: list[DeviceSpec], engine: str = "postgres"):
    """The options and devices of a run at 1/factor of the system they describe, and the scale model's
    account (None when factor is 1: everything as given). The engine says which of its settings are
    sizes to divide, with their defaults and minimums."""
    check_factor(factor)
    if factor == 1.0:
        return options, requests, None
    model = ScaleModel(factor)
    db = engines.get(engine)
    cache = _kib_floor(model.size(f"{db.cache_setting} (--cache)", options.cache_bytes, "bytes", db.min_cache,
                                  f"{db.title}'s minimum"))
    page_cache = _kib_floor(model.page_cache(options.page_cache_bytes)) if options.page_cache_bytes else None
    sets = dict(options.sets)
    for name, (default, minimum, *why) in db.scaled_settings.items():
        given = sets.get(name, default).strip().strip("'\"")
        if given.isdigit():
            raise UserError(f"--set {name}={given}: with --scale-model give it with a unit (e.g. 64MB), so it can be "
                            "scaled")
        nbytes = model.size(name, units.parse_size(given, f"--set {name}"), "bytes", minimum,
                            why[0] if why else f"{db.title}'s minimum")
        sets[name] = units.kib(_kib_floor(nbytes))
    devices = [replace(r, profile=model.profile(r.name, r.profile)) for r in requests]
    return (replace(options, cache_bytes=cache, page_cache_bytes=page_cache, sets=sets, scale_model=model.describe()),
            devices, model)
