"""What a node of a cluster does for the driver: one run at a time in a workspace of its own, its run
directory shipped back as a tar with the node's facts in it (node.json), and, at the end or on an
interrupt, its workspace removed. Nothing here imports Ray: the pool sends these functions to the
nodes, and a test may call them here."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Callable

from dbtier.cluster import facts

NODE_FACTS = "node.json"


def workspace_base(node_id: str) -> Path:
    """This node's own folder for the driver's runs (several test nodes share one machine; each has
    its own): under /dev/shm like every workspace, named by the node."""
    from dbtier.workspace import default_base

    return default_base() / f"dbtier-node-{os.geteuid()}-{node_id[:12]}"


class _Progress:
    """A run's phases, told to the driver as they begin."""

    def __init__(self, tell: Callable[[str], None]):
        self.tell = tell

    def phase(self, text: str, total: int | None = None) -> None:
        self.tell(text)

    def advance(self, n: int = 1) -> None:
        pass


def do(work: str | dict, node_id: str, tell: Callable[[str], None] = lambda _t: None) -> dict:
    """The driver's work: an experiment's TOML (run), or {"reproduce": SEED, "engine": ..., "quick": ...,
    "pg_bin": ..., "mariadb_bin": ...} (one article on one engine, its CPU calibration and runs on this node)."""
    if isinstance(work, dict):
        return reproduce_article(work["reproduce"], work.get("quick", False), work.get("pg_bin"), node_id, tell,
                                 work.get("engine", "postgres"), work.get("mariadb_bin"))
    return run(work, node_id, tell)


def _shipped(folder: Path, node_facts: dict, **more) -> dict:
    (folder / NODE_FACTS).write_text(json.dumps(node_facts, indent=1))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return {"name": folder.name, "tar": buf.getvalue(), "facts": node_facts, **more}


def _ready(node_id: str) -> tuple[Path, dict]:
    base = workspace_base(node_id)
    base.mkdir(mode=0o755, exist_ok=True)
    base.chmod(0o755)  # the servers' user passes through it when root runs them
    return base, {**facts.collect(wakeup=False), "node_id": node_id}


def reproduce_article(seed: str, quick: bool, pg_bin: str | None, node_id: str,
                      tell: Callable[[str], None] = lambda _t: None, engine: str = "postgres",
                      mariadb_bin: str | None = None) -> dict:
    """One seed article reproduced here on one engine, as `dbtier reproduce --only SEED --engine ENGINE`
    would: its CPU calibration on this node (its --cpu-scale is this node's), then its runs. Ships its
    folder (seedNNN, or seedNNN-ENGINE), with article.json (the article's part of result.json) in it."""
    from dbtier.reproduce import run as reproduce_run

    base, node_facts = _ready(node_id)
    options = reproduce_run.Base(pg_bin=Path(pg_bin) if pg_bin else None,
                                 mariadb_bin=Path(mariadb_bin) if mariadb_bin else None, workspace=base)
    chosen = reproduce_run.articles(quick, [seed], (engine,))
    reproduce_run.check(chosen, options)
    with tempfile.TemporaryDirectory(prefix="out-", dir=base) as out:
        doc = reproduce_run.reproduce(chosen, options, Path(out),
                                      lambda prefix: contextlib.nullcontext(_Progress(lambda t: tell(prefix + t))), tell)
        folder = reproduce_run.article_folder(Path(out), chosen[0])
        folder.mkdir(exist_ok=True)
        (folder / "article.json").write_text(json.dumps({**doc["articles"][0], "elapsed_s": doc["elapsed_s"]}))
        return _shipped(folder, node_facts, failure=None)


def run(experiment_toml: str, node_id: str, tell: Callable[[str], None] = lambda _t: None) -> dict:
    """Runs one experiment here; returns {"name", "tar" (its run directory, gzipped), "facts",
    "failure"}. A bad experiment raises the UserError a run here would."""
    from dbtier.experiments import runner
    from dbtier.experiments.experiment import Experiment

    base, node_facts = _ready(node_id)
    with tempfile.TemporaryDirectory(prefix="out-", dir=base) as out:
        spec = Path(out) / "experiment.toml"
        spec.write_text(experiment_toml, encoding="utf-8")
        exp = Experiment.from_toml(spec)
        spec.unlink()
        outcome = runner.run(exp, Path(out) / "runs", base, say=lambda _l: None,
                             progress_for=lambda: contextlib.nullcontext(_Progress(tell)))
        return _shipped(outcome.run_dir, node_facts, failure=outcome.failure)


def unpack(shipped: dict, into: Path) -> Path:
    """The run directory a node shipped, made under `into` under its own name, or with -2, -3... when
    another node's run of the same second has it; returns it. Only its own files: a member outside the
    folder, a link or a device is refused."""
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".unpacking-", dir=into) as tmp:
        with tarfile.open(fileobj=io.BytesIO(shipped["tar"]), mode="r:gz") as tar:
            tar.extractall(tmp, filter="data")
        name, n = shipped["name"], 1
        while True:
            final = into / (name if n == 1 else f"{name}-{n}")
            try:
                os.rename(Path(tmp) / shipped["name"], final)  # fails on an existing non-empty folder
                return final
            except OSError:
                if not final.exists():
                    raise
                n += 1


def clean(node_id: str) -> bool:
    """Stops what a killed run left (its claims' servers) and removes this node's workspace. Returns
    whether there was one."""
    from dbtier.workspace import Workspace

    base = workspace_base(node_id)
    if not base.is_dir():
        return False
    try:
        Workspace.open(base).reap()
    except Exception:  # a workspace it cannot open is removed all the same
        pass
    shutil.rmtree(base, ignore_errors=True)
    return True
