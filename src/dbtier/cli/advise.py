"""`dbtier advise RUN_DIR`: where limited fast storage should go, predicted, and verified on request."""

from __future__ import annotations

from pathlib import Path

import click

from dbtier.errors import UserError
from dbtier.report import jsonout, outputs

#: at most this many placements run live by --verify
VERIFY_MAX = 10


@click.command(context_settings={"max_content_width": 100})
@click.argument("run_dir", type=click.Path(path_type=Path), required=False)
@click.option("--from-stats", "from_stats", type=click.Path(path_type=Path), metavar="DELTA",
              help="instead of a run: estimate from production's statistics alone (a 'dbtier stats delta' file), "
                   "without predicting or running anything")
@click.option("--fast", metavar="NAME=PROFILE",
              help="the fast device: a profile from 'dbtier devices' (a device of the run, or a new one)")
@click.option("--catalog", "catalog_name", metavar="NAME|FILE",
              help="instead of --fast: which volumes to buy, from a priced catalogue ('dbtier catalog' lists them), "
                   "with --target or --max-cost")
@click.option("--target", metavar="SPEC",
              help="with --catalog, what the run must reach at least cost: elapsed<=120s, tps>=500, tpm>=20000, "
                   "p99<=20ms, or p99[NAME]<=20ms for one transaction type, pgbench script or replayed statement "
                   "class ('p99[class 12]<=5ms')")
@click.option("--volumes", "most_volumes", type=int, default=3, show_default=True, metavar="N",
              help="with --catalog, at most this many volumes (data, indexes, the WAL, temp; MariaDB's data, log, "
                   "undo, temp)")
@click.option("--risk", "max_risk", type=float, metavar="FRACTION",
              help="with --catalog and --target, the largest share of the predictor's measured errors under which "
                   "the advice may miss the target (default 0.1; 0: none of them)")
@click.option("--duration", metavar="TIME",
              help="with --catalog, how long production sustains this load (24h): burst credits are judged spent "
                   "when the run is shorter, and the advice says when they would run out")
@click.option("--slow", metavar="NAME=PROFILE",
              help="the slow device (default: the device the run's data was on, with its profile; with --from-stats "
                   "production's device, PROFILE alone naming it 'slow', default hdd-sata-7200)")
@click.option("--budget", metavar="SIZE", help="how much the fast device holds for this database, e.g. 2GB")
@click.option("--cost", metavar="fast=$/GB,slow=$/GB", help="the two devices' prices per GiB (with --max-cost)")
@click.option("--max-cost", type=float, metavar="$",
              help="what the storage may cost in all (with --cost); with --catalog, the most to spend a month")
@click.option("--verify", type=int, default=0, show_default=True, metavar="K",
              help="run the K best placements live on the emulated devices, beside their predictions")
@click.option("--cluster", metavar="ADDRESS",
              help="with --verify: run the verifying runs on a Ray cluster, one per node (docs/cluster.md)")
@click.option("--workspace", type=click.Path(path_type=Path),
              help="a folder in which dbtier makes its own, for the predictions' emulated state and, with "
                   "--verify, clusters and devices (default: /dev/shm)")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=Path("results"), show_default=True,
              help="where the advice's directory (result.json, report.html) is written")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="also write the advice as JSON here")
@click.option("-q", "--quiet", is_flag=True, help="print only errors and the advice's directory")
@click.option("--wide", is_flag=True, help="print every column, however narrow the terminal")
def advise(run_dir: Path | None, from_stats: Path | None, fast, catalog_name, target, most_volumes, max_risk, duration,
           slow, budget, cost, max_cost, verify, cluster, workspace, output, json_path, quiet, wide) -> None:
    """Where should limited fast storage go? Advice from a recorded run, predicted and verified.

    \b
    Examples:
      dbtier run oltp -d hdd=hdd-sata-7200 --trace                 # record once, on the slow device
      dbtier advise RUN_DIR --fast ssd=ssd-sata-mlc --budget 200MB
      dbtier advise RUN_DIR --fast nvme=nvme-gen4 --cost fast=0.10,slow=0.02 --max-cost 5 --verify 2

    The candidates are the run's tables (each with its TOAST), indexes, materialized views, the WAL,
    temp files and the system catalogs; on a MariaDB run its tables (each index in its table's file),
    the redo log, undo, temp, the binary log and the system tablespace; each sized as it was at the
    end of the run. Placements that
    fit the budget are predicted by replaying the run's trace ('dbtier predict'): every role-level
    one; of the objects with at least 1% of the device time, up to 12, every one with no room left
    for another (beyond 12, a MILP (HiGHS) picks from each object's predicted benefit, and its best
    answers are predicted whole); then a local search refines the best. Objects that interact (a
    table and its index on one disk) are judged by the replay, not by adding up.

    \b
    It prints the placement to use (and its --place text), the next best ones, the speed-up against
    fast storage curve (where the next gigabyte stops paying), and the objects that matter with what
    the run measured of them, and writes the script that makes it so (migration.sql for PostgreSQL,
    migration.sh for MariaDB). --verify K runs the K best live and prints predicted beside measured.
    A prediction keeps what the run decided: its database cache, plans and data (see 'dbtier
    predict --help').

    \b
    --from-stats DELTA estimates from production's statistics instead, with no run:
      dbtier advise --from-stats hour.json --fast nvme=nvme-gen4 --budget 20GB --slow hdd-sata-7200
    each object's reads and writes per second, the share of them random as far as the statistics
    tell, times the two devices' expected 8 KiB latencies, chosen under the budget by the same
    knapsack; printed as an estimate with its assumptions, and with the command that checks it live.

    
    --catalog NAME|FILE asks which volumes to buy instead:
      dbtier advise RUN_DIR --catalog aws --target 'p99<=20ms'
      dbtier advise RUN_DIR --catalog azure --max-cost 200 --volumes 2 --duration 24h
    each part of the database (data, indexes, the WAL, temp; MariaDB's data, log, undo, temp) on each
    offer, provisioned step by step
    (size, IOPS, throughput), predicted; every layout on at most --volumes volumes combined and priced;
    the cheapest that meet the target predicted whole. It prints the finding, the answers ranked with
    their monthly price and the saving against the recorded layout, the -d and --place to run each."""
    if cluster and not verify:
        raise UserError("--cluster runs --verify's live runs: give --verify K too")
    if cluster:
        from dbtier.cluster.pool import check_address

        check_address(cluster)  # before anything is predicted or written
    if catalog_name is not None:
        if from_stats is not None or fast or slow or budget or cost:
            raise UserError("--catalog chooses the volumes itself: give it with --target or --max-cost, without "
                            "--fast, --slow, --budget, --cost or --from-stats")
        return _catalog(run_dir, catalog_name, target, max_cost, most_volumes, max_risk, duration, verify, workspace,
                        output, json_path, quiet, wide, cluster)
    if target is not None or duration is not None or max_risk is not None:
        raise UserError("--target, --risk and --duration go with --catalog (which volumes to buy)")
    if fast is None:
        raise UserError("give --fast NAME=PROFILE (where limited fast storage should go) or --catalog NAME (which "
                        "volumes to buy)")
    if from_stats is not None:
        return _from_stats(run_dir, from_stats, fast, slow, budget, cost, max_cost, verify, json_path, quiet)
    if run_dir is None:
        raise UserError("give the run directory to advise on (dbtier run ... --trace printed it), or --from-stats DELTA")
    if verify < 0 or verify > VERIFY_MAX:
        raise UserError(f"--verify {verify}: give 0 (none) to {VERIFY_MAX} placements to run live")
    outputs.check_dir(output, "--output")
    if json_path is not None:
        json_path = outputs.check_file(json_path, "--json")
    from dbtier.advisor import advice as advice_mod
    from dbtier.prediction import recording
    from dbtier.report.terminal import console
    from dbtier.workspace import Workspace

    out = console(wide=wide)
    Workspace.locate(workspace)  # checked before anything is read or made
    rec = recording.load(run_dir)
    q = advice_mod.question(rec, fast, slow, budget, cost, max_cost)
    specs = None
    if verify:
        from dbtier.advisor import verify as verify_mod
        specs = advice_mod.device_specs(q)
        verify_mod.check(rec, specs, advice_mod.extreme_placements(q), workspace)
    from dbtier.cli.progress import progress_for

    say = (lambda _line: None) if quiet else (lambda line: out.print(line, markup=False))
    ws = Workspace.open(workspace)
    ws.reap(say)
    with progress_for(out, quiet) as progress:
        progress.phase("predicting placements")
        doc, advisor = advice_mod.advise(
            q, lambda n, _what: n % 25 == 0 and progress.phase(f"predicting placements: {n:,} so far"), ws)
    from dbtier.report import adviseview, html
    from dbtier.report.rundir import run_dir as make_run_dir

    def write(folder: Path) -> None:
        jsonout.write(folder / "result.json", doc)
        html.write(folder / "report.html", f"dbtier advise {doc['workload']}", doc["run_dir"],
                   adviseview.sections(doc))

    # The advice is written before it is verified: live runs take minutes, and an interrupted
    # verification keeps the advice it was verifying.
    with make_run_dir(output, f"advise-{doc['workload']}", ws) as folder:
        from dbtier.advisor import migration
        doc["migration"] = migration.write(folder.path, rec, q.candidates,
                                           advisor.placement(frozenset(doc["recommended"]["fast"])), dict(q.devices),
                                           f"dbtier advise {doc['workload']}: --place {doc['recommended']['place']}")
        write(folder.path)
    advice_dir = folder.final
    folder.check()
    if verify:
        say(f"advice: {advice_dir}; verifying it live")
        placements = [("advised", doc["recommended"])] + [(f"alt{i + 2}", o) for i, o in enumerate(doc["alternatives"])]
        placements = placements[:verify]

        def progress_at(prefix):
            return progress_for(out, quiet, prefix=prefix)
        runs = verify_mod.run(rec, specs, [(label, advisor.placement(frozenset(o["fast"]))) for label, o in placements],
                              output, workspace, ws, say, progress_at, cluster=cluster)
        doc["verify"] = [{**r, "place": o["place"], "predicted": o["value"], "fast_bytes": o["fast_bytes"]}
                         for (_l, o), r in zip(placements, runs)]
        doc["verified_best"] = advice_mod.verified_best(doc)
        write(advice_dir)
    if json_path is not None:
        jsonout.write(json_path, {**doc, "advice_dir": str(advice_dir)})
    if quiet:
        out.print(str(advice_dir), markup=False)
        return
    adviseview.show(out, doc)
    out.print(doc["migration"]["summary"], markup=False, soft_wrap=True)
    out.print(f"advice: {advice_dir} (result.json, report.html, {doc['migration']['file']})", markup=False,
              soft_wrap=True)



def _from_stats(run_dir, delta_path, fast, slow, budget, cost, max_cost, verify, json_path, quiet) -> None:
    if run_dir is not None:
        raise UserError(f"give a run directory ({run_dir}) or --from-stats DELTA, not both")
    if verify:
        raise UserError("--verify runs a run's placements live; an estimate from statistics has no run: use the "
                        "command it prints to check it")
    if json_path is not None:
        json_path = outputs.check_file(json_path, "--json")
    from dbtier.advisor import from_stats
    from dbtier.production import delta as delta_mod
    from dbtier.report import productionview
    from dbtier.report.terminal import console

    doc = from_stats.estimate(delta_mod.read(delta_path), fast, slow, budget, cost, max_cost)
    if json_path is not None:
        jsonout.write(json_path, doc)
    out = console()
    if quiet:
        out.print(doc["recommended"]["place"], markup=False)
        return
    productionview.show_estimate(out, doc)


def _catalog(run_dir, catalog_name, target, max_cost, most, max_risk, duration, verify, workspace, output, json_path,
             quiet, wide, cluster=None) -> None:
    if run_dir is None:
        raise UserError("give the run directory to advise on (dbtier run ... --trace printed it)")
    if verify < 0 or verify > VERIFY_MAX:
        raise UserError(f"--verify {verify}: give 0 (none) to {VERIFY_MAX} answers to run live")
    outputs.check_dir(output, "--output")
    if json_path is not None:
        json_path = outputs.check_file(json_path, "--json")
    from dbtier.advisor import catalog as catalogs, volumes
    from dbtier.cli.progress import progress_for
    from dbtier.prediction import recording
    from dbtier.report import adviseview, html
    from dbtier.report.rundir import run_dir as make_run_dir
    from dbtier.report.terminal import console
    from dbtier.workspace import Workspace

    cat = catalogs.load(catalog_name)
    goal = volumes.parse_target(target) if target is not None else None
    span = volumes.parse_duration(duration)
    out = console(wide=wide)
    Workspace.locate(workspace)
    rec = recording.load(run_dir)
    if verify:
        from dbtier.advisor import verify as verify_mod
        verify_mod.check_trusted(rec)
        verify_mod.workload_of(rec)  # the workload can run again: its files are there, unchanged
    ws = Workspace.open(workspace)
    ws.reap((lambda _line: None) if quiet else (lambda line: out.print(line, markup=False)))
    with progress_for(out, quiet) as progress:
        progress.phase("predicting volumes")
        doc, answers = volumes.advise(rec, cat, goal, max_cost, most, span, ws,
                                       lambda n, what: progress.phase(f"predicting volumes: {n:,} so far ({what})"),
                                       volumes.RISK if max_risk is None else max_risk)
    with make_run_dir(output, f"advise-{doc['workload']}", ws) as folder:
        from dbtier.advisor import migration
        from dbtier.advisor.candidates import candidates
        best = answers[0]
        doc["migration"] = migration.write(
            folder.path, rec, candidates(rec), best.placement(), {n: c.profile() for n, c in best.volumes()},
            f"dbtier advise {doc['workload']} --catalog {cat.name}: {best.device_args()} --place {best.place_text()}")
        jsonout.write(folder.path / "result.json", doc)
        html.write(folder.path / "report.html", f"dbtier advise {doc['workload']} --catalog {cat.name}",
                   doc["run_dir"], adviseview.volume_sections(doc))
    folder.check()
    if verify:
        doc["verify"] = _verify_volumes(rec, answers[:verify], goal, output, workspace, ws, out, quiet, cluster)
        jsonout.write(folder.final / "result.json", doc)
        html.write(folder.final / "report.html", f"dbtier advise {doc['workload']} --catalog {cat.name}",
                   doc["run_dir"], adviseview.volume_sections(doc))
    if json_path is not None:
        jsonout.write(json_path, {**doc, "advice_dir": str(folder.final)})
    if quiet:
        out.print(str(folder.final), markup=False)
        return
    adviseview.show_volumes(out, doc)
    out.print(doc["migration"]["summary"], markup=False, soft_wrap=True)
    out.print(f"advice: {folder.final} (result.json, report.html, {doc['migration']['file']})", markup=False,
              soft_wrap=True)


def _verify_volumes(rec, answers, goal, output, workspace, ws, out, quiet, cluster=None) -> list[dict]:
    """The top answers run live on their volumes, each figure measured beside its prediction."""
    from dbtier.advisor import verify as verify_mod, volumes
    from dbtier.cli.progress import progress_for
    from dbtier.devices.spec import DeviceSpec

    say = (lambda _line: None) if quiet else (lambda line: out.print(line, markup=False))
    runs = []
    for i, a in enumerate(answers):
        specs = [DeviceSpec(n, c.profile(), spec=c.spec) for n, c in a.volumes()]
        verify_mod.check(rec, specs, [a.placement()], workspace)
        runs.append(("advised" if i == 0 else f"alt{i + 1}", a.placement(), specs))
    say(f"verifying {len(runs)} answer{'s' if len(runs) > 1 else ''} live")
    done = verify_mod.run(rec, [], runs, output, workspace, ws, say, lambda prefix: progress_for(out, quiet, prefix=prefix),
                          cluster=cluster)
    out_rows = []
    for a, r in zip(answers, done):
        measured = volumes.measured_figure(goal, r)
        out_rows.append({"label": r["label"], "run_dir": r["run_dir"], "devices": a.device_args(), "place": a.place_text(),
                         "cost": a.cost, "predicted": a.value, "measured": measured,
                         "interval": list(a.interval) if a.interval else None,
                         "met": goal.met(measured) if goal else None})
    return out_rows
