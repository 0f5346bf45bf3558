"""Runs the articles' experiments and computes their figures. A run that fails is reported with its
reason and the rest go on: a reproduction takes long, and one article's failure says nothing of
another's."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from dbtier import engines
from dbtier.errors import UserError
from dbtier.experiments import preflight, runner
from dbtier.experiments.experiment import Experiment
from dbtier.experiments.runner import run_workload
from dbtier.report import jsonout
from dbtier.reproduce import article000, article001, article002, article003, article004
from dbtier.reproduce.plan import SOURCES, Article, CpuReference, RunSpec, is_wait, phase
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


@dataclass(frozen=True)
class Base:
    """What every run of a reproduction shares: the engines' installs and the workspace."""
    pg_bin: Path | None = None
    mariadb_bin: Path | None = None
    workspace: Path | None = None


def articles(quick: bool, only: list[str] | None = None,
             engine_names: tuple[str, ...] = ("postgres",)) -> list[Article]:
    """The chosen articles, each once per engine (an article's runs on one engine, then the next)."""
    return [ARTICLES[s].article(quick, engine) for s in ARTICLES if not only or s in only for engine in engine_names]


def experiment(spec: RunSpec, base: Base, cpu_scale: float = 1.0, scale: float = 1.0,
               engine: str = "postgres") -> Experiment:
    """A reproduction's run as an experiment: its workload and parameters, devices, placement and
    caches, at the article's CPU and scale, on the engine."""
    binary = {"pg_bin": base.pg_bin} if engine == "postgres" else {"mariadb_bin": base.mariadb_bin}
    return Experiment.from_options(spec.workload, device=[f"{name}={profile}" for name, profile in spec.devices],
                                   place=spec.places, cache=spec.cache, page_cache=spec.page_cache,
                                   io_mode=spec.io_mode, cpu_scale=cpu_scale, scale_model=scale, engine=engine,
                                   **binary, **spec.params)


def _lab(spec: RunSpec, base: Base, cpu_scale: float = 1.0, scale: float = 1.0, engine: str = "postgres"):
    """(workload, devices, placement, lab options) of a reproduction's run on the engine, checked as
    `run` checks one."""
    exp = experiment(spec, base, cpu_scale, scale, engine)
    options, requests, _ = runner.lab_options(exp, base.workspace)
    workload = exp.make_workload()
    preflight.check_engine(workload, engine)
    return workload, requests, exp.placement, options


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


def check(chosen: list[Article], base: Base) -> None:
    """Every run's options, and room for its data, before the first one starts: a reproduction takes
    long, and a run that cannot fit should not be found out an hour into it."""
    for art in chosen:
        scale = scale_factor(art)
        for spec, factor in [(spec, scale["factor"] if scale else 1.0) for spec in art.runs
                             if spec.key not in art.not_run] + ([(art.cpu.run, 1.0)] if art.cpu else []):
            try:
                preflight.check_run(*_lab(spec, base, scale=factor, engine=art.engine), engine=art.engine)
            except UserError as exc:  # which run of which article
                raise UserError(f"{name(art)} {spec.key}: {exc}") from None


def run_spec(spec: RunSpec, base: Base, progress, artifacts: Path, say: Callable[[str], None],
             cpu_scale: float = 1.0, scale: float = 1.0, engine: str = "postgres") -> dict:
    return run_workload(*_lab(spec, base, cpu_scale, scale, engine), progress, artifacts, say, engine=engine)


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


def calibrate(art: Article, base: Base, folder: Path, progress_for, say: Callable[[str], None]) -> dict | None:
    """Runs the article's CPU reference statement at this machine's speed; returns its CPU scale."""
    if art.cpu is None:
        return None
    artifacts = article_folder(folder, art) / folder_name(art.cpu.run.key)
    artifacts.mkdir(parents=True)
    prefix = f"{name(art)} CPU calibration: "
    with progress_for(prefix) as progress:
        result = run_spec(art.cpu.run, base, progress, artifacts, say, engine=art.engine)
    jsonout.write(artifacts / "result.json", result)
    cpu = cpu_scale(art.cpu, result)
    say(f"{prefix}{cpu['ours_us']:.1f} us of server CPU per {cpu['unit']} here, {cpu['article_us']:g} us in the "
        f"article: its runs use --cpu-scale {cpu['k']:g}")
    return cpu


def name(art: Article) -> str:
    """How progress names an article's runs: its seed, and its engine but for PostgreSQL."""
    return f"seed {art.seed}" + ("" if art.engine == "postgres" else f" on {engines.get(art.engine).title}")


def article_folder(folder: Path, art: Article) -> Path:
    """An article's runs' folder: seedNNN, or seedNNN-ENGINE but for PostgreSQL."""
    return folder / (f"seed{art.seed}" + ("" if art.engine == "postgres" else f"-{art.engine}"))


def reproduce(chosen: list[Article], base: Base, folder: Path, progress_for, say: Callable[[str], None]) -> dict:
    doc = {"kind": "reproduce", "engines": list(dict.fromkeys(art.engine for art in chosen)), "articles": []}
    t0 = time.monotonic()
    for art in chosen:
        results, failures = {}, {}
        try:
            cpu = calibrate(art, base, folder, progress_for, say)
        except Exception as exc:  # noqa: BLE001  the article's runs need K: they cannot go on without it
            why = _why(exc)
            say(f"{name(art)} CPU calibration failed: {why}")
            missing = {spec.key: art.not_run.get(spec.key, f"not run: the CPU calibration failed: {why}")
                       for spec in art.runs}
            doc["articles"].append(_article_doc(art, _figures(art, {}, missing), {"cpu calibration": why}, {}, None,
                                                None))
            continue
        k = cpu["k"] if cpu else 1.0
        scale = scale_factor(art)
        if scale:
            say(f"{name(art)}: the article's {scale['article_bytes'] / 1e9:.3g} GB {scale['what']} stands "
                f"as {scale['ours_bytes'] / 1e6:.0f} MB here: every cache at 1/{scale['factor']:g}, seeks as long as there "
                "(--scale-model)")
        for key, why in art.not_run.items():
            say(f"{name(art)} {key}: not run: {why}")
        runs = [spec for spec in art.runs if spec.key not in art.not_run]
        for i, spec in enumerate(runs, 1):
            artifacts = article_folder(folder, art) / folder_name(spec.key)
            artifacts.mkdir(parents=True)
            prefix = f"{name(art)} [{i}/{len(runs)}] {spec.key}: "
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
                        result = run_spec(spec, base, progress, artifacts, say, k, scale["factor"] if scale else 1.0,
                                          art.engine)
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
        missing = {**art.not_run, **{key: f"failed: {why}" for key, why in failures.items()}}
        doc["articles"].append(_article_doc(art, _figures(art, results, missing), failures, results, cpu, scale))
    doc["elapsed_s"] = time.monotonic() - t0
    return doc


def _figures(art: Article, results: dict, missing: dict[str, str]) -> list[dict]:
    """Each of the article's figures from the runs it needs, or, where one gave no result, why."""
    return [vars(f) | {"agrees": f.agrees} for f in (claim.figure(results, missing) for claim in art.claims)]


def _why(exc: Exception) -> str:
    """A failure as the table states it: ours in our words, anything else with its type."""
    return str(exc) if isinstance(exc, (WorkloadError, UserError)) else f"{type(exc).__name__}: {exc}"


def _article_doc(art: Article, figures: list, failures: dict, results: dict, cpu: dict | None,
                 scale: dict | None) -> dict:
    return {"seed": art.seed, "engine": art.engine, "title": art.title, "source": SOURCES.get(art.seed, ""),
            "hardware": art.hardware, "figures": figures, "failures": failures, "not_run": dict(art.not_run),
            "cpu_scale": cpu or {"k": 1.0, "source": "the article gives no CPU figure for a statement run here"},
            "scale_model": scale or {"factor": 1.0, "source": "the article does not state both its database size and its memory, to scale them together"},
            "runs": [{"key": s.key, "label": s.label or s.key, "workload": s.workload, "params": s.params,
                      "devices": [list(d) for d in s.devices], "places": s.places, "cache": s.cache,
                      "io_mode": s.io_mode, "summary": _summary(results.get(s.key))} for s in art.runs]}


def _summary(result: dict | None) -> dict | None:
    if result is None:
        return None
    top = next((e for e in result.get("top_events") or
                [e for ph in result.get("phases", []) for e in ph["top_events"]] if is_wait(e["event"])),
               None)
    return {"elapsed_s": result["elapsed_s"], "server_cpu_s": result["server_cpu_s"], "io_wait_s": result["io_wait_s"],
            "host_steal_s": result.get("host_steal_s", 0.0), "attempts": result.get("attempts", 1),
            "rates": result.get("rates", {}),
            "top_wait": top["event"] if top else None, "checks": result.get("checks", {})}
