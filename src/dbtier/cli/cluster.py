"""`dbtier cluster status`: the nodes of a Ray cluster that can take runs, what each is, and the ones
refused because their dbtier or PostgreSQL is not this machine's."""

from __future__ import annotations

from pathlib import Path

import click

from dbtier.errors import UserError


@click.group(context_settings={"max_content_width": 100})
def cluster() -> None:
    """The Ray cluster that `sweep --cluster` sends its runs to.

    \b
    A cluster from nothing (dbtier and its PostgreSQL installed alike on every machine):
      ray start --head --port=6379                                  # on one machine
      ray start --address=HEAD:6379 --resources='{"dbtier_node": 1}' # on each machine that runs
      dbtier cluster status --cluster HEAD:6379                      # from any of them

    Each node takes one run at a time (a run owns its machine). docs/cluster.md has the rest: Ray's
    cluster launcher, ports, and what a node keeps."""


@cluster.command("status")
@click.option("--cluster", "address", required=True, metavar="ADDRESS",
              help="the cluster: ray://HOST:PORT, HOST:PORT (the head's) or auto")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="also write the nodes as JSON here")
@click.option("-q", "--quiet", is_flag=True, help="print only the nodes that take runs, one a line (and errors)")
@click.option("--wide", is_flag=True, help="print every column, however narrow the terminal")
def status(address: str, json_path: Path | None, quiet: bool, wide: bool) -> None:
    """List the nodes that can take runs: CPU model and count, memory, kernel, dbtier and PostgreSQL
    versions and the host's wake-up delay (how late a 1 ms sleep ends). A node whose dbtier or
    PostgreSQL differs from this machine's is named and refused (exit status 2)."""
    from dbtier.cluster.pool import Pool
    from dbtier.report import jsonout, outputs
    from dbtier.report.html import TableData
    from dbtier.report.terminal import console, fmt, show

    json_path = outputs.check_file(json_path, "--json") if json_path else None
    pool = Pool.connect(address)
    try:
        out = console(wide=wide)
        rows = [[n.name, f"{n.facts.get('cpus', '?')} x {n.facts.get('cpu_model', '?')}",
                 f"{n.facts.get('memory_gib', '?')} GiB", str(n.facts.get("kernel", "?")),
                 str(n.facts.get("dbtier", "?")), str(n.facts.get("postgres", "?")),
                 f"{fmt(n.facts.get('wakeup_delay_us', {}).get('p50', 0))} us", n.refused or n.silent or "takes runs"]
                for n in pool.nodes]
        if quiet:
            for n in pool.ready:
                out.print(n.name, markup=False)
        elif pool.nodes:
            show(out, TableData(["node", "CPUs", "memory", "kernel", "dbtier", "PostgreSQL", "wake-up delay", "state"],
                                rows, f"cluster {address}: this machine has dbtier {pool.driver['dbtier']}, "
                                      f"PostgreSQL {pool.driver['postgres']}", 1, conclusion=(7,)))
        if json_path:
            jsonout.write(json_path, {"kind": "cluster", "address": address, "driver": pool.driver,
                                      "nodes": [{"node_id": n.node_id, "address": n.address, "facts": n.facts,
                                                 "refused": n.refused} for n in pool.nodes]})
        refusal = pool.refusal()
        if refusal:
            raise UserError(refusal)
    finally:
        pool.close()
