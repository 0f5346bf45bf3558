"""One workload on several layouts, its data loaded once (see experiments/compare.py for the
layouts and their figures): each layout measured into a run directory of its own, then the
comparison's own run directory beside them.

    comparison = run_comparison(experiments, names, output)   # each layout's Experiment, checked first
    comparison.doc, comparison.run_dir

`dbtier compare` and `dbtier.compare()` call it. Interrupted, the layouts finished so far keep their
run directories (named on the KeyboardInterrupt, as `kept_run_dirs`)."""

from __future__ import annotations

import contextlib
import json
import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from dbtier.errors import UserError
from dbtier.experiments import compare as compare_mod
from dbtier.experiments import loaded, runner
from dbtier.experiments.breakdown import breakdown
from dbtier.report.terminal import fmt
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
                   say: Callable[[str], None] = print, reuse: bool = True, repeat: int = 1,
                   order_seed: int = 0) -> Comparison:
    """Runs each layout (an Experiment of the same workload, options and cache state, with its own
    devices and placement) on a copy of one loaded cluster. progress_for(prefix): a context giving
    a Progress. repeat=N: each layout N times, every run in an order shuffled with order_seed (so a
    drift of the host over time falls on every layout alike); each layout is then its median run,
    with the spread of all."""
    if not 1 <= repeat <= REPEAT_MAX:
        raise UserError(f"--repeat {repeat}: from 1 to {REPEAT_MAX} runs of each layout")
    from dbtier.report import jsonout, outputs, runview
    from dbtier.report.rundir import run_dir
    from dbtier.workspace import Workspace, write_private

    # every check before anything is made; the data loads once, in a seed lab beside each layout's copy
    checked = [runner.check(exp, workspace, seeding="shared" if reuse else "fresh") for exp in layouts]
    workload, options = checked[0][0], checked[0][1]  # the same for every layout, its devices scaled with it
    outputs.check_dir(output, "--output")
    ws = Workspace.open(workspace)
    name = layouts[0].workload
    order = [(i, k) for k in range(repeat) for i in range(len(layouts))]
    if repeat > 1:
        random.Random(order_seed).shuffle(order)
    runs: list[list[tuple[dict, str]]] = [[] for _ in layouts]
    run_dirs: list[str] = []
    try:
        with loaded.loaded_seed(workload, options, layouts[0].engine, lambda: progress_for("setup, once: "),
                                say, keep=reuse) as (seed, kept):
            for i, k in order:
                label, exp, devices = names[i], layouts[i], checked[i][2]
                tag = label if repeat == 1 else f"{label}-r{k + 1}"
                with run_dir(output, f"{name}-{tag}", ws) as folder:
                    with progress_for(f"{tag}: ") as progress:
                        result = runner.run_workload(workload, devices, exp.placement, replace(options, seed=seed),
                                                     progress, folder.path, say, engine=exp.engine)
                    if kept is not None:
                        result["loaded_cluster"] = kept
                    result["configuration"] = compare_mod.Config(label, list(exp.devices), exp.placement).describe()
                    write_private(folder.path / EXPERIMENT_FILE, exp.to_toml(), mode=0o644)
                    jsonout.write(folder.path / "result.json", result)
                    runview.write_page(folder.path / "report.html", f"dbtier compare {name}: {label}", result)
                runs[i].append((result, str(folder.final)))
                run_dirs.append(str(folder.final))
                figure, value, _higher = compare_mod.headline(result)
                say(f"{tag}: {figure} {fmt(value)} ({folder.final})")
                folder.check()
    except KeyboardInterrupt as exc:
        exc.kept_run_dirs = list(run_dirs)
        raise
    return _compared(name, names, layouts, runs, order, repeat, order_seed, output, ws)


#: runs of each layout at most (--repeat)
REPEAT_MAX = 50


def _compared(name: str, names: list[str], layouts: list[Experiment], runs: list[list[tuple[dict, str]]],
              order: list[tuple[int, int]], repeat: int, order_seed: int, output: Path, ws,
              nodes: list[dict] | None = None) -> Comparison:
    """Each layout judged by its median run (with every run's spread when repeated), written."""
    configs = [compare_mod.Config(n, list(e.devices), e.placement).describe() for n, e in zip(names, layouts)]
    medians = [median_run(r) for r in runs]
    repeats = None if repeat == 1 else {"n": repeat, "seed": order_seed, "order": [[names[i], k + 1] for i, k in order],
                                        "runs": [[d for _r, d in r] for r in runs],
                                        "results": [[res for res, _d in r] for r in runs]}
    return write_comparison(name, names, [m[0] for m in medians], [m[1] for m in medians], configs, output, ws,
                            repeats=repeats, nodes=nodes)


@dataclass(frozen=True)
class _LayoutRun:
    layout: int   # its index in the layouts
    run: int      # its run number, of --repeat


def run_comparison_on_cluster(layouts: list[Experiment], names: list[str], cluster: str,
                              output: Path = Path("results"), workspace: Path | None = None,
                              say: Callable[[str], None] = print, repeat: int = 1, order_seed: int = 0) -> Comparison:
    """run_comparison on a Ray cluster: each run of each layout on a free node (one per node at a time),
    its data loaded there; each node's reference run first, its offset in the result (`nodes`)."""
    from dbtier.cluster import runs as cluster_runs
    from dbtier.report import jsonout, outputs
    from dbtier.workspace import Workspace

    if not 1 <= repeat <= REPEAT_MAX:
        raise UserError(f"--repeat {repeat}: from 1 to {REPEAT_MAX} runs of each layout")
    for exp in layouts:
        runner.check(exp, workspace)
    output = outputs.check_dir(output, "--output")
    order = [(i, k) for k in range(repeat) for i in range(len(layouts))]
    if repeat > 1:
        random.Random(order_seed).shuffle(order)
    name = layouts[0].workload

    def label(job: _LayoutRun) -> str:
        return names[job.layout] if repeat == 1 else f"{names[job.layout]}-r{job.run}"

    with cluster_runs.connected(cluster, output, say) as (pool, nodes):
        finished = cluster_runs.run_jobs(pool, [_LayoutRun(i, k + 1) for i, k in order],
                                         lambda j: layouts[j.layout].to_toml(), output, say, label)
    runs: list[list[tuple[dict, str]]] = [[] for _ in layouts]
    for job, run_dir, nd in sorted(finished, key=lambda f: (f[0].run, f[0].layout)):
        result = json.loads((run_dir / "result.json").read_text())
        exp = layouts[job.layout]
        result["configuration"] = compare_mod.Config(names[job.layout], list(exp.devices), exp.placement).describe()
        result["node"] = nd.name
        jsonout.write(run_dir / "result.json", result)
        runs[job.layout].append((result, str(run_dir)))
    return _compared(name, names, layouts, runs, order, repeat, order_seed, output, Workspace.open(workspace), nodes)


def median_run(runs: list[tuple[dict, str]]) -> tuple[dict, str]:
    """The run whose figure is the median of a layout's runs (of an even number, the lower middle)."""
    ranked = sorted(runs, key=lambda r: compare_mod.headline(r[0])[1])
    return ranked[(len(ranked) - 1) // 2]


def write_comparison(workload: str, names: list[str], results: list[dict], run_dirs: list[str], configs: list[dict],
                     output: Path, ws, notes: list[str] | None = None, repeats: dict | None = None,
                     nodes: list[dict] | None = None) -> Comparison:
    """The comparison's own run directory (result.json, report.html) for layouts measured already;
    notes: runs made earlier (compare_runs), with what differs between them besides the layout;
    repeats: each layout's every run (run_comparison's repeat), the results being its median runs;
    nodes: the cluster's nodes that made the runs, with their reference runs' offsets."""
    from dbtier.report import compareview, html, jsonout, verdict
    from dbtier.report.rundir import run_dir

    rows = [compare_mod.overall(r) for r in results]
    parts = breakdown(names, results, repeats["results"] if repeats else None)
    spread = compare_mod.spread(repeats["results"]) if repeats else None
    doc = {"kind": "compare", "workload": workload, "configurations": configs,
           "run_dirs": run_dirs, "speedups": compare_mod.speedups(rows),
           "headline": compare_mod.headline(rows[0])[0], "phases": parts["phases"], "scripts": parts["scripts"],
           "largest_difference": parts["largest"], **({"earlier": True, "notes": notes} if notes is not None else {}),
           **({"repeat": {k: repeats[k] for k in ("n", "seed", "order", "runs")}, "spread": spread} if repeats else {}),
           **({"nodes": nodes, "ran_on": [r.get("node") for r in results]} if nodes is not None else {}),
           "results": [{k: r[k] for k in ("elapsed_s", "server_cpu_s", "io_wait_s", "devices", "top_events", "rates")}
                       | {"metrics": r.get("metrics")} for r in rows]}
    with run_dir(output, f"compare-{workload}", ws) as folder:
        jsonout.write(folder.path / "result.json", doc)
        sections = compareview.sections(names, rows, run_dirs, parts, notes, spread)
        if nodes:
            from dbtier.report.html import Section
            from dbtier.report.nodesview import nodes_table

            sections.append(Section("the cluster's nodes", tables=[nodes_table(nodes)]))
        html.write(folder.path / "report.html", f"dbtier compare {workload}", rows[0]["started"], sections,
                   verdict.compare(names, rows, doc["speedups"], doc["headline"], parts["largest"], spread))
    return Comparison(doc, names, rows, folder.final, folder.failure)


def compare_runs(paths: list[Path], output: Path = Path("results"), workspace: Path | None = None) -> Comparison:
    """Run directories made earlier, side by side: the same report as a comparison run now, the first
    the baseline. They must be runs of one workload; each is checked as it is read."""
    from dbtier.api.results import load
    from dbtier.report import outputs
    from dbtier.workspace import Workspace

    if len(paths) < 2:
        raise UserError("compare needs at least two run directories to put side by side")
    outputs.check_dir(output, "--output")
    docs = []
    for path in paths:
        result = load(path)
        if result.kind != "run":
            raise UserError(f"{path}: a {result.kind} directory; compare puts run directories (of dbtier run or "
                            "compare) side by side")
        docs.append((Path(path), result.doc))
    kinds = {doc.get("workload") for _p, doc in docs}
    if len(kinds) > 1:
        first, other = docs[0], next(d for d in docs if d[1].get("workload") != docs[0][1].get("workload"))
        raise UserError(f"{other[0]} is a run of {other[1].get('workload')}, {first[0]} of {first[1].get('workload')}: "
                        "compare runs of one workload")
    names = [(doc.get("configuration") or {}).get("name") or path.resolve().name for path, doc in docs]
    names = [n if names.count(n) == 1 else path.resolve().name for n, (path, _d) in zip(names, docs)]
    if len(set(names)) < len(names):
        raise UserError(f"{sorted({n for n in names if names.count(n) > 1})[0]} is given twice; give each run once")
    configs = [doc.get("configuration") or {"name": n, "devices": [{"name": d["name"], "profile": d["profile"]}
                                                                   for d in (doc.get("lab") or {}).get("devices", [])],
                                           "placement": (doc.get("lab") or {}).get("placement") or {}}
               for n, (_p, doc) in zip(names, docs)]
    ws = Workspace.open(workspace)
    return write_comparison(docs[0][1]["workload"], names, [doc for _p, doc in docs],
                            [str(path.resolve()) for path, _d in docs], [{**c, "name": n} for c, n in zip(configs, names)],
                            output, ws, _differences(names, [doc for _p, doc in docs]))


def _differences(names: list[str], docs: list[dict]) -> list[str]:
    """What the runs differ in besides their devices and placement: the workload's options, the cache
    state, the I/O mode, the database cache: said, so a difference is not taken for the layout's."""
    def facts(doc: dict) -> dict:
        lab = doc.get("lab") or {}
        return {**{f"--{k.replace('_', '-')}": v for k, v in (doc.get("params") or {}).items()},
                "cache state": doc.get("cache_state"), "I/O mode": lab.get("io_mode"),
                "database cache": lab.get("cache_bytes"), "CPU scale": lab.get("cpu_scale")}
    def shown(v) -> str:
        return (", ".join(map(str, v)) or "none") if isinstance(v, (list, tuple)) else str(v)
    each = [{k: shown(v) for k, v in facts(d).items()} for d in docs]
    keys = dict.fromkeys(k for f in each for k in f)  # every run's, in order: an option one run alone has too
    differ = [k for k in keys if len({f.get(k) for f in each}) > 1]
    notes = ["Runs made earlier, each on its own data, the first the baseline."]
    for k in differ:
        notes.append(f"They differ in {k}: " + ", ".join(f"{n} {each[i].get(k)}" for i, n in enumerate(names))
                     + "; what differs is not the layout alone.")
    return notes
