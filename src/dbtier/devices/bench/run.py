"""Runs iobench jobs on one device (emulated or real) with the chosen engines."""

from __future__ import annotations

import os
from pathlib import Path

from dbtier.devices import hostfs
from dbtier.devices.bench import engine_dbtier, engine_fio, engine_model
from dbtier.devices.bench.jobs import Job
from dbtier.devices.pagecache import PageCache
from dbtier.devices.session import Device, Session
from dbtier.measure import devices as device_figures
from dbtier.measure import diskstats

#: engines that run through the emulation, on files; "model" needs neither
ENGINES = {"dbtier": engine_dbtier, "fio": engine_fio}
CHUNK = 1 << 20


def lay_out(directory: Path, jobs: int, size: int) -> None:
    """Each worker's file, written in full (a sparse file would read from holes, not the device)."""
    block = os.urandom(CHUNK)
    for i in range(jobs):
        path = directory / f"iobench.{i}"
        if path.exists() and path.stat().st_size >= size:
            continue
        with open(path, "wb") as f:
            for off in range(0, size, CHUNK):
                f.write(block[: min(CHUNK, size - off)])
            f.flush()
            os.fsync(f.fileno())


def run_jobs(device: Device, jobs: list[Job], engines: list[str], page_cache_bytes: int, workdir: Path,
             progress, credits: float = 1.0) -> list[dict]:
    """Runs each job with each engine, a fresh emulation session each (in `workdir`, which the caller
    owns and removes); the model engine runs in simulated time, without files or a session. Each job
    starts with a capped volume's burst credits at `credits` (a fraction of a full bucket)."""
    if any(e in ENGINES for e in engines):
        lay_out(device.directory, max(j.jobs for j in jobs), max(j.size for j in jobs))
    disk = diskstats.block_device(device.directory) if device.profile.kind == "real" else None
    rows = []
    for n, job in enumerate(jobs):
        for engine in engines:
            progress(f"{job.label()} with {engine}")
            if engine == "model":
                rows.append({"job": job.__dict__, "engine": engine, **engine_model.run(job, device.profile, credits).asdict(),
                             "device": None})
                continue
            session = Session([device], workdir / f"session-{n}-{engine}",
                              page_cache=PageCache(page_cache_bytes, dsync_data=job.mode == "dsync"))
            try:
                session.create()
                if device.profile.kind == "real":
                    hostfs.evict_from_page_cache(device.directory)
                before = session.snapshot()
                disk_before = diskstats.read(disk) if disk else None
                figures = ENGINES[engine].run(job, device.directory, session.env(),
                                              begin=lambda: session.set_credits(credits))
                elapsed = figures.elapsed_s  # the measured loop: device figures over the same interval
                after = session.snapshot()
                row = {"job": job.__dict__, "engine": engine, **figures.asdict(),
                       "device": device_figures.rows([device], after, elapsed, before)[0]}
                if disk:
                    row["diskstats"] = {"block_device": disk, **diskstats.figures(disk_before, diskstats.read(disk),
                                                                                  elapsed)}
                rows.append(row)
            finally:
                session.remove()
    return rows
