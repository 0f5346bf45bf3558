"""The emulated OS page cache of a run (native/iotap/pagecache.c): its settings, which the run's state
is built with (native.pc_config: struct dbt_pc_config)."""

from __future__ import annotations

from dataclasses import dataclass


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
