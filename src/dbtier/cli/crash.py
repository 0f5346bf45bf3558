"""`dbtier crash WORKLOAD`: does this layout keep my commits when the power goes?"""

from __future__ import annotations

import json
from pathlib import Path

import click
from click.core import ParameterSource

from dbtier.cli.progress import progress_for
from dbtier.cli.run import WorkloadGroup, experiment_of
from dbtier.crash import run as crash_run
from dbtier.crash.ledger import WITH_LEDGER
from dbtier.crash.states import KINDS
from dbtier.errors import UserError
from dbtier.experiments.experiment import EXPERIMENT_FILE
from dbtier.experiments.options import SEVERAL_RUNS_KEYS
from dbtier.report import crashview, jsonout, outputs
from dbtier.report.terminal import console

#: run's options that mean nothing here: one run, its workspace always removed, its trace always kept
SKIPPED = (*SEVERAL_RUNS_KEYS, "trace", "keep", "repeat", "repeat_seed", "production", "no_reuse", "cache_state")

EXTRA = (
    click.option("--cuts", type=int, default=200, show_default=True, metavar="N",
                 help="power cuts to make, each a crash state recovered and checked"),
    click.option("--seed", "crash_seed", type=int, default=0, show_default=True, metavar="S",
                 help="the cuts' seed: cut K of seed S is the same state every time (with --cuts and --only)"),
    click.option("--only", "only", multiple=True, metavar="KIND",
                 help=f"only these kinds of cut (repeatable): {', '.join(KINDS)}; by default each in turn"),
    click.option("--ledger", "ledger_table", metavar="TABLE",
                 help="with your own pgbench scripts (-f): the table each of their transactions inserts one row into, "
                      "its column client = :client_id (made as TABLE (client int) unless your --setup did)"),
    click.option("--recoveries", "recoveries", type=int, default=crash_run.default_recoveries(),
                 show_default="this machine's CPUs", metavar="N",
                 help="crash states recovered and checked at once, each by a server of its own (the ones timed "
                      "for the recovery time, every tenth, alone)"),
    click.option("--fsync-error", "fsync_error", is_flag=True,
                 help="after the run, fail the next fsync of a table's file on the data device with EIO (its "
                      "dirty pages marked clean, as Linux does): PostgreSQL must PANIC and recover, InnoDB "
                      "stops and is started again; the cuts follow the failure"),
)


class CrashGroup(WorkloadGroup):
    skip = SKIPPED
    extra = EXTRA

    def list_commands(self, ctx) -> list[str]:  # another workload is refused with what to run instead
        return list(WITH_LEDGER)

    @staticmethod
    def execute(cls, kw):
        return execute(cls, kw)


@click.group("crash", cls=CrashGroup, invoke_without_command=True, context_settings={"max_content_width": 100})
@click.option("--rebuild", "rebuild_dir", type=click.Path(path_type=Path), metavar="RUN_DIR",
              help="build a state of this crash run again (a run that found something keeps what it takes)")
@click.option("--cut", "cut_index", type=int, metavar="K", help="with --rebuild: the cut whose state to build")
@click.option("--into", type=click.Path(path_type=Path), metavar="DIR",
              help="with --rebuild: the folder to build it in (made new; default RUN_DIR/state-K)")
@click.option("--matrix", "matrix_file", type=click.Path(path_type=Path), metavar="FILE",
              help="several configurations, each a crash run, from a TOML file of [[cell]] tables (docs/crash.md); "
                   "the options below go with it")
@click.option("--workspace", type=click.Path(path_type=Path),
              help="with --matrix: a folder in which dbtier makes its own (default: /dev/shm)")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=Path("results"), show_default=True,
              help="with --matrix: where its run directory (matrix.json, a folder per cell) is written")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="with --matrix: also write its table here")
@click.option("-q", "--quiet", is_flag=True, help="with --matrix: print only errors and the run directory")
@click.option("--recoveries", "matrix_recoveries", type=int, default=crash_run.default_recoveries(), metavar="N",
              show_default="this machine's CPUs", help="with --matrix: crash states recovered at once in each cell")
@click.pass_context
def crash(ctx, rebuild_dir, cut_index, into, matrix_file, workspace, output, json_path, quiet,
          matrix_recoveries) -> None:
    """Cut the power at many instants of a run and check what the database kept.

    \b
    Examples:
      dbtier crash pgbench -i -s 1 -c 4 -T 10 -d ssd=ssd-sata-mlc
      dbtier crash pgbench -i -s 1 -c 4 -T 10 -d ssd=ssd-sata-mlc --set synchronous_commit=off
      dbtier crash pgbench -i -s 1 -T 10 -d 'ssd=ssd-sata-mlc{flush_honoured=0}' --cuts 500
      dbtier crash pgbench -i -s 1 -T 5 -d ssd=ssd-sata-mlc --fsync-error   # an fsync fails: PANIC?
      dbtier crash oltp --warehouses 1 --duration 10 -d data=hdd-sata-7200 -d log=ssd-sata-mlc --place wal=log
      dbtier crash oltp --engine mariadb --warehouses 1 --duration 10 -d ssd=ssd-sata-mlc --set innodb_doublewrite=0
      dbtier crash --rebuild results/crash-pgbench-20261127-120000 --cut 7   # that cut's state again
      dbtier crash --matrix examples/power-loss.toml   # several configurations, each against what it expects

    The workload runs once on the emulated devices, with every write's bytes kept beside the trace of
    what the emulation did with them (the page cache, each device's volatile cache, the media, the
    flushes). Then the power is cut: after a flush, at random instants, in the middle of a write (torn at
    the device's atomic write), or with a volatile cache's writes persisted out of order. Each state is
    recovered by the same server and checked: it starts, every commit the client saw acknowledged before
    the cut is there, the pages are whole (PostgreSQL: pg_amcheck with heapallindexed and pg_checksums;
    MariaDB: CHECK TABLE and innochecksum), and the workload's own consistency holds. The answer first: how many cuts lost a commit or left damage,
    and how long recovery took. A run that found something keeps the base image and the log in its
    directory: --rebuild builds any of its states again, bit for bit, to look at or start a server on."""
    if matrix_file is not None:
        if ctx.invoked_subcommand is not None or rebuild_dir is not None:
            raise UserError("--matrix FILE runs the configurations it lists; give it alone, without a workload or "
                            "--rebuild")
        crash_run.check_recoveries(matrix_recoveries)
        run_matrix(matrix_file, workspace, output, json_path, quiet, matrix_recoveries)
        return
    given = [f"--{name.replace('_', '-')}" for name in ("workspace", "output", "json", "quiet")
             if ctx.get_parameter_source(name if name != "json" else "json_path") == ParameterSource.COMMANDLINE]
    if ctx.get_parameter_source("matrix_recoveries") == ParameterSource.COMMANDLINE:
        given.append("--recoveries")
    if given:
        raise UserError(f"{given[0]} before the workload goes with --matrix; give a workload's options after its name "
                        "(dbtier crash pgbench ... --recoveries 2)")
    if rebuild_dir is None:
        if ctx.invoked_subcommand is None:
            raise UserError("give a workload (dbtier crash --help lists them), --matrix FILE, or --rebuild RUN_DIR "
                            "--cut K")
        if cut_index is not None or into is not None:
            raise UserError("--cut and --into go with --rebuild RUN_DIR")
        return
    if ctx.invoked_subcommand is not None:
        raise UserError(f"give a workload ({ctx.invoked_subcommand}) or --rebuild RUN_DIR, not both")
    if cut_index is None:
        raise UserError("--rebuild RUN_DIR needs --cut K: the cut whose state to build (its table names them)")
    built, digest, recorded = crash_run.rebuild(rebuild_dir, cut_index, into or rebuild_dir / f"state-{cut_index}")
    same = ("the same as the run's" if digest == recorded else
            "the run kept no fingerprint of it (it found nothing there)" if recorded is None else
            f"NOT the run's {recorded[:16]}...: the material was changed")
    click.echo(f"cut {cut_index} rebuilt in {built}: sha256 {digest[:16]}..., {same}")
    if recorded is not None and digest != recorded:
        raise UserError(f"cut {cut_index}'s state differs from the one the run checked")


def execute(cls, kw: dict) -> Path:
    exp = experiment_of(cls, kw)
    kinds = tuple(kw["only"]) or KINDS
    crash_run.check_cuts(kw["cuts"], kinds)
    crash_run.check_recoveries(kw["recoveries"])
    out = console(wide=kw["wide"])
    say = (lambda _line: None) if kw["quiet"] else (lambda line: out.print(line, markup=False))
    json_path = outputs.check_file(kw["json"], "--json") if kw["json"] else None
    from dbtier.report.rundir import run_dir
    from dbtier.workspace import Workspace, write_private

    with run_dir(kw["output"], f"crash-{exp.workload}", Workspace.open(kw["workspace"])) as folder:
        result = crash_run.run_crash(exp, kw["cuts"], kw["crash_seed"], kinds, kw["workspace"],
                                     lambda: progress_for(out, kw["quiet"]), say, keep=folder.path / "material",
                                     fsync_error=kw["fsync_error"], ledger_table=kw["ledger_table"],
                                     recoveries=kw["recoveries"])
        write_private(folder.path / EXPERIMENT_FILE, exp.to_toml(), mode=0o644)
        jsonout.write(folder.path / "result.json", result)
    crashview.write(folder.final / "report.html", result, folder.final)  # where it ended: its rebuild commands
    if not kw["quiet"]:
        show(out, result, folder.final)
    out.print(f"run directory: {folder.final}", markup=False)
    if json_path:
        jsonout.write(json_path, {**result, "run_dir": str(folder.final)})
    if folder.failure:
        raise UserError(folder.failure)
    return folder.final


def run_matrix(path: Path, workspace: Path | None, output: Path, json_path: Path | None, quiet: bool,
               recoveries: int | None = None) -> Path:
    from dbtier.crash import matrix
    from dbtier.report.rundir import run_dir
    from dbtier.workspace import Workspace

    cells = matrix.load(path)
    outputs.check_dir(output, "--output")
    json_path = outputs.check_file(json_path, "--json") if json_path else None
    out = console(wide=False)
    say = (lambda _line: None) if quiet else (lambda line: out.print(line, markup=False))
    with run_dir(output, "crash-matrix", Workspace.open(workspace)) as folder:
        doc = matrix.run_matrix(cells, folder.path, workspace, lambda: progress_for(out, quiet), say, recoveries)
        doc["matrix_file"] = str(Path(path).resolve())
        jsonout.write(folder.path / "matrix.json", doc)
    crashview.write_matrix(folder.final / "report.html", doc, folder.final)
    for row in doc["cells"]:  # each cell's own report, its rebuild commands where its folder ended
        cell_dir = folder.final / row["folder"]
        crashview.write(cell_dir / "report.html", json.loads((cell_dir / "result.json").read_text()), cell_dir)
    if not quiet:
        show_matrix(out, doc)
    out.print(f"run directory: {folder.final}", markup=False)
    if json_path:
        jsonout.write(json_path, {**doc, "run_dir": str(folder.final)})
    if folder.failure:
        raise UserError(folder.failure)
    if any(r["held"] is False for r in doc["cells"]):
        raise SystemExit(1)  # a cell did not hold what it expected: as a failed test, for scripts and CI
    return folder.final


def show_matrix(out, doc: dict) -> None:
    from dbtier.crash import matrix
    from dbtier.report import terminal

    out.print(matrix.verdict(doc), markup=False)
    terminal.show(out, crashview.matrix_table(doc), drop=("its folder",))
    shown = [r for r in doc["cells"] if r["held"] is False] or [r for r in doc["cells"] if r["lost"] or r["damaged"]]
    for r in shown[:3]:
        out.print(f"{r['cell']}: {r['verdict']} (its folder: {r['folder']})", markup=False)


def show(out, result: dict, run_dir: Path) -> None:
    from rich.table import Table

    out.print(crash_run.verdict(result), markup=False)
    for d in result["devices"]:
        out.print(f"  {d['name']} ({d['profile']}): {d['durability']}", markup=False)
    run = result["run"]
    if run.get("tps"):
        out.print(f"  the run: {run['tps']:,.0f} tps", markup=False)
    found = [s for s in result["states"] if s["problems"] or s["lost"]]
    if not found:
        return
    table = Table(title=f"What the cuts found ({len(found):,} of {result['cuts']:,}; the first 10)")
    for col in ("cut", "kind", "at (ms)", "acknowledged", "lost", "lost over (ms)", "found"):
        table.add_column(col, justify="right" if col in ("cut", "at (ms)", "acknowledged", "lost") else "left")
    for s in found[:10]:
        table.add_row(str(s["index"]), s["kind"], f"{s['at_ms']:,.1f}", f"{s['acknowledged']:,}",
                      "-" if s["lost"] is None else f"{s['lost']:,}",
                      "" if not s["lost"] else f"{s['lost_span_ms']:,.0f}", "; ".join(s["problems"]) or "lost commits")
    out.print(table)
    first = found[0]
    where = "; ".join(f"{Path(p['file']).name} {p['where']} ({_writes(len(p['ranges']))})"
                      for p in first.get("pending", [])[:4])
    if where:
        out.print(f"At cut {first['index']}, not on the media: {where}.", markup=False)
    for c in first.get("calls_before", [])[-3:]:
        out.print(f"  {c['before_ms']:,.2f} ms before it: process {c['pid']} {c['call']} "
                  f"{Path(c['file']).name or '-'} at {c['offset']:,} ({c['bytes']:,} bytes)", markup=False)
    told = next((s for s in found if s.get("page")), None)
    if told:
        out.print(f"The page cut {told['index']} names: {told['page']['text']}", markup=False)
    out.print(f"Rebuild a state: dbtier crash --rebuild {run_dir} --cut {first['index']}", markup=False)


def _writes(n: int) -> str:
    return f"{n:,} write{'s' * (n != 1)}"
