"""`dbtier workload`: production's own workload, brought in as a workload directory."""

from __future__ import annotations

from pathlib import Path

import click

from dbtier.errors import UserError
from dbtier.report import jsonout, outputs


@click.group(context_settings={"max_content_width": 100})
def workload() -> None:
    """Production's own workload: imported from its log or its statistics into a workload directory,
    which 'dbtier run replay' replays in the lab.

    \b
    Examples:
      dbtier workload import /var/log/postgresql/postgresql-*.csv -o mywork
      dbtier workload import postgresql.log.1.gz postgresql.log --prefix '%m [%p] %q%u@%d/%a %c %e ' -o mywork
      dbtier workload import --statements pgss.csv --sessions 16 --duration 300 -o mywork   # synthetic

    docs/production.md gives the settings production logs with."""


@workload.command(name="import")
@click.argument("logs", nargs=-1, type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", required=True, type=click.Path(path_type=Path), metavar="WORKLOAD_DIR",
              help="the workload directory to write: a new or empty folder, or a workload directory to replace")
@click.option("--format", "fmt", type=click.Choice(["csvlog", "jsonlog", "stderr"]),
              help="the log's destination format (default: found from the files' content)")
@click.option("--prefix", metavar="TEXT",
              help="a stderr log's log_line_prefix, as the server's setting has it (default: PostgreSQL's "
                   "'%m [%p] ' or docs/production.md's, recognised from the first lines)")
@click.option("--database", metavar="NAME",
              help="the database whose sessions to keep (default: the one with most statements); with "
                   "--statements, its datname, or its oid (dbid) if the export has no datname")
@click.option("--user", metavar="NAME",
              help="keep this user's statements alone (default: every user's); with --statements, its "
                   "rolname, or its oid (userid) if the export has no rolname")
@click.option("--statements", "stats_file", type=click.Path(path_type=Path), metavar="FILE",
              help="no log: a CSV or JSON export of pg_stat_statements, for a synthetic workload")
@click.option("--dsn", metavar="DSN",
              help="no log: read pg_stat_statements from this server (read-only; a role with "
                   "pg_read_all_stats), for a synthetic workload")
@click.option("--sessions", type=click.IntRange(1, 1000), default=8, show_default=True,
              help="synthetic: the number of sessions")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), default=60.0, show_default=True,
              metavar="SECONDS", help="synthetic: the workload's length")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), metavar="PER_S",
              help="synthetic: statements per second over all sessions (default: production's own with "
                   "--dsn, else 10 per session)")
@click.option("--seed", type=int, default=1, show_default=True, help="synthetic: the mix's random seed")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="write the statistics as JSON")
@click.option("--quiet", "-q", is_flag=True, help="print only the workload directory's path")
def import_command(logs, out, fmt, prefix, database, user, stats_file, dsn, sessions, duration, rate, seed, json_path,
                   quiet) -> None:
    """Import production's workload from its log files (LOGS), or from pg_stat_statements.

    LOGS are the server's log files, any number (a rotated log's files, gzip-compressed or not, are
    put in the order of their times), all of one destination: csvlog, jsonlog or stderr. Production
    must log every statement (log_statement = all, or log_min_duration_statement = 0) and its
    connections (docs/production.md). Each session is kept with its user, application, start and
    end; each statement with its start, duration, protocol (simple, or the extended protocol's
    execute with its logged values) and the error production answered. COPY FROM STDIN, fast-path
    calls and portal fetches are counted and left out (the log holds no data for them).

    Without a log, --statements or --dsn builds a SYNTHETIC workload from pg_stat_statements: its
    statement classes in proportion to their calls, over --sessions sessions and --duration seconds,
    with each parameter's table.column named for the replay to draw values from."""
    if json_path is not None:
        json_path = outputs.check_file(json_path, "--json")
    statistics = stats_file is not None or dsn is not None
    if statistics and logs:
        raise UserError("give log files or pg_stat_statements (--statements, --dsn), not both")
    if stats_file is not None and dsn is not None:
        raise UserError("give --statements or --dsn, not both")
    if not statistics and not logs:
        raise UserError("give the server's log files, or --statements FILE / --dsn DSN without a log "
                        "(see 'dbtier workload import --help')")
    if statistics:
        from dbtier.production.synthetic import import_statistics

        result = import_statistics(out, statements=stats_file, dsn=dsn, database=database, user=user, sessions=sessions,
                                   duration_s=duration, seed=seed, rate_per_s=rate)
        doc = _statistics_doc(result)
    else:
        from dbtier.production.importlog import import_logs

        ctx = click.get_current_context()
        given = [f"--{n}" for n in ("sessions", "duration", "rate", "seed")
                 if ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE]
        if given:
            raise UserError(f"{given[0]} shapes a synthetic workload (--statements, --dsn); a log's workload "
                            "is as production ran it")
        doc = _log_doc(import_logs(logs, out, database=database, fmt=fmt, prefix=prefix, user=user))
    if not quiet:
        _show(doc)
    if json_path is not None:
        jsonout.write(json_path, doc)
    click.echo(f"written: {doc['workload']}")


def _classes(capture, top: int = 10) -> list[dict]:
    rows = capture.classes.slice(0, top).to_pylist()
    return [{"class_id": r["class_id"], "calls": r["calls"],
             "mean_ms": None if r["mean_s"] is None else r["mean_s"] * 1000, "normalized": r["normalized"]}
            for r in rows]


def _common(cap) -> dict:
    return {"kind": "workload-import", "workload": str(cap.path), "capture_kind": cap.kind,
            "synthetic": cap.synthetic, "database": cap.database, "start": cap.start, "span_s": cap.span_s,
            "sources": [{"path": s.path, "format": s.format} for s in cap.sources],
            "counts": dict(cap.counts), "top_classes": _classes(cap)}


def _log_doc(imported) -> dict:
    return {**_common(imported.capture), "format": imported.format, "prefix": imported.prefix,
            "databases": imported.databases,
            "unreadable": {"count": imported.unreadable.count,
                           "examples": [{"file": f, "line": n, "what": w} for f, n, w in imported.unreadable.examples]},
            "notes": imported.notes}


def _statistics_doc(result) -> dict:
    return {**_common(result.capture), "format": result.capture.sources[0].format, "prefix": None,
            "rate_per_s": result.rate_per_s, "rate_from": result.rate_from, "left_out": result.left_out,
            "left_out_calls": result.left_out_calls, "notes": result.notes}


def _show(doc: dict) -> None:
    from rich.table import Table

    from dbtier.report.terminal import console, fmt

    out = console()
    c = doc["counts"]
    sources = doc["sources"]
    what = f"{len(sources)} {doc['format']} file{'s' if len(sources) > 1 else ''}"
    if doc["synthetic"]:
        out.print(f"[bold]SYNTHETIC workload[/] of database {doc['database']} from pg_stat_statements "
                  f"({sources[0]['format'].rsplit('-', 1)[-1]}): {c['statements']:,} statements over "
                  f"{c['sessions']} sessions and {doc['span_s']:g} s, at {doc['rate_per_s']:,.1f} statements/s "
                  f"({doc['rate_from']})", soft_wrap=True)
    else:
        out.print(f"Imported database {doc['database']} from {what}: {doc['start']}, {fmt(doc['span_s'])} s",
                  soft_wrap=True)
    t = Table(show_header=False, box=None, padding=(0, 2))
    t.add_column(justify="left")
    t.add_column(justify="right")
    t.add_column(justify="left")
    rows = [("sessions", c["sessions"], ""), ("statements", c["statements"], ""),
            ("  simple protocol", c["simple"], ""), ("  extended protocol (execute)", c["execute"], ""),
            ("prepared statements (named)", c["prepared"], ""), ("statement classes", c["classes"], "")]
    if doc["synthetic"]:
        left = doc["left_out"]
        for why, n in sorted(left.items()):
            rows.append((f"classes left out: {why}", n, f"{doc['left_out_calls'][why]:,} calls"))
    else:
        others = {d: n for d, n in doc["databases"].items() if d != doc["database"]}
        rows += [("COPY FROM STDIN (not replayed)", c["copy_from_stdin"], ""),
                 ("fast-path calls (not replayed)", c["fastpath"], ""),
                 ("portal fetches (not replayed)", c["portal_fetches"], ""),
                 ("statements of other databases", c["other_databases"],
                  ", ".join(f"{d} {n:,}" for d, n in sorted(others.items(), key=lambda x: -x[1])[:4])),
                 *([("statements of other users", c["other_users"], "")] if c["other_users"] else []),
                 ("errors production answered", c["errors"], ""),
                 ("unreadable lines", c["unreadable_lines"], "")]
    rows.append(("time span", None, f"{fmt(doc['span_s'])} s"))
    for name, n, note in rows:
        t.add_row(name, "" if n is None else f"{n:,}", note)
    out.print(t)
    for ex in doc.get("unreadable", {}).get("examples", []):
        out.print(f"  unreadable: {ex['file']}:{ex['line']}: {ex['what']}", soft_wrap=True, markup=False)
    if doc["top_classes"]:
        ct = Table(title="statement classes by calls", title_justify="left")
        ct.add_column("calls", justify="right")
        ct.add_column("mean ms", justify="right")
        ct.add_column("statement", overflow="ellipsis", no_wrap=True, max_width=100)
        for r in doc["top_classes"]:
            ct.add_row(f"{r['calls']:,}", "-" if r["mean_ms"] is None else fmt(r["mean_ms"]),
                       " ".join(r["normalized"].split()))
        out.print(ct)
    for note in doc["notes"]:
        out.print(f"note: {note}", soft_wrap=True, markup=False)
