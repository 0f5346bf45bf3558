"""`dbtier stats`: production's statistics: a snapshot of a live server, two snapshots' delta (its
profile over that time), and a lab run beside it."""

from __future__ import annotations

from pathlib import Path

import click

from dbtier.report import jsonout, outputs


@click.group("stats", context_settings={"max_content_width": 100})
def stats() -> None:
    """Production's statistics: snapshot a live server, difference two snapshots, hold a lab run beside them.

    \b
    Examples:
      dbtier stats snapshot --dsn 'host=db1 dbname=shop user=monitor' -o before.json
      ... production works for an hour ...
      dbtier stats snapshot --dsn 'host=db1 dbname=shop user=monitor' -o after.json
      dbtier stats delta before.json after.json -o hour.json
      dbtier stats compare hour.json RUN_DIR              # a lab run beside production
      dbtier run sql ... --production hour.json           # the same, in the run's report
      dbtier advise --from-stats hour.json --fast nvme=nvme-gen4 --budget 20GB

    Blocks "read" in production's statistics are blocks PostgreSQL did not find in shared_buffers:
    some of them were hits in the kernel's page cache, and only pg_stat_kcache tells them apart."""


@stats.command("snapshot", context_settings={"max_content_width": 100})
@click.option("--dsn", required=True, metavar="DSN",
              help="production's connection string ('host=db1 dbname=shop user=monitor' or a postgresql:// URI); the "
                   "role needs pg_read_all_stats (or superuser); a password comes from ~/.pgpass or PGPASSWORD")
@click.option("--output", "-o", required=True, type=click.Path(path_type=Path), metavar="FILE",
              help="the snapshot's JSON file (written whole or not at all)")
@click.option("-q", "--quiet", is_flag=True, help="print only errors")
def snapshot(dsn: str, output: Path, quiet: bool) -> None:
    """Snapshot a live server's statistics, read only, into a JSON file.

    \b
    One READ ONLY transaction reads: pg_stat_io; pg_stat_user_tables and _indexes with
    pg_statio_user_tables and _indexes (scans, tuples, blocks read and hit) and every relation's size
    (its TOAST's too); pg_stat_database of this database; pg_stat_statements and
    pg_stat_statements_info, and pg_stat_kcache, when installed (the file says when not); every row
    of pg_settings; the server's version and system_identifier, the time and the database.

    Take one before and one after the time you want profiled, then 'dbtier stats delta'."""
    from dbtier.production import snapshot as snap

    output = outputs.check_file(output, "--output")
    doc = snap.snapshot(dsn)
    snap.write_json(output, doc)
    if not quiet:
        notes = [doc[k]["note"] for k in ("statements", "kcache") if not doc[k]["installed"]]
        click.echo(f"snapshot of {doc['server']['database']} (system {doc['server']['system_identifier']}) at "
                   f"{doc['taken_at']}: {len(doc['tables'])} tables, {len(doc['indexes'])} indexes, "
                   f"{len(doc['settings'])} settings")
        for note in notes:
            click.echo(f"note: {note}")
    click.echo(str(output))


@stats.command("delta", context_settings={"max_content_width": 100})
@click.argument("first", type=click.Path(path_type=Path))
@click.argument("second", type=click.Path(path_type=Path))
@click.option("--output", "-o", required=True, type=click.Path(path_type=Path), metavar="DELTA",
              help="the delta's JSON file, which 'stats compare', 'run --production' and 'advise --from-stats' read")
@click.option("--json", "json_path", type=click.Path(path_type=Path), metavar="PATH",
              help="also write the delta here (the same document)")
@click.option("-q", "--quiet", is_flag=True, help="print only errors and the delta's file")
def delta(first: Path, second: Path, output: Path, json_path: Path | None, quiet: bool) -> None:
    """Production's profile between two snapshots of one server: FIRST, then SECOND, taken later.

    \b
    Per object (table, index, TOAST): blocks read and hit, its share of the reads, scans and tuples;
    pg_stat_io by backend, object and context; statements by class (pg_stat_statements); the
    database's commits and blocks. Refused, in one line: snapshots of two servers (system_identifier)
    or databases, a second no later than the first, statistics reset between them (stats_reset, or a
    counter that went down).

    A delta is a file of its own so that these checks are made once and every reader (compare, run
    --production, advise --from-stats) reads one profile."""
    from dbtier.production import delta as delta_mod
    from dbtier.production.snapshot import write_json

    output = outputs.check_file(output, "--output")
    json_path = outputs.check_file(json_path, "--json") if json_path else None
    doc = delta_mod.from_files(first, second)
    write_json(output, doc)
    if json_path:
        write_json(json_path, doc)
    if not quiet:
        from dbtier.report import productionview
        from dbtier.report.terminal import console

        productionview.show_delta(console(), doc)
    click.echo(str(output))


@stats.command("compare", context_settings={"max_content_width": 100})
@click.argument("delta_path", metavar="DELTA", type=click.Path(path_type=Path))
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--top", type=click.IntRange(3, 1000), default=10, show_default=True, metavar="N",
              help="the rank correlation is over production's N objects with the most blocks read")
@click.option("--json", "json_path", type=click.Path(path_type=Path), metavar="PATH", help="also write the comparison here")
@click.option("-q", "--quiet", is_flag=True, help="print only errors and the rank correlation")
def compare(delta_path: Path, run_dir: Path, top: int, json_path: Path | None, quiet: bool) -> None:
    """A lab run (RUN_DIR) beside production (DELTA): per object its share of the blocks read and written.

    \b
    Prints each object's blocks read and its share in production (the delta) and in the lab (the
    run's per-object I/O), the share of writes (production's from tuples written: its statistics
    count no blocks written per object), the Spearman rank correlation of the reads over production's
    top N objects, and in plain words where and why the lab differs: an object one side read and the
    other never did, a smaller or larger cache (shared_buffers of the two), a statement command
    production ran and the lab did not. 'dbtier run ... --production DELTA' puts the same in the
    run's result.json and report."""
    from dbtier.production import delta as delta_mod, labcompare

    json_path = outputs.check_file(json_path, "--json") if json_path else None
    d = delta_mod.read(delta_path)
    result = labcompare.load_run(run_dir)
    doc = labcompare.compare(d, result, top)
    if json_path:
        jsonout.write(json_path, {"kind": "stats-compare", "run_dir": str(run_dir), **doc})
    rho = doc["rank_correlation"]
    if quiet:
        click.echo("undefined" if rho is None else f"{rho:.3f}")
        return
    from dbtier.report import productionview
    from dbtier.report.terminal import console

    productionview.show_comparison(console(), doc)
