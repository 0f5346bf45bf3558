"""One workload on several layouts, its data loaded once (see experiments/compare.py for the
layouts and their figures): each layout measured into a run directory of its own, then the
comparison's own run directory beside them.

    comparison = run_comparison(experiments, names, output)   # each layout's Experiment, checked first
    comparison.doc, comparison.run_dir

`dbtier compare` and `dbtier.compare()` call it. Interrupted, the layouts finished so far keep their
run directories (named on the KeyboardInterrupt, as `kept_run_dirs`)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from dbtier.errors import UserError
from dbtier.experiments import compare as compare_mod
from dbtier.experiments import loaded, runner
from dbtier.experiments.experiment import EXPERIMENT_FILE, Experiment
from dbtier.workloads.base import QuietProgress


@dataclass
class Comparison:
    doc: dict            # the comparison's result.json
    names: list[str]     # the layouts, in order
    results: list[dict]  # each layout's result, as one row (compare.overall)
    run_dir: Path
    failure: str | None = None  # why a run directory is in the workspace, not the output folder

    def check(self) -> None:
        if self.failure:
            raise UserError(self.failure)


def _quiet(_prefix: str = ""):
    return contextlib.nullcontext(QuietProgress())


def run_comparison(layouts: list[Experiment], names: list[str], output: Path = Path("results"),
                   workspace: Path | None = None, progress_for: Callable = _quiet,
                   say: Callable[[str], None] = print, reuse: bool = True) -> Comparison:
    """Runs each layout (an Experiment of the same workload, options and cache state, with its own
    devices and placement) on a copy of one loaded cluster. progress_for(prefix): a context giving
    a Progress."""
    from dbtier.report import compareview, html, jsonout, outputs, runview, verdict
    from dbtier.report.rundir import run_dir
    from dbtier.workspace import Workspace, write_private

    # every check before anything is made; the data loads once, in a seed lab beside each layout's copy
    checked = [runner.check(exp, workspace, seeding="shared" if reuse else "fresh") for exp in layouts]
    workload, options = checked[0][0], checked[0][1]  # the same for every layout, its devices scaled with it
    outputs.check_dir(output, "--output")
    ws = Workspace.open(workspace)
    name = layouts[0].workload
    results, run_dirs = [], []
    try:
        with loaded.loaded_seed(workload, options, layouts[0].engine, lambda: progress_for("setup, once: "),
                                say, keep=reuse) as (seed, kept):
            for label, exp, (_w, _o, devices) in zip(names, layouts, checked):
                with run_dir(output, f"{name}-{label}", ws) as folder:
                    with progress_for(f"{label}: ") as progress:
                        result = runner.run_workload(workload, devices, exp.placement, replace(options, seed=seed),
                                                     progress, folder.path, say, engine=exp.engine)
                    if kept is not None:
                        result["loaded_cluster"] = kept
                    result["configuration"] = compare_mod.Config(label, list(exp.devices), exp.placement).describe()
                    write_private(folder.path / EXPERIMENT_FILE, exp.to_toml(), mode=0o644)
                    jsonout.write(folder.path / "result.json", result)
                    runview.write_page(folder.path / "report.html", f"dbtier compare {name}: {label}", result)
                results.append(result)
                run_dirs.append(str(folder.final))
                figure, value, _higher = compare_mod.headline(result)
                say(f"{label}: {figure} {value:.4g} ({folder.final})")
                folder.check()
    except KeyboardInterrupt as exc:
        exc.kept_run_dirs = list(run_dirs)
        raise
    rows = [compare_mod.overall(r) for r in results]
    doc = {"kind": "compare", "workload": name,
           "configurations": [compare_mod.Config(n, list(e.devices), e.placement).describe()
                              for n, e in zip(names, layouts)],
           "run_dirs": run_dirs, "speedups": compare_mod.speedups(rows),
           "headline": compare_mod.headline(rows[0])[0],
           "results": [{k: r[k] for k in ("elapsed_s", "server_cpu_s", "io_wait_s", "devices", "top_events", "rates")}
                       | {"metrics": r.get("metrics")} for r in rows]}
    with run_dir(output, f"compare-{name}", ws) as folder:
        jsonout.write(folder.path / "result.json", doc)
        html.write(folder.path / "report.html", f"dbtier compare {name}", rows[0]["started"],
                   compareview.sections(names, rows, run_dirs),
                   verdict.compare(names, rows, doc["speedups"], doc["headline"]))
    return Comparison(doc, names, rows, folder.final, folder.failure)
