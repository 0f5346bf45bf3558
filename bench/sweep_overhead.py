"""What sending runs to a Ray cluster costs: `dbtier sweep --cluster` against the same runs here.

On Ray's own multi-node test cluster (a head taking no runs and K nodes on this machine, each offering
dbtier_node):

- added per run: the same sweep of one experiment (random-index, 2,000 rows, an emulated SATA SSD) run
  here and through a one-node cluster, several times each in alternation. A run's time is its ledger's
  start to its finish (on the cluster: handing the experiment to the node, the run there, its run
  directory shipped back and unpacked); the medians' difference is what Ray adds to each run. Goal: at
  most 2 s. Once per sweep, apart: connecting, checking the nodes and their reference runs.
- idle daemons: the CPU time Ray's processes of one node (its raylet and idle workers) use over 20 s
  of an idle cluster, as a share of one core. Goal: at most 1%.
- a sweep of N runs on K nodes: from its first run's start to its last run's finish, against
  ceil(N/K) x one run's time through Ray. Goal: within 1.05 x. On this 2-CPU machine every node shares the same two CPUs, so K=2 is the
  most it can show; on separate machines each node has its own.

Run: python bench/sweep_overhead.py [--json PATH]   (about three minutes)"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ray.cluster_utils import Cluster

SWEEP = """workload = "random-index"
[options]
rows = 2000
device = ["d=ssd-sata-mlc"]
[axes]
data-seed = {seeds}
"""
NODE = {"num_cpus": 1, "resources": {"dbtier_node": 1}, "object_store_memory": 80 << 20}


def sweep(folder: Path, seeds: list[int], cluster: str | None) -> tuple[float, dict]:
    path = folder / f"sweep-{time.monotonic_ns()}.toml"
    path.write_text(SWEEP.format(seeds=seeds))
    out = folder / "out"
    t = time.monotonic()
    cmd = [sys.executable, "-m", "dbtier", "sweep", str(path), "-o", str(out), "-q", "--json", str(folder / "s.json")]
    subprocess.run(cmd + (["--cluster", cluster] if cluster else []), check=True, capture_output=True, text=True)
    wall = time.monotonic() - t
    doc = json.loads((folder / "s.json").read_text())
    ledger = [json.loads(line) for line in (Path(doc["sweep_dir"]) / "ledger.jsonl").read_text().splitlines()]
    return wall, {"doc": doc, "ledger": ledger}


def run_s(ledger: list[dict]) -> float:
    """The sweep's one run, from its start to its finish in the ledger."""
    start = next(r["at"] for r in ledger if r["event"] == "started")
    return next(r["at"] for r in ledger if r["event"] == "done" and r["key"] != "reference") - start


def reference_s(ledger: list[dict]) -> float:
    """From the sweep's start (its first ledger record is written after connecting) to the first real
    run's start: the nodes' reference runs."""
    refs = [r["at"] for r in ledger if r["event"] == "reference"]
    first = min(r["at"] for r in ledger if r["event"] == "started")
    return first - min(refs) if refs else 0.0


def node_cpu_s(pids: list[int]) -> float:
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            pass
    return total


def descendants(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout.split()
    children: dict[int, list[int]] = {}
    for child, parent in zip(out[0::2], out[1::2]):
        children.setdefault(int(parent), []).append(int(child))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    report: dict = {}
    with tempfile.TemporaryDirectory(prefix="sweep-overhead-") as tmp:
        folder = Path(tmp)
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": 80 << 20,
                                                          "include_dashboard": False})
        try:
            one = c.add_node(**NODE)
            c.wait_for_nodes()
            here, there, fixed = [], [], []
            for _ in range(args.rounds):  # alternated: the host's drift falls on both
                wall_here, got = sweep(folder, [1], None)
                here.append(run_s(got["ledger"]))
                wall, got = sweep(folder, [1], c.address)
                there.append(run_s(got["ledger"]))
                fixed.append((wall - there[-1] - reference_s(got["ledger"])) - (wall_here - here[-1]))
            run_here, run_there = statistics.median(here), statistics.median(there)
            added = run_there - run_here
            report["one_run"] = {"here_s": here, "on_cluster_s": there, "added_s": added,
                                 "added_once_per_sweep_s": fixed}
            print(f"one run: here {run_here:.2f} s (of {[round(v, 2) for v in here]}), through Ray {run_there:.2f} s "
                  f"(of {[round(v, 2) for v in there]}): {added:+.2f} s per run (goal: at most 2 s); once per sweep "
                  f"besides: {statistics.median(fixed):.2f} s (connecting, checking the node) and its reference run")

            time.sleep(5)  # the idle node: its raylet's and its idle workers' CPU over 20 s
            pids = descendants(one.all_processes["raylet"][0].process.pid)
            before, t = node_cpu_s(pids), time.monotonic()
            time.sleep(20)
            idle = (node_cpu_s(pids) - before) / (time.monotonic() - t)
            report["idle_node_core_share"] = idle
            print(f"an idle node's Ray processes ({len(pids)}): {100 * idle:.2f}% of a core (goal: at most 1%)")

            c.add_node(**NODE)
            c.wait_for_nodes()
            n, k = 4, 2
            wall, got = sweep(folder, list(range(1, n + 1)), c.address)
            led = got["ledger"]
            span = (max(r["at"] for r in led if r["event"] == "done" and r["key"] != "reference")
                    - min(r["at"] for r in led if r["event"] == "started"))
            bound = math.ceil(n / k) * run_there
            report["sweep"] = {"runs": n, "nodes": k, "runs_span_s": span, "wall_s": wall, "bound_s": bound,
                               "ratio": span / bound}
            print(f"{n} runs on {k} nodes: from the first start to the last finish {span:.2f} s, against "
                  f"ceil({n}/{k}) x {run_there:.2f} s = {bound:.2f} s: {span / bound:.2f}x (goal: within 1.05x; both "
                  f"nodes share this machine's {os.cpu_count()} CPUs); the whole sweep {wall:.2f} s")
        finally:
            c.shutdown()
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
