"""The figures the emulation itself gives of an interval, live or replayed: per device (iostat,
page cache, lateness, raw counters) from two snapshots of the emulation's state, and per object from
the interval's trace records. A live run (pg.lab) and a prediction (predict.replay) both call this,
so their reports have one shape."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dbtier.measure import devices as device_figures
from dbtier.measure import objects


@dataclass
class EmulatedFigures:
    devices: list[dict]   # one row per device: iostat, page_cache, lateness, counters
    io_wait_s: float      # the calls' time on the devices, summed over all I/Os
    spin_s: float         # CPU the waits spent spinning (charged to the program, taken out of its CPU)
    object_io: list[dict]  # one row per object and device


def figures(devices, before: dict | None, after: dict, elapsed_s: float, records: np.ndarray | None,
            files: dict[int, str], names: dict, counted: np.ndarray | None = None,
            named: dict | None = None, name_of: objects.NameOf | None = None) -> EmulatedFigures:
    """devices: the session's Device list; before/after: state snapshots; records: the interval's trace
    records (measure.trace.RECORD), or counted: its I/O counted per file and device already
    (native.OBJIO_ROW: a replay counts it as it runs); files: file index -> path; names: (db,
    relfilenode) -> (name, kind); named: objects.table's cache of the files' names; name_of: another
    engine's naming of its files (objects.NameOf)."""
    rows = device_figures.rows(devices, after, elapsed_s, before)
    labels = [d.name for d in devices]
    per_object = objects.object_io(records, files, labels, names, name_of) if counted is None else \
        objects.table(counted, files, labels, names, named, name_of)
    return EmulatedFigures(rows, device_figures.wait_s(rows), device_figures.spin_s(rows), per_object)
