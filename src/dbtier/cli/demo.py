"""`dbtier demo`: seed 000 on PostgreSQL 18, exactly as `dbtier reproduce --only 000` runs it (its
devices, its scale model, its figures and their measured reasons), with a short view: the article's
two speed-ups beside ours, and each run's elapsed time, CPU and I/O wait."""

from __future__ import annotations

import functools
from pathlib import Path

import click
from rich.table import Table

from dbtier.cli.progress import progress_for
from dbtier.engines.postgres.lab import LabOptions
from dbtier.report import html, jsonout, outputs
from dbtier.report.rundir import run_dir
from dbtier.report.terminal import console, fmt
from dbtier.reproduce import run as runner
from dbtier.workspace import Workspace

SEED = "000"


def runs_table(doc: dict) -> Table:
    """Each run in a line: where it ran and what took its time."""
    table = Table(title="the runs", title_justify="left")
    for col in ("run", "device", "elapsed s", "server CPU s", "I/O wait s", "top wait"):
        table.add_column(col, justify="right" if col.endswith(" s") else "left")
    for art in doc["articles"]:
        for run in art["runs"]:
            s = run["summary"] or {}
            table.add_row(run["label"], ", ".join(f"{name}={profile}" for name, profile in run["devices"]),
                          fmt(s.get("elapsed_s")), fmt(s.get("server_cpu_s")), fmt(s.get("io_wait_s")),
                          s.get("top_wait") or "-")
    return table


@click.command()
@click.option("--quick", is_flag=True, help="the quick sizes of 'reproduce --quick' (2,000 lookups, 3 scans)")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=Path("results"), show_default=True,
              help="where the run directory is written")
@click.option("--pg-bin", type=click.Path(path_type=Path), help="another PostgreSQL 18 install's bin folder")
@click.option("--workspace", type=click.Path(path_type=Path),
              help="a folder in which dbtier makes its own for clusters (default: /dev/shm, in RAM)")
@click.option("--quiet", "-q", is_flag=True, help="print only the figures and the run directory")
@click.option("--wide", is_flag=True, help="print every column, however narrow the terminal")
def demo(quick: bool, output: Path, pg_bin: Path | None, workspace: Path | None, quiet: bool, wide: bool) -> None:
    """Seed 000 on PostgreSQL: random index lookups and full table scans on an emulated 7200 rpm SATA
    disk against an emulated SATA MLC SSD on a 3 Gb/s port (about 3 minutes; --quick about 1).

    The same runs as 'dbtier reproduce --only 000': the article's 14 GB table as a scale model, its
    8 GB cache divided as much, each database wholly on one device, a cold cache. Prints the
    article's two speed-ups beside ours, with the measured reason of each, and each run's elapsed
    time, server CPU and I/O wait. Writes OUTPUT/demo-<time>/ with result.json (as reproduce writes
    it), report.html and each run's own result.json and server log."""
    out = console(wide=wide)
    say = (lambda _line: None) if quiet else (lambda line: out.print(line, markup=False))
    base = LabOptions(pg_bin=pg_bin, workspace=workspace)
    chosen = runner.articles(quick, [SEED])
    runner.check(chosen, base)  # every run's options and room, before the first thing is made
    outputs.check_dir(output, "--output")
    with run_dir(output, "demo", Workspace.open(workspace)) as folder:
        doc = runner.reproduce(chosen, base, folder.path,
                               functools.partial(lambda prefix: progress_for(out, quiet, prefix=prefix)), say)
        doc["quick"] = quick
        jsonout.write(folder.path / "result.json", doc)
        from dbtier.report import verdict
        from dbtier.reproduce import view  # matplotlib: loaded once there is something to chart

        html.write(folder.path / "report.html", "dbtier demo: seed 000 on PostgreSQL 18",
                   f"as 'dbtier reproduce --only {SEED}{' --quick' if quick else ''}' runs it",
                   view.sections(doc), verdict.reproduce(doc))
    for line in verdict.reproduce(doc):
        out.print(line, markup=False)
    for table in view.terminal_tables(doc):
        out.print(table)
    if not quiet:
        out.print(runs_table(doc))
    out.print(f"run directory: {folder.final} (result.json, report.html)", markup=False)
    folder.check()
