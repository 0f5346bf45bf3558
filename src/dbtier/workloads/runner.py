"""One workload, one lab, one result: prepare (unmeasured), restart cold, measure the run, record
where every object sits, and keep the server log (and trace) beside the result."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from dbtier.pg.lab import DeviceRequest, Lab, LabOptions
from dbtier.pg.placement import Placement
from dbtier.workloads.base import Progress, Workload


CACHE_STATES = ("cold", "hot", "cross")


def run_workload(workload: Workload, requests: list[DeviceRequest], placement: Placement, options: LabOptions,
                 progress: Progress, artifacts: Path | None = None, say: Callable[[str], None] = print,
                 cache_state: str = "cold") -> dict:
    """cache_state (seed 001): cold, restarted with empty caches; hot, the workload run once before
    the measured run; cross, a different query over the same data run before it."""
    placement.check_objects(workload.objects, workload.name)
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    progress.phase("starting PostgreSQL on the devices")
    lab = Lab(requests, placement, options, say)
    try:
        with lab:
            workload.prepare(lab, progress)
            progress.phase("restarting the server: cold cache")
            lab.restart_cold()
            if cache_state != "cold":
                with lab.warm():
                    if cache_state == "hot":
                        workload.run(lab, progress)
                    else:
                        workload.warm_cross(lab, progress)
            with lab.measure() as m:
                metrics = workload.run(lab, progress)
            objects = lab.object_placement(list(workload.objects))
            measured = m.result
            result = {
                "kind": "run", "workload": workload.name, "seed": workload.seed, "params": dict(workload.p),
                "cache_state": cache_state,
                "started": started, "lab": lab.describe(), "objects": objects, **measured, "metrics": metrics,
                "rates": workload.rates(metrics, measured["elapsed_s"]),
            }
            if artifacts is not None and lab.save_trace(artifacts / "trace.parquet", {"workload": workload.name}):
                result["trace"] = "trace.parquet"
    finally:
        if artifacts is not None:  # the server log helps most when something failed
            (artifacts / "server.log").write_text(lab.server_log())
    return result

