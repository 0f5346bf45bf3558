"""`dbtier sweep SWEEP.toml`: one workload crossed over axes, each point an experiment, resumable."""

from __future__ import annotations

from pathlib import Path

import click

from dbtier.errors import UserError


@click.command("sweep", context_settings={"max_content_width": 100})
@click.argument("sweep_file", required=False, type=click.Path(path_type=Path), metavar="SWEEP.toml")
@click.option("--repeat", type=int, default=1, show_default=True, metavar="N",
              help="run each experiment N times (every run in one shuffled order): each is judged by its median")
@click.option("--repeat-seed", "repeat_seed", type=int, default=0, show_default=True, metavar="S",
              help="the seed of the runs' shuffled order")
@click.option("--resume", type=click.Path(path_type=Path), metavar="DIR",
              help="a sweep's folder: run only the experiments its ledger has no finished run of")
@click.option("--cluster", metavar="ADDRESS",
              help="run on a Ray cluster (ray://HOST:PORT, HOST:PORT or auto): one run per node at a time")
@click.option("--max-runs", type=int, default=1000, show_default=True, metavar="N",
              help="refuse a sweep that expands to more runs than this")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=Path("results"), show_default=True,
              help="where the sweep's folder (runs/, ledger.jsonl, result.json, report.html) is made")
@click.option("--workspace", type=click.Path(path_type=Path), help="a folder in which dbtier makes its own")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="also write the sweep's result here")
@click.option("-q", "--quiet", is_flag=True, help="print only errors and the sweep's folder")
@click.option("--wide", is_flag=True, help="print every column, however narrow the terminal")
def sweep(sweep_file: Path | None, repeat: int, repeat_seed: int, resume: Path | None, cluster: str | None,
          max_runs: int, output: Path,
          workspace: Path | None, json_path: Path | None, quiet: bool, wide: bool) -> Path:
    """Run one workload over every combination of its axes, here or on a Ray cluster.

    \b
    Example (sweep.toml):
      workload = "pgbench"
      [options]
      init = true
      scale = 4
      time = 10
      [[layout]]
      name = "one-volume"
      device = ["data=ebs-gp3"]
      [[layout]]
      name = "wal-apart"
      device = ["data=ebs-gp3", "wal=ebs-gp3{iops=6000}"]
      place = "data=data,wal=wal"
      [axes]
      cache = ["16MB", "64MB"]
      client = [2, 4]

    \b
      dbtier sweep sweep.toml --repeat 3
      dbtier sweep --resume results/sweep-pgbench-20261127-120000     # after a stop: the rest only
      dbtier sweep sweep.toml --cluster ray://head:10001               # one run per node at a time

    SWEEP.toml names the workload; [options] holds what every experiment shares, with an experiment
    file's keys; each [[layout]]
    its devices (provisioned in braces) and placement; [axes] the options crossed, each a list of
    values. Every point is checked before the first runs. Each run gets a run directory under the
    sweep's runs/; ledger.jsonl records every start and finish, so a stopped sweep resumes with
    --resume. At the end: each experiment's figure, median and range over its runs.

    With --cluster, each node (started with ray start --resources='{"dbtier_node": 1}', the driver's
    dbtier and PostgreSQL installed) first makes the same small reference run, which shows how the
    nodes differ; then each run goes to a free node, in its own workspace, and its run directory comes
    back here with the node's facts (node.json). A run whose node is lost runs again once, elsewhere."""
    from dbtier.cli.progress import progress_for
    from dbtier.experiments import sweep as sweep_mod
    from dbtier.report import jsonout, outputs
    from dbtier.report.terminal import console, show

    if (sweep_file is None) == (resume is None):
        raise UserError("give a sweep file, or --resume DIR of a sweep that stopped (not both)")
    if max_runs < 1:
        raise UserError(f"--max-runs {max_runs}: at least 1")
    out = console(wide=wide)
    say = (lambda _line: None) if quiet else (lambda line: out.print(line, markup=False))
    json_path = outputs.check_file(json_path, "--json") if json_path else None
    folder = sweep_mod.run_sweep(sweep_file, output, workspace, repeat, repeat_seed, max_runs, resume, say,
                                 lambda: progress_for(out, quiet), cluster=cluster)
    doc = __import__("json").loads((folder / "result.json").read_text())
    if not quiet:
        show(out, sweep_mod.table_data(doc))
        if doc.get("nodes"):
            from dbtier.report.nodesview import nodes_table

            show(out, nodes_table(doc["nodes"]))
    out.print(f"sweep: {folder} (result.json, report.html, ledger.jsonl, runs/)", markup=False)
    if json_path:
        jsonout.write(json_path, {**doc, "sweep_dir": str(folder)})
    return folder
