"""What a node of a cluster does for the driver: one run at a time in a workspace of its own, its run
directory shipped back as a tar with the node's facts in it (node.json), and, at the end or on an
interrupt, its workspace removed. Nothing here imports Ray: the pool sends these functions to the
nodes, and a test may call them here."""

from __future__ import annotations

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


def run(experiment_toml: str, node_id: str, tell: Callable[[str], None] = lambda _t: None) -> dict:
    """Runs one experiment here; returns {"name", "tar" (its run directory, gzipped), "facts",
    "failure"}. A bad experiment raises the UserError a run here would."""
    import contextlib

    from dbtier.experiments import runner
    from dbtier.experiments.experiment import Experiment

    base = workspace_base(node_id)
    base.mkdir(mode=0o755, exist_ok=True)
    base.chmod(0o755)  # the servers' user passes through it when root runs them
    node_facts = {**facts.collect(wakeup=False), "node_id": node_id}
    with tempfile.TemporaryDirectory(prefix="out-", dir=base) as out:
        spec = Path(out) / "experiment.toml"
        spec.write_text(experiment_toml, encoding="utf-8")
        exp = Experiment.from_toml(spec)
        spec.unlink()
        outcome = runner.run(exp, Path(out) / "runs", base, say=lambda _l: None,
                             progress_for=lambda: contextlib.nullcontext(_Progress(tell)))
        (outcome.run_dir / NODE_FACTS).write_text(json.dumps(node_facts, indent=1))
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(outcome.run_dir, arcname=outcome.run_dir.name)
    return {"name": outcome.run_dir.name, "tar": buf.getvalue(), "facts": node_facts, "failure": outcome.failure}


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
