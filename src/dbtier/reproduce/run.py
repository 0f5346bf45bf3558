"""Runs the articles' experiments and computes their figures. A run that fails is reported with its
reason and the rest go on: a reproduction takes long, and one article's failure says nothing of
another's."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Callable

from dbtier.errors import UserError
from dbtier.experiments import preflight, runner
from dbtier.experiments.experiment import Experiment
from dbtier.experiments.runner import run_workload
from dbtier.engines.postgres.lab import LabOptions
from dbtier.report import jsonout
from dbtier.reproduce import article000, article001, article002, article003, article004
from dbtier.reproduce.plan import SOURCES, Article, CpuReference, RunSpec, phase
from dbtier.workloads import registry
from dbtier.workloads.base import WorkloadError

#: A run during which the hypervisor took more than this share of the elapsed time in CPU is run
#: again (up to STEAL_RETRIES times): a process whose CPU is stolen wakes late, and the emulated
#: devices with it, so its timing is the host's, not the model's.
STEAL_SHARE = 0.10
STEAL_RETRIES = 2

ARTICLES = {"000": article000, "001": article001, "002": article002, "003": article003, "004": article004}


def stolen(result: dict) -> bool:
    return result.get("host_steal_s", 0.0) > STEAL_SHARE * result["elapsed_s"]


def articles(quick: bool, only: list[str] | None = None) -> list[Article]:
    return [ARTICLES[s].article(quick) for s in ARTICLES if not only or s in only]


def experiment(spec: RunSpec, base: LabOptions, cpu_scale: float = 1.0, scale: float = 1.0) -> Experiment:
    """A reproduction's run as an experiment: its workload and parameters, devices, placement and
    caches, at the article's CPU and scale."""
    return Experiment.from_options(spec.workload, device=[f"{name}={profile}" for name, profile in spec.devices],
                                   place=spec.places, cache=spec.cache, page_cache=spec.page_cache,
                                   io_mode=spec.io_mode, cpu_scale=cpu_scale, scale_model=scale, pg_bin=base.pg_bin,
                                   **spec.params)


def _lab(spec: RunSpec, base: LabOptions, cpu_scale: float = 1.0, scale: float = 1.0):
    """(workload, devices, placement, lab options) of a reproduction's run, checked as `run` checks one."""
    exp = experiment(spec, base, cpu_scale, scale)
    options, requests, _ = runner.lab_options(exp, base.workspace)
    return exp.make_workload(), requests, exp.placement, options


def scale_factor(art: Article) -> dict | None:
    """The article's scale model: a size it states over the data of ours that stands for it."""
    if art.scale is None:
        return None
    spec = next(s for s in art.runs if s.key == art.scale.run)
    loaded = registry.get(spec.workload)(**spec.params).loaded_bytes()
    ours = sum(loaded[name] for name in art.scale.objects) if art.scale.objects else sum(loaded.values())
    return {"factor": round(art.scale.data_bytes / ours, 1), "article_bytes": art.scale.data_bytes,
            "ours_bytes": ours, "what": scaled_data(art.scale.objects), "run": spec.key, "source": art.scale.source}


def scaled_data(objects: tuple[str, ...]) -> str:
    """What the scale model's size is of, in a sentence."""
    return " and ".join(objects) if objects else "database"


def check(chosen: list[Article], base: LabOptions) -> None:
    """Every run's options, and room for its data, before the first one starts: a reproduction takes
    long, and a run that cannot fit should not be found out an hour into it."""
    for art in chosen:
        scale = scale_factor(art)
        for spec in art.runs:
            preflight.check_run(*_lab(spec, base, scale=scale["factor"] if scale else 1.0))
        if art.cpu:
            preflight.check_run(*_lab(art.cpu.run, base))


def run_spec(spec: RunSpec, base: LabOptions, progress, artifacts: Path, say: Callable[[str], None],
             cpu_scale: float = 1.0, scale: float = 1.0) -> dict:
    work, requests, place, options = _lab(spec, base, cpu_scale, scale)
    return run_workload(work, requests, place, options, progress, artifacts, say)


def cpu_scale(ref: CpuReference, result: dict) -> dict:
    """K from the calibration run: the article's CPU per unit over this machine's, measured."""
    ph = phase(result, ref.phase)
    units = ph["metrics"][ref.count_key]
    ours_us = 1e6 * ph["server_cpu_s"] / units
    k = ref.article_us / ours_us
    return {"k": round(max(1.0, k), 2), "article_us": ref.article_us, "ours_us": ours_us, "unit": ref.unit,
            "units": units, "source": ref.source,
            "note": "" if k >= 1 else "this machine's CPU is slower than the article's: runs at its own speed"}


def folder_name(key: str) -> str:
    """A run's folder: its key with no spaces ("oltp-large-log on flash" is oltp-large-log-on-flash),
    so that a shell or a URL takes the path as it is."""
    return "-".join(key.split())


def calibrate(art: Article, base: LabOptions, folder: Path, progress_for, say: Callable[[str], None]) -> dict | None:
    """Runs the article's CPU reference statement at this machine's speed; returns its CPU scale."""
    if art.cpu is None:
        return None
    artifacts = folder / f"seed{art.seed}" / folder_name(art.cpu.run.key)
    artifacts.mkdir(parents=True)
    prefix = f"seed {art.seed} CPU calibration: "
    with progress_for(prefix) as progress:
        result = run_spec(art.cpu.run, base, progress, artifacts, say)
    jsonout.write(artifacts / "result.json", result)
    cpu = cpu_scale(art.cpu, result)
    say(f"{prefix}{cpu['ours_us']:.1f} us of server CPU per {cpu['unit']} here, {cpu['article_us']:g} us in the "
        f"article: its runs use --cpu-scale {cpu['k']:g}")
    return cpu


def reproduce(chosen: list[Article], base: LabOptions, folder: Path, progress_for, say: Callable[[str], None]) -> dict:
    doc = {"kind": "reproduce", "articles": []}
    t0 = time.monotonic()
    for art in chosen:
        results, failures = {}, {}
        try:
            cpu = calibrate(art, base, folder, progress_for, say)
        except Exception as exc:  # noqa: BLE001  the article's runs need K: they cannot go on without it
            why = _why(exc)
            say(f"seed {art.seed} CPU calibration failed: {why}")
            doc["articles"].append(_article_doc(art, [], {"cpu calibration": why}, {}, None, None))
            continue
        k = cpu["k"] if cpu else 1.0
        scale = scale_factor(art)
        if scale:
            say(f"seed {art.seed}: the article's {scale['article_bytes'] / 1e9:.3g} GB {scale['what']} stands "
                f"as {scale['ours_bytes'] / 1e6:.0f} MB here: every cache at 1/{scale['factor']:g}, seeks as long as there "
                "(--scale-model)")
        for i, spec in enumerate(art.runs, 1):
            artifacts = folder / f"seed{art.seed}" / folder_name(spec.key)
            artifacts.mkdir(parents=True)
            prefix = f"seed {art.seed} [{i}/{len(art.runs)}] {spec.key}: "
            started = time.monotonic()
            try:
                result = None
                for attempt in range(1 + STEAL_RETRIES):
                    if attempt:
                        say(f"{prefix}the hypervisor took {result['host_steal_s']:.1f} s of CPU during "
                            f"{result['elapsed_s']:.1f} s: running it again")
                        shutil.rmtree(artifacts)
                        artifacts.mkdir()
                    with progress_for(prefix) as progress:
                        result = run_spec(spec, base, progress, artifacts, say, k, scale["factor"] if scale else 1.0)
                    result["attempts"] = attempt + 1
                    if not stolen(result):
                        break
            except Exception as exc:  # noqa: BLE001  one run's failure, whatever it is, leaves the others to run
                why = _why(exc)
                failures[spec.key] = why
                say(f"{prefix}failed: {why}")
                continue
            jsonout.write(artifacts / "result.json", result)
            results[spec.key] = result
            say(f"{prefix}{result['elapsed_s']:.1f} s measured ({time.monotonic() - started:.0f} s in all)")
        try:
            figures = [vars(f) | {"agrees": f.agrees} for f in art.figures(results)] if not failures else []
        except (KeyError, StopIteration, ZeroDivisionError) as exc:  # a figure needs a run that gave no result
            figures, failures["figures"] = [], f"could not compute the figures: {type(exc).__name__} {exc}"
        doc["articles"].append(_article_doc(art, figures, failures, results, cpu, scale))
    doc["elapsed_s"] = time.monotonic() - t0
    return doc


def _why(exc: Exception) -> str:
    """A failure as the table states it: ours in our words, anything else with its type."""
    return str(exc) if isinstance(exc, (WorkloadError, UserError)) else f"{type(exc).__name__}: {exc}"


def _article_doc(art: Article, figures: list, failures: dict, results: dict, cpu: dict | None,
                 scale: dict | None) -> dict:
    return {"seed": art.seed, "title": art.title, "source": SOURCES.get(art.seed, ""), "hardware": art.hardware,
            "figures": figures, "failures": failures,
            "cpu_scale": cpu or {"k": 1.0, "source": "the article gives no CPU figure for a statement run here"},
            "scale_model": scale or {"factor": 1.0, "source": "the article does not state both its database size and its memory, to scale them together"},
            "runs": [{"key": s.key, "label": s.label or s.key, "workload": s.workload, "params": s.params,
                      "devices": [list(d) for d in s.devices], "places": s.places, "cache": s.cache,
                      "io_mode": s.io_mode, "summary": _summary(results.get(s.key))} for s in art.runs]}


def _summary(result: dict | None) -> dict | None:
    if result is None:
        return None
    top = next((e for e in result.get("top_events") or
                [e for ph in result.get("phases", []) for e in ph["top_events"]] if not e["event"].startswith("CPU")),
               None)
    return {"elapsed_s": result["elapsed_s"], "server_cpu_s": result["server_cpu_s"], "io_wait_s": result["io_wait_s"],
            "host_steal_s": result.get("host_steal_s", 0.0), "attempts": result.get("attempts", 1),
            "rates": result.get("rates", {}),
            "top_wait": top["event"] if top else None, "checks": result.get("checks", {})}
