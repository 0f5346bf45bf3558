"""The driver's side of a Ray cluster: connect, check every node, hand out runs one per node.

A node takes runs when it offers the resource `dbtier_node` (`ray start --resources
'{"dbtier_node": 1}'`): each run asks for all of it, so a run owns its machine. Each task is pinned
to a node the driver checked (its dbtier and PostgreSQL the driver's) and is never retried by Ray
(max_retries=0): a run whose node is lost comes back as `Lost`, and the caller's ledger decides
whether to run it again. Progress comes back through a queue as each run enters a phase."""

from __future__ import annotations

import queue as queue_mod
import socket
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from dbtier.cluster import facts, node
from dbtier.errors import UserError

RESOURCE = "dbtier_node"
NAMESPACE = "dbtier"


def _ray():
    try:
        import ray
    except ImportError:
        raise UserError("--cluster needs Ray: pip install 'dbtier[cluster]'") from None
    return ray


def check_address(address: str) -> None:
    """The address well formed and answering (before a command makes anything), and Ray installed."""
    _ray()
    if address != "auto":
        _reachable(address)


def _reachable(address: str) -> None:
    """One line, before Ray's own minute of retries, when nothing answers at HOST:PORT."""
    hostport = address.removeprefix("ray://")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--cluster {address}: give ray://HOST:PORT, HOST:PORT (the head's address) or auto")
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            pass
    except OSError as exc:
        raise UserError(f"--cluster {address}: nothing answers there ({exc.strerror or exc}); is `ray start "
                        "--head` running on that machine, and is the port open?") from None


@dataclass
class Node:
    node_id: str
    address: str
    facts: dict
    refused: str | None = None  # why it may take no runs (another version): a sweep does not start
    silent: str | None = None   # why it takes none now (it did not answer): the others take the runs

    @property
    def name(self) -> str:
        return f"{self.facts.get('host', '?')} ({self.address}, {self.node_id[:8]})"

    @property
    def short(self) -> str:
        return f"{self.facts.get('host', '?')}/{self.node_id[:8]}"


@dataclass
class Done:
    job: object
    node: Node
    shipped: dict


@dataclass
class Lost:
    job: object
    node: Node
    reason: str


@dataclass
class Failed:
    job: object
    node: Node
    error: str


@dataclass
class Pool:
    address: str
    nodes: list[Node] = field(default_factory=list)
    driver: dict = field(default_factory=dict)

    @classmethod
    def connect(cls, address: str, say: Callable[[str], None] = lambda _l: None) -> "Pool":
        ray = _ray()
        check_address(address)
        try:
            ray.init(address=address, namespace=NAMESPACE, logging_level="ERROR", log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UserError(f"--cluster {address}: Ray could not connect ({str(exc).splitlines()[0][:200]})") from None
        pool = cls(address, driver=facts.collect(wakeup=False))
        pool.nodes = pool._check_nodes()
        say(f"cluster {address}: {len(pool.ready)} node(s) take runs")
        for n in pool.nodes:
            if n.silent:
                say(f"  node {n.name} {n.silent}: it takes no runs")
        return pool

    def _check_nodes(self, answer_s: float = 20.0) -> list[Node]:
        """Every live node offering dbtier_node, with its facts; a node whose dbtier or PostgreSQL is not
        the driver's is refused, one that does not answer in `answer_s` (lost, not yet marked dead) is
        left out."""
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        alive = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(RESOURCE, 0) >= 1]
        probe = ray.remote(_node_facts)
        refs = [probe.options(num_cpus=0, max_retries=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
            n["NodeID"], soft=False)).remote() for n in alive]
        ready = ray.wait(refs, num_returns=len(refs), timeout=answer_s)[0] if refs else []
        nodes = []
        for n, ref in zip(alive, refs):
            nd = Node(n["NodeID"], n.get("NodeManagerAddress", "?"), {})
            if ref not in ready:
                nd.silent = f"did not answer in {answer_s:.0f} s"
                ray.cancel(ref, force=True)
            else:
                try:
                    nd.facts = ray.get(ref)
                    nd.refused = facts.mismatch(self.driver, nd.facts)
                except ray.exceptions.RayError as exc:
                    nd.silent = f"could not say what it is ({str(exc).strip().splitlines()[-1][:150]})"
            nodes.append(nd)
        return nodes

    @property
    def ready(self) -> list[Node]:
        return [n for n in self.nodes if n.refused is None and n.silent is None]

    def refusal(self) -> str | None:
        """The one line that stops a sweep: a node of another version, or no node at all."""
        bad = [n for n in self.nodes if n.refused]
        if bad:
            return (f"node {bad[0].name} has {bad[0].refused}: install the driver's versions there or stop its "
                    "Ray node" + (f" ({len(bad) - 1} more refused)" if len(bad) > 1 else ""))
        if self.nodes and not self.ready:
            return f"--cluster {self.address}: no node answered ({self.nodes[0].name} {self.nodes[0].silent})"
        if not self.ready:
            return (f"--cluster {self.address}: no node offers the resource {RESOURCE}; start each node with "
                    f"ray start --address=HEAD:PORT --resources='{{\"{RESOURCE}\": 1}}'")
        return None

    def run(self, jobs: list, work_of: Callable[[object], str | dict], tell: Callable[[object, Node, str], None],
            on_start: Callable[[object, Node], None] = lambda _j, _n: None) -> Iterator[Done | Lost | Failed]:
        """Runs each job's work (node.do: an experiment's TOML, or an article to reproduce) on a free
        node, at most one per node, yielding each outcome as it comes. A job sent back with requeue()
        (after a Lost) goes to another free node. On an interrupt every run is cancelled (its server
        stopped there), then the nodes' workspaces are removed."""
        ray = _ray()
        from ray.util.queue import Queue
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if getattr(self, "_progress", None) is None:  # one queue (an actor) for the pool's runs
            self._progress = Queue(actor_options={"num_cpus": 0})
        progress = self._progress
        task = ray.remote(_run_on_node)
        self._pending = pending = list(jobs)
        free = list(self.ready)
        running: dict = {}  # ref -> (job, node)
        try:
            while pending or running:
                while pending and free:
                    job, nd = pending.pop(0), free.pop(0)
                    ref = task.options(num_cpus=0, max_retries=0, resources={RESOURCE: 1},
                                       scheduling_strategy=NodeAffinitySchedulingStrategy(nd.node_id, soft=False)
                                       ).remote(work_of(job), nd.node_id, progress, id(job))
                    running[ref] = (job, nd)
                    on_start(job, nd)
                if not running:
                    break  # jobs left but no node: the caller is told by what it did not get back
                ready, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
                self._drain(progress, running, tell)
                for ref in ready:
                    job, nd = running.pop(ref)
                    try:
                        shipped = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:
                        free.append(nd)
                        yield Failed(job, nd, _task_error(exc))
                        continue
                    except ray.exceptions.RayError as exc:
                        # the node or its worker is gone: it takes no more runs (Ray may not yet
                        # have marked it dead, and a run pinned to a dead node waits, unschedulable)
                        self.nodes = [n for n in self.nodes if n.node_id != nd.node_id]
                        yield Lost(job, nd, type(exc).__name__)
                        continue
                    free.append(nd)
                    yield Done(job, nd, shipped)
        except BaseException:
            self._stop(running)
            raise
        finally:
            self._drain(progress, running, tell)

    def requeue(self, job) -> None:
        """A lost job runs again, on the next free node (called while run() yields)."""
        self._pending.append(job)

    def _drain(self, progress, running: dict, tell) -> None:
        by_id = {id(job): (job, nd) for job, nd in running.values()}
        while True:
            try:
                job_id, text = progress.get_nowait()
            except (queue_mod.Empty, Exception):
                return
            if job_id in by_id:
                tell(*by_id[job_id], text)

    def _stop(self, running: dict, grace_s: float = 60.0) -> None:
        """Cancels every run (Ray interrupts it there: its server is stopped and its claim removed), waits
        for them, force-kills what did not end, then removes each node's workspace."""
        ray = _ray()
        for ref in running:
            ray.cancel(ref, force=False)
        deadline = time.monotonic() + grace_s
        left = list(running)
        while left and time.monotonic() < deadline:
            _done, left = ray.wait(left, num_returns=len(left), timeout=1.0)
        for ref in left:
            ray.cancel(ref, force=True)
        self.clean()

    def clean(self) -> None:
        """Each live node's workspace removed (what its runs kept between runs: loaded databases)."""
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        task = ray.remote(node.clean)
        refs = [task.options(num_cpus=0, max_retries=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
            n.node_id, soft=False)).remote(n.node_id) for n in self.nodes if _node_alive(n.node_id)]
        try:
            ray.get(refs, timeout=120)
        except Exception:
            pass

    def close(self) -> None:
        ray = _ray()
        if ray.is_initialized():
            if getattr(self, "_progress", None) is not None:
                try:
                    ray.kill(self._progress.actor)
                except Exception:
                    pass
            ray.shutdown()


def _node_facts() -> dict:
    return facts.collect()


def _run_on_node(work: str | dict, node_id: str, progress, job_id: int) -> dict:
    def tell(text: str) -> None:
        try:
            progress.put_nowait((job_id, text))
        except Exception:  # progress is a courtesy; the run goes on without it
            pass

    return node.do(work, node_id, tell)


def _task_error(exc) -> str:
    """The run's own one-line error (a UserError raised there), else the exception's last line."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, UserError):
        return str(cause)
    text = str(cause or exc).strip().splitlines()
    return text[-1][:300] if text else type(exc).__name__


def _node_alive(node_id: str) -> bool:
    ray = _ray()
    return any(n["NodeID"] == node_id and n.get("Alive") for n in ray.nodes())
