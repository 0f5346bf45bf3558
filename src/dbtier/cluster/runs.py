"""Runs handed to a cluster's nodes, as sweep and compare hand them: each node's reference run first,
then the runs, one per node at a time; a run whose node was lost runs again once, on another node, and
a run that fails stops them all. Each event is told to `record` (the sweep's ledger writes it)."""

from __future__ import annotations

import contextlib
import json
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from dbtier.cluster import node as node_side
from dbtier.cluster.pool import Done, Lost, Pool
from dbtier.errors import UserError

#: the run each node makes first: small, the same everywhere, so that what differs is the node
REFERENCE = {"workload": "random-index", "rows": 1000, "device": ["d=ssd-sata-mlc"]}
#: how many times a run is started in all, by one command, when its node is lost
ATTEMPTS = 2


def connect(address: str, say: Callable[[str], None]) -> Pool:
    """The cluster's pool, its nodes checked: a node of another version, or none that takes runs,
    refused in one line."""
    pool = Pool.connect(address, say)
    try:
        refusal = pool.refusal()
        if refusal:
            raise UserError(refusal)
    except BaseException:
        pool.close()
        raise
    return pool


@contextlib.contextmanager
def connected(address: str, scratch: Path, say: Callable[[str], None]) -> Iterator[tuple[Pool, list[dict]]]:
    """(pool, its nodes with their reference runs' offsets), the reference runs' folders made and removed
    in `scratch`; at the end every node's workspace is removed and the connection closed."""
    pool = connect(address, say)
    try:
        scratch.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".dbtier-reference-", dir=scratch) as tmp:
            nodes = [{k: v for k, v in r.items() if k != "run_dir"}
                     for r in offsets(reference_runs(pool, Path(tmp), say))]
        yield pool, nodes
    finally:
        pool.clean()
        pool.close()


def reference_runs(pool: Pool, into: Path, say: Callable[[str], None]) -> list[dict]:
    """Each ready node's reference run, unpacked under `into`: a record per node (its facts, the run's
    headline figure and value, its run directory)."""
    from dbtier.experiments.compare import headline
    from dbtier.experiments.experiment import Experiment

    reference = Experiment.from_dict(REFERENCE, "the reference run")
    say(f"reference run on each of {len(pool.ready)} node(s)")
    records = []
    with contextlib.closing(pool.run([n.node_id for n in pool.ready], lambda _j: reference.to_toml(),
                                     lambda *_a: None)) as outcomes:
        for out in outcomes:
            if not isinstance(out, Done):
                say(f"  {out.node.name}: no reference run ({getattr(out, 'error', None) or getattr(out, 'reason', '')})")
                continue
            run_dir = node_side.unpack(out.shipped, into)
            figure, value, _higher = headline(json.loads((run_dir / "result.json").read_text()))
            records.append({"node": out.node.name, "node_id": out.node.node_id, "facts": out.node.facts,
                            "figure": figure, "value": value, "run_dir": run_dir})
            say(f"  {out.node.name}: {figure} {value:.4g}")
    return records


def offsets(records: list[dict]) -> list[dict]:
    """Each node's reference figure against the median node's (+5%: its figure 5% above)."""
    if not records:
        return []
    middle = statistics.median(r["value"] for r in records)
    return [{**r, "reference": r["value"], "offset": r["value"] / middle - 1 if middle else 0.0} for r in records]


@dataclass
class _Try:
    job: object
    attempt: int


def run_jobs(pool: Pool, jobs: list, work_of: Callable[[object], str | dict], into: Path,
             say: Callable[[str], None], label: Callable[[object], str],
             first_attempt: Callable[[object], int] = lambda _j: 1, record: Callable[..., None] = lambda *_a, **_k: None,
             resume: str = "") -> list[tuple[object, Path, object]]:
    """Runs every job's work on the cluster (node.do: an experiment's TOML, or an article to
    reproduce); returns (job, its run directory under `into`, its node) as each finished.
    first_attempt(job): its attempt number (a resumed sweep's run started before is its next
    attempt). record(event, job, node, attempt=, ...) is told every start, finish, loss and failure.
    Raises a UserError naming the run when one fails, is lost on its last attempt, or no node is left."""
    finished = []

    def on_start(t: _Try, nd) -> None:
        record("started", t.job, nd, attempt=t.attempt)
        say(f"{label(t.job)} on {nd.name}" + (f" (attempt {t.attempt})" if t.attempt > 1 else ""))

    def tell(t: _Try, nd, text: str) -> None:
        say(f"  {label(t.job)} on {nd.short}: {text}")

    open_jobs = len(jobs)
    tries = [_Try(j, first_attempt(j)) for j in jobs]
    with contextlib.closing(pool.run(tries, lambda t: work_of(t.job), tell, on_start)) as outcomes:
        for out in outcomes:
            t = out.job
            if isinstance(out, Done):
                run_dir = node_side.unpack(out.shipped, into)
                record("done", t.job, out.node, attempt=t.attempt, run_dir=run_dir)
                finished.append((t.job, run_dir, out.node))
                open_jobs -= 1
                if out.shipped.get("failure"):
                    say(f"  {label(t.job)}: {out.shipped['failure']}")
            elif isinstance(out, Lost):
                record("lost", t.job, out.node, attempt=t.attempt, error=f"node lost ({out.reason})")
                if t.attempt >= first_attempt(t.job) + ATTEMPTS - 1:
                    raise UserError(f"{label(t.job)}: its node was lost on attempt {t.attempt} too{resume}")
                say(f"  {label(t.job)}: node {out.node.name} lost; it runs again (attempt {t.attempt + 1})")
                pool.requeue(_Try(t.job, t.attempt + 1))
            else:
                record("failed", t.job, out.node, attempt=t.attempt, error=out.error)
                raise UserError(f"{label(t.job)} on {out.node.name}: {out.error}{resume}")
    if open_jobs:
        raise UserError(f"every node of the cluster was lost with {open_jobs} run(s) to go{resume}")
    return finished
