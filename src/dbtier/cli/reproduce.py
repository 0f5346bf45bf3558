"""`dbtier reproduce`: every seed experiment, each article's figures beside ours."""

from __future__ import annotations

import functools
from pathlib import Path

import click

from dbtier import engines
from dbtier.cli.progress import progress_for
from dbtier.errors import UserError
from dbtier.report import html, jsonout, outputs
from dbtier.report.rundir import run_dir
from dbtier.report.terminal import console
from dbtier.reproduce import run as runner
from dbtier.workspace import Workspace


@click.command()
@click.option("--quick", is_flag=True, help="smaller tables and shorter runs: about 10 minutes in all")
@click.option("--only", metavar="SEEDS", help="some articles only, comma-separated (e.g. 000,003)")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=Path("results"), show_default=True,
              help="where the run directory is written")
@click.option("--engine", default="postgres", show_default=True, metavar="ENGINES",
              help="the database the articles' runs use: postgres, mariadb, or both (postgres,mariadb: each "
                   "article on one then the other, its figures with a column per engine)")
@click.option("--pg-bin", type=click.Path(path_type=Path), help="another PostgreSQL 18 install's bin folder")
@click.option("--mariadb-bin", type=click.Path(path_type=Path),
              help="with --engine mariadb, another MariaDB 10.11 install's folder, holding its bin/")
@click.option("--workspace", type=click.Path(path_type=Path),
              help="a folder in which dbtier makes its own for clusters (default: /dev/shm, in RAM)")
@click.option("--cluster", metavar="ADDRESS",
              help="each article on a node of a Ray cluster, its CPU calibration and runs on that node "
                   "(docs/cluster.md)")
@click.option("--quiet", "-q", is_flag=True, help="print only the figure tables")
def reproduce(quick: bool, only: str | None, output: Path, engine: str, pg_bin: Path | None,
              mariadb_bin: Path | None, workspace: Path | None, cluster: str | None, quiet: bool) -> None:
    """Run every seed article's experiments on device profiles modelled on its hardware, and print
    each headline figure of the article beside ours, with the measured reason where they differ
    (CPU share, where the device time went, cache hits, flushes).

    \b
    seed 000  ASE: random lookups 21x, table scans 2.17x (SSD against HDD)
    seed 001  PostgreSQL 8.3: an index alone on an SSD: 3-10% of the time cold, <20% cross, 70-85% hot
    seed 002  ASE: build 7x, dump 5.5x, restore 5x; OLTP 1.65x log on flash, 1.81x all flash, 13x small cache
    seed 003  Oracle: inserts 1.09x; updates 1.1x, 1.18x, 2.1x by locality; merge join 3.06x
    seed 004  ASE: direct I/O against dsync, per command

    An article that states its CPU's time for a statement we can run (seed 003: 240 us per update;
    seed 004: its bulk load, 55.7 us a row, which its devices did not limit) first runs that
    statement here, and its runs use --cpu-scale K, the article's CPU time over ours, so the server
    is as slow as the article's machine; the others run at this machine's speed.
    An article that states a size of its data and its memory (seeds 000, 002, 004: 004's lineitem,
    the one table its commands act on) runs as a scale model of it (--scale-model F, F that size over
    the same data of ours): its caches at the article's sizes divided by F, its disks' seeks as long
    as over the article's data.

    On MariaDB (--engine mariadb) the same runs on InnoDB, where they mean the same thing: a run
    InnoDB cannot make (seed 001's index alone on an SSD: InnoDB keeps an index in its table's file)
    is not run, and its figures say why.

    Writes OUTPUT/reproduce-<time>/ with result.json (every figure and run summary), report.html (one
    section per article) and each run's own result.json and server log."""
    chosen_seeds = None
    if only is not None:
        chosen_seeds = [s.strip() for s in only.split(",") if s.strip()]
        if not chosen_seeds:
            raise UserError(f"--only {only!r}: give seed articles, comma-separated (articles: {', '.join(runner.ARTICLES)})")
        unknown = [s for s in chosen_seeds if s not in runner.ARTICLES]
        if unknown:
            raise UserError(f"--only {only}: no seed article {', '.join(unknown)} (articles: {', '.join(runner.ARTICLES)})")
    chosen_engines = _engines(engine)
    if mariadb_bin is not None and "mariadb" not in chosen_engines:
        raise UserError("--mariadb-bin is for --engine mariadb")
    out = console()
    say = (lambda _line: None) if quiet else (lambda line: out.print(line, markup=False))
    base = runner.Base(pg_bin=pg_bin, mariadb_bin=mariadb_bin, workspace=workspace)
    chosen = runner.articles(quick, chosen_seeds, chosen_engines)
    runner.check(chosen, base)  # every run's options and room, before the first thing is made
    outputs.check_dir(output, "--output")
    if cluster:
        from dbtier.cluster.pool import check_address

        check_address(cluster)  # before anything is made
    total = sum(len(a.runs) - len(a.not_run) for a in chosen)
    on = f" on {' and '.join(engines.get(e).title for e in chosen_engines)}"
    say(f"{total} runs over {len(chosen_seeds or runner.ARTICLES)} article(s){on}{' (quick)' if quick else ''}")
    with run_dir(output, "reproduce", Workspace.open(workspace)) as folder:
        if cluster:
            from dbtier.reproduce import on_cluster

            doc = on_cluster.reproduce(chosen, quick, base, cluster, folder.path, say)
        else:
            doc = runner.reproduce(chosen, base, folder.path,
                                   functools.partial(lambda prefix: progress_for(out, quiet, prefix=prefix)), say)
        doc["quick"] = quick
        jsonout.write(folder.path / "result.json", doc)
        from dbtier.report import verdict
        from dbtier.reproduce import view  # matplotlib: loaded once there is something to chart

        sections = view.sections(doc)
        if doc.get("nodes"):
            from dbtier.report.html import Section
            from dbtier.report.nodesview import nodes_table

            sections.append(Section("the cluster's nodes", tables=[nodes_table(doc["nodes"])]))
        html.write(folder.path / "report.html", "dbtier reproduce: the seed articles' figures beside ours",
                   f"{'quick' if quick else 'full'} run, {doc['elapsed_s'] / 60:.1f} minutes", sections,
                   verdict.reproduce(doc))
    for line in verdict.reproduce(doc):
        out.print(line, markup=False)
    for table in view.terminal_tables(doc):
        out.print(table)
    if doc.get("nodes"):
        from dbtier.report.nodesview import nodes_table
        from dbtier.report.terminal import show

        show(out, nodes_table(doc["nodes"]))
    out.print(f"{doc['elapsed_s'] / 60:.1f} minutes; run directory: {folder.final} (result.json, report.html)",
              markup=False)
    folder.check()


def _engines(text: str) -> tuple[str, ...]:
    """--engine's engines, each checked, in the order given, once."""
    names = tuple(dict.fromkeys(e.strip() for e in text.split(",") if e.strip()))
    if not names:
        raise UserError(f"--engine {text!r}: give an engine, or several comma-separated (engines: "
                        f"{', '.join(engines.names())})")
    for name in names:
        engines.get(name)  # a one-line refusal of an unknown one
    return names
