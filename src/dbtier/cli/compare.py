"""`dbtier compare WORKLOAD`: one workload on several layouts, loaded once, side by side."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from dbtier.cli.progress import progress_for
from dbtier.cli.run import LAYOUT_OPTIONS, WorkloadGroup, experiment_of
from dbtier.report import jsonout, outputs
from dbtier.report.rundir import run_dir
from dbtier.report.terminal import console, show
from dbtier.experiments import compare as compare_mod
from dbtier.experiments import runner
from dbtier.experiments.experiment import EXPERIMENT_FILE
from dbtier.experiments.runner import run_workload
from dbtier.workspace import Workspace, write_private

CONFIG_OPTIONS = (
    click.option("--config", "configs", multiple=True, metavar="NAME:DEVICES[:PLACEMENT]",
                 help="a layout: its name, its devices (comma-separated NAME=PROFILE) and where things go "
                      "(comma-separated KEY=DEVICE; default: all on the first device). Repeatable; the first "
                      "is the baseline"),
    click.option("--experiment", type=click.Path(path_type=Path),
                 help="a TOML file of [[config]] tables (name, devices, place), after the --config ones"),
)


class CompareGroup(WorkloadGroup):
    skip = LAYOUT_OPTIONS
    extra = CONFIG_OPTIONS

    @staticmethod
    def execute(cls, kw):
        return execute(cls, kw)


@click.group("compare", cls=CompareGroup, context_settings={"max_content_width": 100})
def compare() -> None:
    """Run one workload on several layouts and print them side by side.

    \b
    Examples:
      dbtier compare pgbench -i -s 5 -c 4 -T 30 \\
          --config all-hdd:hdd=hdd-sata-7200 \\
          --config idx-ssd:hdd=hdd-sata-7200,ssd=ssd-sata-mlc:data=hdd,indexes=ssd \\
          --config all-ssd:ssd=ssd-sata-mlc
      dbtier compare sql --setup schema.sql --run work.sql --experiment layouts.toml

    The workload's setup runs once; each layout gets a copy of the loaded cluster on its own devices,
    its objects moved where the layout says (the emulation paused), a cold restart, and the measured
    run. Each layout keeps its own run directory; the comparison (table, report.html with the layouts
    charted side by side) goes in OUTPUT/compare-WORKLOAD-<time>/. Interrupted, the layouts finished
    so far keep their run directories."""


def execute(cls, kw: dict) -> Path:
    out = console(wide=kw["wide"])
    configs = compare_mod.configurations(kw["configs"], kw["experiment"])
    # one experiment per layout: the command line's, with the layout's devices and placement
    base = experiment_of(cls, {**kw, "devices": (), "places": (), "cache_state": "cold"},
                         devices=configs[0].devices, placement=configs[0].placement)
    layouts = [replace(base, devices=tuple(c.devices), placement=c.placement) for c in configs]
    say = (lambda _line: None) if kw["quiet"] else (lambda line: out.print(line, markup=False))
    checked = [runner.check(exp, kw["workspace"]) for exp in layouts]  # every check before anything is made
    workload = checked[0][0]
    options = checked[0][1]  # the same for every layout (each one's devices scaled with it)
    outputs.check_dir(kw["output"], "--output")
    if kw["json_path"]:
        kw["json_path"] = outputs.check_file(kw["json_path"], "--json")
    workspace = Workspace.open(kw["workspace"])
    from dbtier.report import html, runview  # matplotlib: loaded once there is something to chart

    results, run_dirs = [], []
    try:
        with compare_mod.seed_lab(options, say) as seed_lab:
            with progress_for(out, kw["quiet"], prefix="setup, once: ") as progress:
                workload.prepare(seed_lab.handle, progress)
            seed = seed_lab.seed()
            for c, exp, (_w, _o, devices) in zip(configs, layouts, checked):
                with run_dir(kw["output"], f"{cls.name}-{c.name}", workspace) as folder:
                    with progress_for(out, kw["quiet"], prefix=f"{c.name}: ") as progress:
                        result = run_workload(workload, devices, c.placement, replace(options, seed=seed), progress,
                                              folder.path, say)
                    result["configuration"] = c.describe()
                    write_private(folder.path / EXPERIMENT_FILE, exp.to_toml(), mode=0o644)
                    jsonout.write(folder.path / "result.json", result)
                    runview.write_page(folder.path / "report.html", f"dbtier compare {cls.name}: {c.name}", result)
                results.append(result)
                run_dirs.append(str(folder.final))
                say(f"{c.name}: {compare_mod.headline(result)[0]} {compare_mod.headline(result)[1]:.4g} "
                    f"({folder.final})")
                folder.check()
    except KeyboardInterrupt:
        for d in run_dirs:
            out.print(f"kept: {d}", markup=False)
        raise
    names = [c.name for c in configs]
    results = [compare_mod.overall(r) for r in results]
    from dbtier.report import compareview, verdict

    doc = {"kind": "compare", "workload": cls.name, "configurations": [c.describe() for c in configs],
           "run_dirs": run_dirs, "speedups": compare_mod.speedups(results),
           "headline": compare_mod.headline(results[0])[0],
           "results": [{k: r[k] for k in ("elapsed_s", "server_cpu_s", "io_wait_s", "devices", "top_events", "rates")}
                       | {"metrics": r.get("metrics")} for r in results]}
    with run_dir(kw["output"], f"compare-{cls.name}", workspace) as folder:
        jsonout.write(folder.path / "result.json", doc)
        html.write(folder.path / "report.html", f"dbtier compare {cls.name}", results[0]["started"],
                   compareview.sections(names, results, run_dirs),
                   verdict.compare(names, results, doc["speedups"], doc["headline"]))
    for line in verdict.compare(names, results, doc["speedups"], doc["headline"]):
        out.print(line, markup=False)
    show(out, compareview.table_data(names, results))
    show(out, compareview.device_data(names, results))
    out.print(f"comparison: {folder.final} (result.json, report.html); each layout's own run directory beside it",
              markup=False)
    if kw["json_path"]:
        jsonout.write(kw["json_path"], {**doc, "run_dir": str(folder.final)})
    folder.check()
    return folder.final
