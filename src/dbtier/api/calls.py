"""`run` and `compare` from Python. `run` takes an `Experiment`, or a workload's name and keywords
that build one: each keyword is an option of `dbtier run WORKLOAD --help` with its dashes written as
underscores (`io_mode="buffered"`, `rows=300`), or a one-letter option's letter (pgbench's `T=30` is
`-T 30`), a list for a repeatable option, True for a flag; devices may be given as `DeviceSpec`s and
the placement as a `Placement`. Where the run goes: `output`, `workspace`, `keep`, `json` (and
`no_reuse`: load afresh, see `dbtier labs`). It runs
what the command runs (the same checks, run directory and cleanup) and returns the run directory,
loaded. It raises UserError for bad input (the command's one-line message), WorkloadError when the
workload ran but its result check failed (nothing is reported as valid), and KeyboardInterrupt on
Ctrl-C."""

from __future__ import annotations

from pathlib import Path

from dbtier.api.results import Result, load
from dbtier.errors import UserError
from dbtier.experiments.options import OPTIONS, RUNTIME_KEYS

#: where a run goes and how it speaks: not part of the experiment
RUNTIME = RUNTIME_KEYS
#: the command line's one-letter options beside the workloads' own
LETTERS = {o.short.lstrip("-"): o.key for o in OPTIONS if o.short}


def _options(workload: str, options: dict) -> dict:
    """Keywords as option names: one-letter ones spelled out (the workload's flags, then the lab's)."""
    from dbtier.workloads import registry

    letters = {f.lstrip("-"): p.key for p in registry.get(workload).params for f in p.flags if len(f) == 2}
    out = {}
    for key, value in options.items():
        if len(key) == 1:
            key = letters.get(key) or LETTERS.get(key) or key
        out[key] = value
    return out


def run(workload, **options) -> Result:
    """Runs one workload, as `dbtier run WORKLOAD` (or an experiment, as `dbtier run --experiment`):

        run("random-index", device="hdd=hdd-sata-7200", rows=2000)
        run("pgbench", device=["hdd=hdd-sata-7200", "ssd=ssd-sata-mlc"], place="wal=ssd", i=True, T=30)
        run(Experiment.load(run_dir), output="again")
    """
    from dbtier.report import jsonout, outputs
    from dbtier.experiments import runner
    from dbtier.experiments.experiment import Experiment

    if isinstance(workload, Experiment):
        exp, given = workload, options
        unknown = sorted(set(given) - set(RUNTIME))
        if unknown:
            raise UserError(f"{unknown[0]}: an experiment is given whole; only {', '.join(RUNTIME)} go beside it")
    else:
        options = _options(workload, options)
        given = {k: options.pop(k) for k in RUNTIME if k in options}
        exp = Experiment.from_options(workload, **options)
    if given.get("cluster"):
        raise UserError("cluster: one run runs here; give a cluster to compare() or to dbtier sweep")
    json_path = outputs.check_file(Path(given["json"]), "--json") if given.get("json") else None
    output = Path(given.get("output") or "results")
    if int(given.get("repeat") or 1) != 1:  # N runs of it: a comparison of one layout, its median and range
        from dbtier.experiments.comparison import run_comparison

        done = run_comparison([exp], ["run"], output, Path(given["workspace"]) if given.get("workspace") else None,
                              say=lambda _line: None, reuse=not given.get("no_reuse"), repeat=int(given["repeat"]),
                              order_seed=int(given.get("repeat_seed") or 0))
        if json_path:
            jsonout.write(json_path, {**done.doc, "run_dir": str(done.run_dir)})
        done.check()
        return load(done.run_dir)
    workspace = Path(given["workspace"]) if given.get("workspace") else None
    outcome = runner.run(exp, output, workspace, bool(given.get("keep")), say=lambda _line: None,
                         reuse=not given.get("no_reuse"),
                         production=Path(given["production"]) if given.get("production") else None)
    if json_path:
        jsonout.write(json_path, {**outcome.result, "run_dir": str(outcome.run_dir)})
    outcome.check()
    return load(outcome.run_dir)


def compare(workload: str, **options) -> Result:
    """Runs one workload on several layouts, as `dbtier compare WORKLOAD`: `config` the layouts
    (NAME:DEVICES[:PLACEMENT], a list), or `experiment` a TOML file of them; the other keywords as
    for run (a layout's own devices and placement come from it); `repeat=N` runs each layout N times
    in a shuffled order (`repeat_seed`) and judges each by its median, with the spread; `cluster` (a
    Ray address) runs them on a cluster's nodes, one run per node at a time:

        compare("random-index", config=["hdd:d=hdd-sata-7200", "ssd:d=ssd-sata-mlc"], rows=2000)
    """
    from dataclasses import replace

    from dbtier.experiments import compare as compare_mod
    from dbtier.experiments.comparison import run_comparison
    from dbtier.experiments.experiment import Experiment
    from dbtier.report import jsonout, outputs

    options = _options(workload, options)
    given = {k: options.pop(k) for k in RUNTIME if k in options}
    if given.get("production"):
        raise UserError("production: a comparison runs several layouts; hold each layout's run directory beside "
                        "production with dbtier stats compare DELTA RUN_DIR")
    configs = options.pop("config", ())
    repeat, order_seed = int(given.get("repeat") or 1), int(given.get("repeat_seed") or 0)
    configs = compare_mod.configurations((configs,) if isinstance(configs, str) else tuple(configs),
                                         Path(options.pop("experiment")) if options.get("experiment") else None,
                                         options.get("engine") or "postgres")
    for key in ("device", "place", "cache_state"):
        if key in options:
            raise UserError(f"{key}: each layout gives its own (config=...); compare takes no {key}")
    base = Experiment.from_options(workload, device=configs[0].devices, place=configs[0].placement, **options)
    layouts = [replace(base, devices=tuple(c.devices), placement=c.placement) for c in configs]
    json_path = outputs.check_file(Path(given["json"]), "--json") if given.get("json") else None
    workspace = Path(given["workspace"]) if given.get("workspace") else None
    if given.get("cluster"):
        from dbtier.experiments.comparison import run_comparison_on_cluster

        done = run_comparison_on_cluster(layouts, [c.name for c in configs], given["cluster"],
                                         Path(given.get("output") or "results"), workspace, say=lambda _line: None,
                                         repeat=repeat, order_seed=order_seed)
    else:
        done = run_comparison(layouts, [c.name for c in configs], Path(given.get("output") or "results"), workspace,
                              say=lambda _line: None, reuse=not given.get("no_reuse"), repeat=repeat,
                              order_seed=order_seed)
    if json_path:
        jsonout.write(json_path, {**done.doc, "run_dir": str(done.run_dir)})
    done.check()
    return load(done.run_dir)


def predict(run_dir, device=(), place=(), page_cache: str | None = None, cpu_scale: float = 1.0,
            credits: str | float | None = None, spread: int = 0, seed: int = 0, workspace=None, json=None) -> Result:
    """A recorded run predicted on other devices or another placement, as `dbtier predict RUN_DIR`:
    `device` gives a device another profile or adds one (NAME=PROFILE, a list for several), `place` a
    whole placement, `credits` a capped volume's burst credits at the start (empty, full, a fraction;
    default: as recorded), `spread` N more replays with calls reaching the core earlier or later by the host's own delays (each
    phase's "spread": min, median, max). Returns the prediction: its runs are "recorded" and "predicted".

        predict("results/oltp-20261126-120000", place="data=hdd,wal=ssd")
    """
    from dbtier.api.results import from_document
    from dbtier.prediction import recording, scenario as scenario_mod
    from dbtier.prediction.replay import predict as run_prediction
    from dbtier.report import jsonout, outputs
    from dbtier.workspace import Workspace

    if isinstance(spread, bool) or not isinstance(spread, int) or not 0 <= spread <= 1000:
        raise UserError(f"spread {spread!r}: a whole number of replays from 0 to 1000")
    json_path = outputs.check_file(Path(json), "--json") if json else None
    workspace = Path(workspace) if workspace else None
    Workspace.locate(workspace)
    rec = recording.load(Path(run_dir))
    scenario = scenario_mod.build(rec, _many(device), _many(place), page_cache, cpu_scale, credits)
    ws = Workspace.open(workspace)
    ws.reap()
    doc = run_prediction(rec, scenario, ws, spread=spread, seed=int(seed)).to_dict()
    if json_path:
        jsonout.write(json_path, doc)
    return from_document(doc, json_path or Path(run_dir))


def advise(run_dir, fast: str, slow: str | None = None, budget: str | None = None, cost: str | None = None,
           max_cost: float | None = None, workspace=None, output="results") -> Result:
    """Where limited fast storage should go, as `dbtier advise RUN_DIR` (without --verify): the advice's
    directory, loaded (`.placements`, `.doc`).

        advise("results/sql-20261126-120000", fast="ssd=ssd-sata-mlc", budget="200MB")
    """
    from dbtier.advisor import advice as advice_mod
    from dbtier.prediction import recording
    from dbtier.report import adviseview, html, jsonout, outputs
    from dbtier.report.rundir import run_dir as make_run_dir
    from dbtier.workspace import Workspace

    output = outputs.check_dir(Path(output), "--output")
    workspace = Path(workspace) if workspace else None
    Workspace.locate(workspace)
    rec = recording.load(Path(run_dir))
    q = advice_mod.question(rec, fast, slow, budget, cost, max_cost)
    ws = Workspace.open(workspace)
    ws.reap()
    doc, _advisor = advice_mod.advise(q, workspace=ws)
    with make_run_dir(output, f"advise-{doc['workload']}", ws) as folder:
        jsonout.write(folder.path / "result.json", doc)
        html.write(folder.path / "report.html", f"dbtier advise {doc['workload']}", doc["run_dir"],
                   adviseview.sections(doc))
    folder.check()
    return load(folder.final)


def _many(value) -> tuple:
    return (value,) if isinstance(value, str) else tuple(value or ())
