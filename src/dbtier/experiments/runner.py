"""One workload, one lab, one result: prepare (unmeasured), then each phase from its cache state,
measured; the workload's checks; where every object sits; the server log (and trace) beside it.

    outcome = run(experiment, output=Path("results"))   # checked first, then run, then published
    outcome.result, outcome.run_dir                      # the result document and its run directory

`run` is what `dbtier run` and `dbtier.run()` call; `run_workload` is one lab's part of it, which
compare and advise --verify call for each layout."""

from __future__ import annotations

import contextlib
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from dbtier import engines
from dbtier.devices.spec import DeviceSpec
from dbtier.errors import UserError
from dbtier.experiments import loaded, preflight, scale_model
from dbtier.experiments.experiment import EXPERIMENT_FILE, Experiment
from dbtier.workloads.base import Progress, QuietProgress, Workload, check_cache_state

#: figures that add up over phases
_SUMS = ("elapsed_s", "server_cpu_s", "emulation_spin_s", "io_wait_s", "client_cpu_s", "host_steal_s")


def _plain(params: dict) -> dict:
    """Parameters as JSON holds them: paths as text, repeated ones as lists."""
    def one(v):
        return str(v) if isinstance(v, Path) else v
    return {k: [one(x) for x in v] if isinstance(v, (tuple, list)) else one(v) for k, v in params.items()}


def run_workload(workload: Workload, requests: list[DeviceSpec], placement, options, progress: Progress,
                 artifacts: Path | None = None, say: Callable[[str], None] = print, cache_state: str = "cold",
                 engine: str = "postgres") -> dict:
    """cache_state (seed 001): cold, restarted with empty caches; hot, the workload run once before
    the measured run; cross, a different query over the same data run before it."""
    # What the lab would refuse, and room for the data, before it starts (the CLI asks first, before
    # it makes anything; this is for every other caller).
    preflight.check_run(workload, requests, placement, options, cache_state, engine)
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    db_engine = engines.get(engine)
    progress.phase(f"starting {db_engine.name} on the devices")
    lab = db_engine.lab(requests, placement, options, say)
    try:
        with lab:
            db = lab.handle
            if options.seed is None:
                workload.prepare(db, progress)
            # Every object where the placement says, whoever made it: a user's setup, a copied cluster, or a
            # built-in that created it elsewhere (it moves only what is misplaced: nothing, for one that
            # gave each object its tablespace as it made it).
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
            result = {
                "kind": "run", "workload": workload.name, "seed": workload.seed, "params": _plain(workload.p),
                "cache_state": cache_state, "started": started, "lab": lab.describe(),
                "objects": ([o.describe() for o in db.objects()] if workload.user_objects
                            else lab.object_placement(list(workload.objects))),
                "checks": checks, **lab.end_figures(), "wal_recycled_segments": recycled,
                **({"moved": moved} if moved else {}),
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
            if artifacts is not None:
                for name, kept in workload.outputs().items():  # a client's own output, before the lab goes
                    if isinstance(kept, bytes):
                        (artifacts / name).write_bytes(kept)
                    else:
                        shutil.copyfile(kept, artifacts / name, follow_symlinks=False)
    finally:
        if artifacts is not None:  # the server log helps most when something failed
            (artifacts / "server.log").write_text(lab.server_log())
    return result


def lab_options(exp: Experiment, workspace: Path | None = None, keep: bool = False):
    """The lab's options and devices for an experiment, its scale model applied: (options, devices,
    the scale model or None)."""
    options = engines.get(exp.engine).lab_options(
        cache_bytes=exp.cache_bytes, io_mode=exp.io_mode, page_cache_bytes=exp.page_cache_bytes,
        sets={**(exp.production["applied"] if exp.production else {}), **exp.settings},  # --set wins
        pg_bin=exp.pg_bin, mariadb_bin=exp.mariadb_bin, workspace=workspace, trace=exp.trace, keep=keep,
        cpu_scale=exp.cpu_scale, credits=exp.credits, production=exp.production)
    return scale_model.apply(exp.scale_factor, options, list(exp.devices), exp.engine)


def check(exp: Experiment, workspace: Path | None = None, keep: bool = False, seeding: str | None = None):
    """Everything the run would refuse, refused before anything is made: (workload, options, devices).
    seeding: how the data will be loaded (experiments/loaded.py): None, in the run's own lab; "kept", a
    user's load kept for later runs, or a kept one used; "shared", in a seed lab several runs copy
    (compare, verify), kept or used as "kept"; "fresh", in a seed lab, neither kept nor used."""
    workload = exp.make_workload()
    preflight.check_engine(workload, exp.engine)
    db_engine = engines.get(exp.engine)
    if seeding in ("shared", "fresh") and not db_engine.shares_loads:
        raise UserError(f"several layouts of one load (compare, advise --verify): not with --engine {exp.engine} yet; "
                        "run each layout with dbtier run")
    if not db_engine.keeps_loads:  # nothing kept: a single run loads its own, several share a fresh load
        seeding = "fresh" if seeding in ("shared", "fresh") else None
    check_cache_state(workload, exp.cache_state)
    options, requests, _ = lab_options(exp, workspace, keep)
    seeded = seeding == "fresh" or (seeding in ("shared", "kept") and loaded.loads_a_seed(
        workload, options, exp.engine, kept_only=seeding == "kept"))
    preflight.check_run(workload, requests, exp.placement, options, exp.cache_state, exp.engine, seeded=seeded)
    return workload, options, requests


@dataclass
class Outcome:
    result: dict
    run_dir: Path
    failure: str | None = None  # why the run directory is in the workspace, not the output folder

    def check(self) -> None:
        """After the caller reported the run: the one line saying its results could not be published."""
        if self.failure:
            raise UserError(self.failure)


def _quiet_progress():
    return contextlib.nullcontext(QuietProgress())


def run(exp: Experiment, output: Path = Path("results"), workspace: Path | None = None, keep: bool = False,
        progress_for: Callable = _quiet_progress, say: Callable[[str], None] = print, reuse: bool = True,
        production: Path | None = None) -> Outcome:
    """Runs an experiment into a new run directory under `output` (result.json, report.html,
    server.log, experiment.toml, and trace.parquet with trace on). progress_for(): a context giving
    a Progress. reuse: a user's load is kept, or a kept one of the same used (experiments/loaded.py).
    production: a stats delta the run is put beside (result.json's `production`)."""
    from dbtier.report import jsonout, outputs, runview
    from dbtier.report.rundir import run_dir
    from dbtier.workspace import Workspace, write_private

    reuse = reuse and engines.get(exp.engine).keeps_loads
    workload, options, requests = check(exp, workspace, keep, seeding="kept" if reuse else None)
    outputs.check_dir(output, "--output")
    delta = None
    if production is not None:  # read and checked before the run, which it cannot change
        from dbtier.production import delta as delta_mod

        delta = delta_mod.read(production)
    identity = workload.load_identity() if options.seed is None and reuse else None
    with run_dir(output, exp.workload, Workspace.open(workspace)) as folder:
        # a user's load is kept, and a kept one of the same used instead of loading (experiments/loaded.py)
        seeding = (loaded.loaded_seed(workload, options, exp.engine, progress_for, say, identity=identity)
                   if identity is not None else contextlib.nullcontext((None, None)))
        with seeding as (seed, kept), progress_for() as progress:
            result = run_workload(workload, requests, exp.placement,
                                  replace(options, seed=seed) if seed is not None else options, progress,
                                  folder.path, say, cache_state=exp.cache_state, engine=exp.engine)
        if kept is not None:
            result["loaded_cluster"] = kept
        if delta is not None:
            from dbtier.production import labcompare

            result["production"] = labcompare.compare(delta, result)
        write_private(folder.path / EXPERIMENT_FILE, exp.to_toml(), mode=0o644)
        jsonout.write(folder.path / "result.json", result)
        runview.write_page(folder.path / "report.html", f"dbtier run {exp.workload}", result)
    return Outcome(result, folder.final, folder.failure)
