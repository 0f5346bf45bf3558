"""The nodes of a cluster that made a sweep's or a comparison's runs: what each is, and how its
reference run differs from the others' (cluster/runs.py)."""

from __future__ import annotations

from dbtier.report.html import TableData
from dbtier.report.terminal import fmt


def nodes_table(nodes: list[dict]) -> TableData:
    rows = [[n["node"], f"{n['facts'].get('cpus')} x {n['facts'].get('cpu_model')}",
             f"{n['facts'].get('memory_gib')} GiB", n["facts"].get("kernel", "?"),
             f"{fmt(n['facts'].get('wakeup_delay_us', {}).get('p50', 0))} us", fmt(n["reference"]),
             f"{100 * n['offset']:+.1f}%"] for n in nodes]
    return TableData(["node", "CPUs", "memory", "kernel", "wake-up delay", f"reference {nodes[0]['figure']}", "offset"],
                     rows, "the nodes: each made the same reference run first (its offset: against the median node)",
                     1, conclusion=(6,))
