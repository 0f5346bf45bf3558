"""One workload, one lab, one result: prepare (unmeasured), then each phase from its cache state,
measured; the workload's checks; where every object sits; the server log (and trace) beside it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from dbtier.run import preflight
from dbtier.pg.lab import Lab, LabOptions
from dbtier.devices.spec import DeviceSpec
from dbtier.pg.placement import Placement
from dbtier.workloads.base import Progress, Workload

#: figures that add up over phases
_SUMS = ("elapsed_s", "server_cpu_s", "emulation_spin_s", "io_wait_s", "client_cpu_s", "host_steal_s")


def _plain(params: dict) -> dict:
    """Parameters as JSON holds them: paths as text, repeated ones as lists."""
    def one(v):
        return str(v) if isinstance(v, Path) else v
    return {k: [one(x) for x in v] if isinstance(v, (tuple, list)) else one(v) for k, v in params.items()}


def run_workload(workload: Workload, requests: list[DeviceSpec], placement: Placement, options: LabOptions,
                 progress: Progress, artifacts: Path | None = None, say: Callable[[str], None] = print,
                 cache_state: str = "cold") -> dict:
    """cache_state (seed 001): cold, restarted with empty caches; hot, the workload run once before
    the measured run; cross, a different query over the same data run before it."""
    # What the lab would refuse, and room for the data, before it starts (the CLI asks first, before
    # it makes anything; this is for every other caller).
    preflight.check_run(workload, requests, placement, options, cache_state)
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    progress.phase("starting PostgreSQL on the devices")
    lab = Lab(requests, placement, options, say)
    try:
        with lab:
            db = lab.handle
            if options.seed is None:
                workload.prepare(db, progress)
            moved = []
            if workload.user_objects or options.seed is not None:  # a copied cluster's objects move too
                progress.phase("placing the objects")
                moved = lab.place_objects()
            progress.phase("recycling WAL segments ahead of the measurement")
            recycled = lab.recycle_wal(workload.footprint(cache_state).wal)
            phases = []
            for phase in workload.phases(cache_state):
                if phase.cold:
                    progress.phase("restarting the server: cold cache")
                    lab.restart_cold()
                if phase.warm is not None:
                    with lab.warm():
                        phase.warm(db, progress)
                with lab.measure(label=phase.name) as m:
                    metrics = phase.run(db, progress)
                phases.append({"phase": phase.name, **m.result, "metrics": metrics,
                               "rates": workload.rates(metrics, m.result["elapsed_s"], phase.name, m.result)})
            progress.phase("checking the result")
            checks = workload.verify(db)
            # what pg_wal holds at the end (a device given the WAL needs this much, and room up to max_wal_size)
            wal_bytes = int(db.execute("SELECT coalesce(sum(size), 0) FROM pg_ls_waldir()")[0][0])
            # the system catalogs (with their indexes and TOAST), which go where `data` goes
            catalog_bytes = int(db.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname IN ('pg_catalog', 'information_schema') AND c.relkind IN ('r', 'm')")[0][0])
            result = {
                "kind": "run", "workload": workload.name, "seed": workload.seed, "params": _plain(workload.p),
                "cache_state": cache_state, "started": started, "lab": lab.describe(),
                "objects": ([o.describe() for o in db.objects()] if workload.user_objects
                            else lab.object_placement(list(workload.objects))),
                "checks": checks, "wal_bytes": wal_bytes, "wal_recycled_segments": recycled,
                "catalog_bytes": catalog_bytes, **({"moved": moved} if moved else {}),
                **({"notes": workload.notes()} if workload.notes() else {}),
                **({"files": workload.files()} if workload.files() else {}),
            }
            if len(phases) == 1:
                result.update(phases[0])  # its name too: a user's file may name its one phase
            else:
                result.update({k: sum(ph[k] for ph in phases) for k in _SUMS})
                result["phases"] = phases
            if artifacts is not None and lab.save_trace(artifacts / "trace.parquet", {"workload": workload.name}):
                result["trace"] = "trace.parquet"
    finally:
        if artifacts is not None:  # the server log helps most when something failed
            (artifacts / "server.log").write_text(lab.server_log())
    return result
