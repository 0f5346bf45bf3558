"""Advice checked by running it: the recorded run's workload, with its parameters, database cache, I/O
mode and settings, loaded once (as `dbtier compare` does) and run live on the slow and fast devices
in each placement, its measured figure beside the predicted one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

from dbtier.advise.search import headline
from dbtier.devices.spec import DeviceSpec
from dbtier.errors import UserError
from dbtier.pg import capacity
from dbtier.pg.lab import LabOptions
from dbtier.pg.placement import Placement
from dbtier.predict.recording import Recording
from dbtier.workloads import compare as compare_mod
from dbtier.workloads import registry
from dbtier.workloads.base import Workload


def workload_of(rec: Recording) -> Workload:
    """The recorded run's workload, with its parameters as the run was given them."""
    cls = registry.get(rec.result["workload"])
    params = rec.result.get("params") or {}
    values = {}
    for p in cls.params:
        if p.key not in params:
            continue
        v = params[p.key]
        if p.type is Path and v is not None:
            v = tuple(Path(x) for x in v) if isinstance(v, list) else Path(v)
            for f in (v if isinstance(v, tuple) else (v,)):
                if not f.exists():
                    raise UserError(f"--verify runs the workload again, and its file {f} is gone; run advise from "
                                    "where the run was made, or without --verify")
        elif isinstance(v, list):
            v = tuple(v)
        values[p.key] = v
    return cls(**values)


def options_of(rec: Recording, workspace: Path | None) -> LabOptions:
    lab = rec.result["lab"]
    page_cache = (lab.get("page_cache") or {}).get("bytes")
    return LabOptions(cache=f"{int(lab['cache_bytes']) // 1024}kB", io_mode=lab.get("io_mode", "direct"),
                      page_cache=f"{int(page_cache) // 1024}kB" if page_cache else None,
                      sets=dict(lab.get("user_settings") or {}), workspace=workspace,
                      cpu_scale=float(lab.get("cpu_scale", 1.0)))


def check(rec: Recording, devices: list[DeviceSpec], placements: list[Placement], workspace: Path | None) -> None:
    """What a live run would refuse, refused before any prediction."""
    workload, options = workload_of(rec), options_of(rec, workspace)
    for placement in placements:
        capacity.check_run(workload, devices, placement, options, rec.result.get("cache_state", "cold"))


def run(rec: Recording, devices: list[DeviceSpec], placements: list[tuple[str, Placement]], output: Path,
        workspace_path: Path | None, workspace, say: Callable[[str], None], progress_for) -> list[dict]:
    """Each (label, placement) run live; returns per placement its run directory and measured figure.
    workspace: the opened Workspace (of workspace_path); progress_for(prefix): a context giving a
    Progress for one run."""
    from dbtier.report import jsonout, runview
    from dbtier.report.rundir import run_dir
    from dbtier.workloads.runner import run_workload

    workload, options = workload_of(rec), options_of(rec, workspace_path)
    cache_state = rec.result.get("cache_state", "cold")
    out = []
    with compare_mod.seed_lab(options, say) as seed_lab:
        with progress_for("setup, once: ") as progress:
            workload.prepare(seed_lab.handle, progress)
        seed = seed_lab.seed()
        for label, placement in placements:
            with run_dir(output, f"{workload.name}-{label}", workspace) as folder:
                with progress_for(f"{label}: ") as progress:
                    result = run_workload(workload, devices, placement, replace(options, seed=seed), progress,
                                          folder.path, say, cache_state)
                jsonout.write(folder.path / "result.json", result)
                runview.write_page(folder.path / "report.html", f"dbtier advise, verifying {label}", result)
            phases = result.get("phases") or [result]
            metric, value, higher = headline([{"measured": p} for p in phases], "measured")
            out.append({"label": label, "run_dir": str(folder.final), "metric": metric, "measured": value,
                        "elapsed_s": result["elapsed_s"]})
    return out
