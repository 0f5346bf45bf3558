"""Advice checked by running it: the recorded run's workload, with its parameters, database cache, I/O
mode and settings, loaded once (as `dbtier compare` does) and run live on the slow and fast devices
in each placement, its measured figure beside the predicted one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

from dbtier import ownership
from dbtier.advisor.search import headline
from dbtier.devices.spec import DeviceSpec
from dbtier.errors import UserError
from dbtier.experiments import loaded, preflight
from dbtier.prediction import recording
from dbtier.prediction.recording import Recording
from dbtier.workloads import registry, restore
from dbtier.workloads.base import Workload
from dbtier.workloads.restore import UserWorkload


def _yours(path: Path, what: str) -> None:
    why = ownership.changeable_by_others(path)
    if why:
        raise UserError(f"--verify runs the recorded run again, and {what} {path} is not yours alone ({why}); "
                        "verify only runs you (or root) recorded, from files only you can change")


def check_trusted(rec: Recording) -> None:
    """A run that --verify makes again runs what the recording names (setup files, a dump, pgbench
    scripts, server settings): all of it must be the user's own, unchanged since it was recorded."""
    _yours(rec.run_dir, "the run directory")
    _yours(rec.run_dir / "result.json", "its result")
    workload_of(rec)  # its files, checked


def workload_of(rec: Recording) -> Workload:
    """The recorded run's workload, with its parameters as the run was given them; every file it names
    checked: absolute, yours, and what the run ran (its recorded sha256)."""
    cls = registry.get(rec.result["workload"])
    params = rec.result.get("params") or {}
    recorded = {(f.get("option"), f.get("path")): f.get("sha256") for f in rec.result.get("files") or []
                if isinstance(f, dict)}
    values = {}
    for p in cls.params:
        if p.key not in params:
            continue
        v = params[p.key]
        if p.type is Path and v is not None:
            for x in (v if isinstance(v, list) else [v]):
                if not Path(str(x)).is_absolute():
                    raise UserError(f"--verify runs the workload again, and the recording names its --{p.name} file "
                                    f"{x} by a relative path; record the run again with this dbtier")
            v = tuple(Path(x) for x in v) if isinstance(v, list) else Path(v)
        elif isinstance(v, list):
            v = tuple(v)
        values[p.key] = v
    workload = cls(**values)
    workload.for_engine(rec.lab.engine)  # as the run was told it (MariaDB's terminals, schema, checks)
    named = workload.user_files() if isinstance(workload, UserWorkload) else []
    for option, path in named:
        if not path.exists():
            raise UserError(f"--verify runs the workload again, and its file {path} is gone; run advise from "
                            "where the run was made, or without --verify")
        _yours(path, f"its --{option} file")
        for inner in (path.iterdir() if path.is_dir() else ()):  # a directory-format dump's files
            _yours(inner, f"its --{option} file")
        digest = recorded.get((option, str(path)))
        if digest is None:
            raise UserError(f"--verify runs the workload again, and the recording has no fingerprint of its --{option} "
                            f"file {path}; record the run again with this dbtier")
        if restore.fingerprint(path) != digest:
            raise UserError(f"--verify runs the workload again, and its --{option} file {path} has changed since the "
                            "run was recorded; record the run again")
    return workload


def options_of(rec: Recording, workspace: Path | None):
    """The recorded lab's options, checked as the command line's are when the recording was loaded
    (its --set settings as --set checks them: a recording cannot open what a command line could not)."""
    return recording.lab_options(rec, workspace)


def check(rec: Recording, devices: list[DeviceSpec], placements: list, workspace: Path | None) -> None:
    """What a live run would refuse, refused before any prediction."""
    check_trusted(rec)
    workload, options = workload_of(rec), options_of(rec, workspace)
    engine = rec.lab.engine
    seeded = loaded.loads_a_seed(workload, options, engine)  # verify loads once, as compare does
    for placement in placements:
        preflight.check_run(workload, devices, placement, options, rec.result.get("cache_state", "cold"), engine,
                            seeded=seeded)


def run(rec: Recording, devices: list[DeviceSpec], placements: list[tuple], output: Path,
        workspace_path: Path | None, workspace, say: Callable[[str], None], progress_for,
        cluster: str | None = None) -> list[dict]:
    """Each (label, placement) run live, on `devices` or on its own (label, placement, devices); returns
    per placement its run directory, measured figure and result. workspace: the opened Workspace (of
    workspace_path); progress_for(prefix): a context giving a Progress for one run. cluster: a Ray
    address: each run on a node of it (its data loaded there), after each node's reference run."""
    if cluster:
        return _run_on_cluster(rec, devices, placements, output, cluster, say)
    from dbtier.report import jsonout, runview
    from dbtier.report.rundir import run_dir
    from dbtier.experiments.runner import run_workload

    workload, options = workload_of(rec), options_of(rec, workspace_path)
    cache_state = rec.result.get("cache_state", "cold")
    out = []
    from dbtier.experiments.loaded import loaded_seed

    engine = rec.lab.engine
    with loaded_seed(workload, options, engine, lambda: progress_for("setup, once: "), say) as (seed, kept):
        for label, placement, *own in placements:
            with run_dir(output, f"{workload.name}-{label}", workspace) as folder:
                with progress_for(f"{label}: ") as progress:
                    result = run_workload(workload, own[0] if own else devices, placement,
                                          replace(options, seed=seed), progress, folder.path, say, cache_state,
                                          engine)
                if kept is not None:
                    result["loaded_cluster"] = kept
                jsonout.write(folder.path / "result.json", result)
                runview.write_page(folder.path / "report.html", f"dbtier advise, verifying {label}", result)
            folder.check()
            out.append(_figures(label, folder.final, result))
    return out


def _figures(label: str, run_dir: Path, result: dict) -> dict:
    phases = result.get("phases") or [result]
    metric, value, _higher = headline([{"measured": p} for p in phases], "measured")
    return {"label": label, "run_dir": str(run_dir), "metric": metric, "measured": value,
            "elapsed_s": result["elapsed_s"], "scripts": _scripts(result.get("metrics") or {})}


def _run_on_cluster(rec: Recording, devices: list[DeviceSpec], placements: list, output: Path, cluster: str,
                    say: Callable[[str], None]) -> list[dict]:
    """The recorded run's experiment (its experiment.toml) on each placement's devices, on the cluster."""
    import json

    from dbtier.cluster import runs as cluster_runs
    from dbtier.experiments.experiment import Experiment

    base = Experiment.load(rec.run_dir)
    experiments = [replace(base, devices=tuple(own[0] if own else devices), placement=placement)
                   for _label, placement, *own in placements]
    with cluster_runs.connected(cluster, output, say) as (pool, _nodes):
        finished = cluster_runs.run_jobs(pool, list(range(len(experiments))), lambda i: experiments[i].to_toml(),
                                         output, say, lambda i: placements[i][0])
    by_index = {i: run_dir for i, run_dir, _node in finished}
    return [_figures(placements[i][0], by_index[i], json.loads((by_index[i] / "result.json").read_text()))
            for i in range(len(placements))]


def _scripts(metrics: dict) -> dict | None:
    """Each script's or transaction type's latency figures; a replay's per statement class ('class 12')."""
    if metrics.get("scripts"):
        return metrics["scripts"]
    classes = metrics.get("classes")
    return {f"class {c['class_id']}": c for c in classes} if classes else None
