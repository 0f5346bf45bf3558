"""What a measured phase reports, live (pg.lab's measure) or predicted (predict.replay): one typed
shape, written out as the result documents' keys."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class PhaseResult:
    elapsed_s: float
    server_cpu_s: float       # the server's processes, less the emulation's spinning and the wait sampler
    io_wait_s: float          # time calls spent on the devices, summed over every I/O of every process
    devices: list[dict]       # measure.emulated: iostat, page cache, lateness, counters
    object_io: list[dict]     # measure.objects: per object and device
    emulation_spin_s: float = 0.0
    # live runs only: what a replay cannot know (None: left out of the document)
    client_cpu_s: float | None = None
    host_steal_s: float | None = None
    wait_events: dict | None = None
    top_events: list | None = None
    pg_stat_io: list | None = None
    pg_stat_wal: dict | None = None
    innodb_status: dict | None = None     # MariaDB: SHOW GLOBAL STATUS's InnoDB counters over the interval
    file_io: list | None = None           # MariaDB: performance_schema's I/O per file over the interval
    cpu_dilation_s: float | None = None  # --cpu-scale: the server's CPU time beyond this machine's (in server_cpu_s)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
