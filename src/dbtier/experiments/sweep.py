"""A sweep: one workload crossed over axes (layouts with their devices and provisioning, cache sizes,
settings, CPU scale, the workload's own parameters), each point an Experiment, run one after another
with a ledger that makes it resumable.

A sweep file (`dbtier sweep --help` shows one) names the workload; [options] what every point
shares, with an experiment file's keys; [[layout]] tables an axis of devices and placements; [axes]
each option crossed with the others, a list of values each.

The ledger (ledger.jsonl in the sweep's folder) holds one record per experiment and attempt, keyed by a
hash of the experiment (its TOML): `--resume DIR` runs only what has no finished record."""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import random
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from dbtier.errors import UserError
from dbtier.experiments.experiment import Experiment
from dbtier.experiments.options import EXPERIMENT_KEYS

#: experiments a sweep may expand to (times --repeat), unless --max-runs says otherwise
MAX_RUNS = 1000
LEDGER = "ledger.jsonl"
SWEEP_FILE = "sweep.toml"
_TOP = ("workload", "options", "layout", "axes")


@dataclass(frozen=True)
class Point:
    """One experiment of the sweep: its name (the axes' values) and the experiment."""
    name: str
    values: tuple[tuple[str, str], ...]   # (axis, value as written) in the axes' order
    experiment: Experiment

    @property
    def key(self) -> str:
        """The ledger's key: the experiment itself, whatever it is named."""
        return hashlib.sha256(self.experiment.to_toml().encode()).hexdigest()[:16]


def _text(v) -> str:
    return ",".join(map(str, v)) if isinstance(v, list) else str(v)


def parse(path: Path) -> tuple[str, dict, list[dict], dict[str, list]]:
    """(workload, options, layouts, axes) of a sweep file, each checked: one line for what is wrong."""
    path = Path(path)
    where = f"sweep {path}"
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"{where}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{where}: not valid TOML: {exc}") from None
    unknown = sorted(set(doc) - set(_TOP))
    if unknown:
        hint = difflib.get_close_matches(unknown[0], _TOP, 1)
        raise UserError(f"{where}: unknown key {unknown[0]!r}" + (f"; did you mean {hint[0]!r}?" if hint else
                                                                  f"; a sweep has {', '.join(_TOP)}"))
    workload = doc.get("workload")
    if not isinstance(workload, str):
        raise UserError(f'{where}: give the workload, e.g. workload = "pgbench"')
    options, layouts, axes = doc.get("options", {}), doc.get("layout", []), doc.get("axes", {})
    if not isinstance(options, dict) or not isinstance(axes, dict) or not isinstance(layouts, list):
        raise UserError(f"{where}: [options] and [axes] are tables, [[layout]] a list of tables")
    for key in [*options, *axes]:
        if key not in EXPERIMENT_KEYS or key == "workload":
            hint = difflib.get_close_matches(key, EXPERIMENT_KEYS, 1)
            # a workload's own parameter is checked when the experiment is made (its message names it)
            if hint and hint[0] != key:
                raise UserError(f"{where}: unknown option {key!r}; did you mean {hint[0]!r}?")
    for key, values in axes.items():
        if not isinstance(values, list):
            raise UserError(f"{where}: axis {key}: give its values as a list ({key} = [a, b])")
        if not values:
            raise UserError(f"{where}: axis {key} has no values: give at least one")
        if key in options:
            raise UserError(f"{where}: {key} is both an option and an axis; give it in one place")
    for i, lay in enumerate(layouts, 1):
        if not isinstance(lay, dict) or not isinstance(lay.get("name"), str) or not lay.get("device"):
            raise UserError(f"{where}: layout {i}: give its name and device (a list of NAME=PROFILE)")
        extra = sorted(set(lay) - {"name", "device", "place"})
        if extra:
            raise UserError(f"{where}: layout {lay['name']}: unknown key {extra[0]!r} (a layout has name, device, place)")
    names = [lay["name"] for lay in layouts]
    if len(set(names)) < len(names):
        raise UserError(f"{where}: layout {sorted({n for n in names if names.count(n) > 1})[0]!r} is named twice")
    if layouts and ({"device", "place"} & (set(options) | set(axes))):
        raise UserError(f"{where}: devices and placement come from the [[layout]] tables; give them there only")
    return workload, options, layouts, axes


def expand(path: Path, max_runs: int = MAX_RUNS, repeat: int = 1) -> list[Point]:
    """Every point of the sweep as an Experiment, checked (a bad value: one line naming the point)."""
    workload, options, layouts, axes = parse(path)
    lay_axis = [("layout", lay["name"], {"device": lay["device"], **({"place": lay["place"]} if "place" in lay else {})})
                for lay in layouts] or [None]
    count = len(lay_axis) * math.prod(len(v) for v in axes.values())
    if count * repeat > max_runs:
        raise UserError(f"sweep {path}: {count:,} experiments x {repeat} runs is {count * repeat:,}, more than "
                        f"--max-runs {max_runs:,}; cut an axis or raise --max-runs")
    points = []
    base = Path(path).resolve().parent
    for lay in lay_axis:
        for combo in itertools.product(*([(k, v) for v in vs] for k, vs in axes.items())):
            values = ([("layout", lay[1])] if lay else []) + [(k, _text(v)) for k, v in combo]
            doc = {"workload": workload, **options, **(lay[2] if lay else {}), **dict(combo)}
            name = " ".join(f"{k}={v}" for k, v in values) or workload
            points.append(Point(name, tuple(values), Experiment.from_dict(doc, f"sweep {path}, {name}", base)))
    seen: dict[str, Point] = {}
    for p in points:
        if p.key in seen:
            raise UserError(f"sweep {path}: two points make the same experiment ({seen[p.key].name}); an axis "
                            "changes nothing")
        seen[p.key] = p
    return points


# -- the ledger -------------------------------------------------------------------------------------

class Ledger:
    """ledger.jsonl: one line per experiment and attempt (started, then done or failed), appended and
    flushed as it happens, so a sweep killed at any point resumes from it."""

    def __init__(self, folder: Path):
        self.path = folder / LEDGER

    def records(self) -> list[dict]:
        if not self.path.exists():
            return []
        out = []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines, 1):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                if n == len(lines):
                    continue  # a last line cut short by a kill: that attempt never finished
                raise UserError(f"{self.path}: line {n} is not a ledger record; is this a sweep's folder?") from None
            if not isinstance(rec, dict) or not {"key", "event"} <= set(rec):
                raise UserError(f"{self.path}: line {n} is not a ledger record; is this a sweep's folder?")
            out.append(rec)
        return out

    def done(self) -> dict[str, list[dict]]:
        """key -> its finished runs' records."""
        out: dict[str, list[dict]] = {}
        for rec in self.records():
            if rec["event"] == "done":
                out.setdefault(rec["key"], []).append(rec)
        return out

    def write(self, **record) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "at": round(time.time(), 3), **record})
                    + "\n")
            f.flush()


def plan(points: list[Point], repeat: int, seed: int, done: dict[str, list[dict]]) -> list[tuple[Point, int]]:
    """The runs still to make, (point, its run number), in one order shuffled with the seed (so the
    host's drift falls on every point alike); the same order on a resume, less what is done."""
    runs = [(p, k) for k in range(1, repeat + 1) for p in points]
    if repeat > 1 or len(points) > 1:
        random.Random(seed).shuffle(runs)
    finished = {(key, rec.get("run")) for key, recs in done.items() for rec in recs}
    return [(p, k) for p, k in runs if (p.key, k) not in finished]


def run_sweep(path: Path, output: Path, workspace: Path | None = None, repeat: int = 1, seed: int = 0,
              max_runs: int = MAX_RUNS, resume: Path | None = None, say: Callable[[str], None] = print,
              progress_for=None, cluster: str | None = None) -> Path:
    """Runs every point into the sweep's folder: runs/ (a run directory each), the ledger, the sweep
    file, and at the end result.json and report.html. Here, one run after another (each owning the
    machine while it runs); with `cluster` (a Ray address), one run per node at a time, each node first
    making the reference run that measures how it differs from the others. Returns the folder."""
    from dbtier.experiments import runner
    from dbtier.report import outputs

    if not 1 <= repeat <= 50:
        raise UserError(f"--repeat {repeat}: from 1 to 50 runs of each experiment")
    if resume is not None:
        folder = Path(resume)
        if not (folder / SWEEP_FILE).is_file():
            raise UserError(f"--resume {folder}: not a sweep's folder (it has no {SWEEP_FILE})")
        path = folder / SWEEP_FILE
        meta = json.loads((folder / "sweep.json").read_text())
        repeat, seed = meta["repeat"], meta["seed"]
    points = expand(path, max_runs, repeat)
    for p in points:  # every point checked before anything runs
        runner.check(p.experiment, workspace, seeding="kept")
    if resume is None:
        outputs.check_dir(output, "--output")
    if cluster:
        from dbtier.cluster.runs import connect

        pool = connect(cluster, say)
    else:
        pool = None
    try:
        if resume is None:
            folder = Path(output).resolve() / f"sweep-{points[0].experiment.workload}-{time.strftime('%Y%m%d-%H%M%S')}"
            folder.mkdir(parents=True)
            (folder / SWEEP_FILE).write_text(Path(path).read_text(encoding="utf-8"), encoding="utf-8")
            (folder / "sweep.json").write_text(json.dumps({"repeat": repeat, "seed": seed,
                                                           "source": str(Path(path).resolve())}))
        ledger = Ledger(folder)
        todo = plan(points, repeat, seed, ledger.done())
        total = len(points) * repeat
        say(f"sweep: {len(points)} experiments x {repeat} = {total} runs; {total - len(todo)} done, {len(todo)} to "
            f"run ({folder})")
        attempts = {rec["key"]: rec.get("attempt", 1) for rec in ledger.records() if rec["event"] == "started"}
        jobs = [_Job(p, k, attempts.get(p.key, 0) + 1, total - len(todo) + n) for n, (p, k) in enumerate(todo, 1)]
        if pool is None:
            _run_here(jobs, total, repeat, folder, ledger, workspace, say, progress_for)
        else:
            _run_on_cluster(pool, jobs, total, repeat, folder, ledger, say)
    finally:
        if pool is not None:
            pool.clean()
            pool.close()
    summarize(folder, points, repeat)
    return folder


@dataclass
class _Job:
    point: Point
    run: int       # its run number, of --repeat
    attempt: int
    number: int    # its place among the sweep's runs, for progress


def _label(job: _Job, total: int, repeat: int) -> str:
    return f"[{job.number}/{total}] {job.point.name}" + (f" (run {job.run} of {repeat})" if repeat > 1 else "")


def _run_here(jobs: list[_Job], total: int, repeat: int, folder: Path, ledger: Ledger, workspace, say,
              progress_for) -> None:
    from dbtier.experiments import runner

    for job in jobs:
        point = job.point
        ledger.write(key=point.key, name=point.name, run=job.run, attempt=job.attempt, event="started", node="here")
        say(_label(job, total, repeat))
        try:
            outcome = runner.run(point.experiment, folder / "runs", workspace, say=lambda _l: None,
                                 **({"progress_for": progress_for} if progress_for else {}))
            outcome.check()
        except UserError as exc:
            ledger.write(key=point.key, name=point.name, run=job.run, attempt=job.attempt, event="failed", error=str(exc))
            raise UserError(f"{point.name}: {exc} (the sweep resumes with --resume {folder})") from None
        ledger.write(key=point.key, name=point.name, run=job.run, attempt=job.attempt, event="done",
                     run_dir=str(outcome.run_dir.relative_to(folder)), node="here")


# -- on a cluster ------------------------------------------------------------------------------------

def _run_on_cluster(pool, jobs: list[_Job], total: int, repeat: int, folder: Path, ledger: Ledger, say) -> None:
    """Each node's reference run, then the sweep's runs, one per node at a time (cluster/runs.py)."""
    from dbtier.cluster import runs

    for rec in runs.reference_runs(pool, folder / "reference", say):
        ledger.write(key="reference", event="reference", **{**rec, "run_dir": str(rec["run_dir"].relative_to(folder))})

    def record(event: str, job: _Job, nd, attempt: int, run_dir: Path | None = None, **extra) -> None:
        ledger.write(key=job.point.key, name=job.point.name, run=job.run, attempt=attempt, event=event,
                     node=nd.name, **({"run_dir": str(run_dir.relative_to(folder))} if run_dir else {}), **extra)

    runs.run_jobs(pool, jobs, lambda j: j.point.experiment.to_toml(), folder / "runs", say,
                  lambda j: _label(j, total, repeat), first_attempt=lambda j: j.attempt, record=record,
                  resume=f"; the sweep resumes with --resume {folder}")


def summarize(folder: Path, points: list[Point], repeat: int) -> dict:
    """The sweep's result.json and report.html: each point's figure over its runs (median and range)."""
    import statistics

    from dbtier.experiments.compare import headline
    from dbtier.report import html, jsonout
    from dbtier.report.html import Section

    ledger = Ledger(folder)
    done = ledger.done()
    rows = []
    for p in points:
        results = [json.loads((folder / rec["run_dir"] / "result.json").read_text()) for rec in done.get(p.key, [])]
        values = sorted(headline(r)[1] for r in results)
        rows.append({"name": p.name, "values": dict(p.values), "key": p.key,
                     "figure": headline(results[0])[0] if results else None, "runs": len(values),
                     "median": statistics.median(values) if values else None,
                     "min": values[0] if values else None, "max": values[-1] if values else None,
                     "run_dirs": [rec["run_dir"] for rec in done.get(p.key, [])],
                     "attempts": max((rec.get("attempt", 1) for rec in done.get(p.key, [])), default=0),
                     "nodes": [rec.get("node", "here") for rec in done.get(p.key, [])]})
    doc = {"kind": "sweep", "workload": points[0].experiment.workload, "repeat": repeat, "points": rows,
           "nodes": nodes(ledger.records())}
    jsonout.write(folder / "result.json", doc)
    from dbtier.report.nodesview import nodes_table

    tables = [table_data(doc)] + ([nodes_table(doc["nodes"])] if doc["nodes"] else [])
    html.write(folder / "report.html", f"dbtier sweep {doc['workload']}", time.strftime("%Y-%m-%d %H:%M"),
               [Section(f"{doc['workload']}: the sweep", tables=tables)], [])
    return doc


def nodes(records: list[dict]) -> list[dict]:
    """Each node's latest reference run and facts, and its offset against the median node."""
    from dbtier.cluster.runs import offsets

    latest = {}
    for rec in records:
        if rec["event"] == "reference":
            latest[rec["node_id"]] = rec
    return [{k: r[k] for k in ("node", "node_id", "facts", "figure", "reference", "offset", "run_dir")}
            for r in offsets(list(latest.values()))]


def table_data(doc: dict):
    """A row per experiment: its figure's median over its runs and their range; where a run was made
    again (its node lost, or the sweep stopped during it), the attempt its result came from."""
    from dbtier.report.html import TableData
    from dbtier.report.terminal import fmt

    rows = doc["points"]
    again = any(r.get("attempts", 1) > 1 for r in rows)
    return TableData(["experiment", "figure", "median", "range", "runs"] + (["attempts"] if again else []),
                     [[r["name"], r["figure"] or "-", "-" if r["median"] is None else fmt(r["median"]),
                       "-" if r["min"] is None else f"{fmt(r['min'])} to {fmt(r['max'])}", str(r["runs"])]
                      + ([str(r.get("attempts", 1)) if r.get("attempts", 1) > 1 else "1"] if again else [])
                      for r in rows],
                     f"{doc['workload']}: {len(rows)} experiments, {doc['repeat']} run(s) each"
                     + ("; attempts: a run made again after its node was lost or the sweep stopped" if again else ""),
                     1, conclusion=(2,))
