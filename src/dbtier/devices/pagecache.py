"""The emulated OS page cache of a run (native/iotap/pagecache.c): its settings, which the run's state
is built with (native.pc_config: struct dbt_pc_config)."""

from __future__ import annotations

from dataclasses import dataclass

from dbtier import units
from dbtier.devices import hostfs
from dbtier.errors import UserError
from dbtier.units import fmt_bytes

#: the least page cache the emulation takes
MIN_PAGE_CACHE = 64 << 10


@dataclass(frozen=True)
class PageCache:
    bytes: int
    readahead_kb: int = 128          # Linux's default read_ahead_kb
    dirty_background_pct: int = 10   # vm.dirty_background_ratio: the flusher starts
    dirty_pct: int = 20              # vm.dirty_ratio: writers are throttled
    dsync_data: bool = False         # every buffered write goes through to the device, as on a dsync device

    def describe(self) -> dict:
        return {"bytes": self.bytes, "readahead_kb": self.readahead_kb,
                "dirty_background_pct": self.dirty_background_pct, "dirty_pct": self.dirty_pct,
                "dsync_data": self.dsync_data}


def check_page_cache(pc_bytes: int, derived_from: str = "") -> int:
    """The emulated OS page cache's size: at least 64kB, no larger than this machine's memory (an OS
    page cache is part of it). `derived_from` names the option it was derived from, when it was."""
    shown = f"--page-cache {units.size_text(pc_bytes)}"
    if pc_bytes < MIN_PAGE_CACHE:
        raise UserError(f"{shown}: give at least 64kB")
    total = hostfs.mem_total()
    if total is not None and pc_bytes > total:
        raise UserError(f"{derived_from or shown}: an emulated OS page cache of {fmt_bytes(pc_bytes)} is larger than "
                        f"this machine's {fmt_bytes(total)} of memory; give a smaller --page-cache")
    return pc_bytes
