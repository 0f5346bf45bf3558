"""`dbtier compare WORKLOAD`: one workload on several layouts, loaded once, side by side."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from dbtier.cli.compared import print_comparison
from dbtier.cli.progress import progress_for
from dbtier.cli.run import WorkloadGroup, experiment_of
from dbtier.experiments.options import LAYOUT_KEYS
from dbtier.experiments import compare as compare_mod
from dbtier.experiments.comparison import run_comparison
from dbtier.report import outputs
from dbtier.report.terminal import console

CONFIG_OPTIONS = (
    click.option("--config", "configs", multiple=True, metavar="NAME:DEVICES[:PLACEMENT]",
                 help="a layout: its name, its devices (comma-separated NAME=PROFILE) and where things go "
                      "(comma-separated KEY=DEVICE; default: all on the first device). Repeatable; the first "
                      "is the baseline"),
    click.option("--experiment", type=click.Path(path_type=Path),
                 help="a TOML file of [[config]] tables (name, devices, place), after the --config ones"),
)


class CompareGroup(WorkloadGroup):
    skip = (*LAYOUT_KEYS, "production")  # a comparison is of layouts; 'stats compare' takes each run directory
    extra = CONFIG_OPTIONS

    @staticmethod
    def execute(cls, kw):
        return execute(cls, kw)

    def resolve_command(self, ctx, args):
        if args and (Path(args[0]).is_dir() or "/" in args[0]):  # run directories made earlier, not a workload
            return runs_command.name, runs_command, args
        return super().resolve_command(ctx, args)


@click.group("compare", cls=CompareGroup, context_settings={"max_content_width": 100})
def compare() -> None:
    """Run one workload on several layouts and print them side by side.

    \b
    Examples:
      dbtier compare pgbench -i -s 5 -c 4 -T 30 \\
          --config all-hdd:hdd=hdd-sata-7200 \\
          --config idx-ssd:hdd=hdd-sata-7200,ssd=ssd-sata-mlc:data=hdd,indexes=ssd \\
          --config all-ssd:ssd=ssd-sata-mlc
      dbtier compare sql --setup schema.sql --run work.sql --experiment layouts.toml
      dbtier compare results/pgbench-20261127-101500 results/pgbench-20261127-103000   # runs made earlier

    The workload's setup runs once; each layout gets a copy of the loaded cluster on its own devices,
    its objects moved where the layout says (the emulation paused), a cold restart, and the measured
    run. Each layout keeps its own run directory; the comparison (table, report.html with the layouts
    charted side by side) goes in OUTPUT/compare-WORKLOAD-<time>/. Interrupted, the layouts finished
    so far keep their run directories. With --cluster, each run goes to a node of a Ray cluster
    (one per node at a time, its data loaded there), after each node's reference run."""


def execute(cls, kw: dict) -> Path:
    out = console(wide=kw["wide"])
    configs = compare_mod.configurations(kw["configs"], kw["experiment"], kw["engine"])
    # one experiment per layout: the command line's, with the layout's devices and placement
    base = experiment_of(cls, kw, device=configs[0].devices, place=configs[0].placement, cache_state="cold")
    layouts = [replace(base, devices=tuple(c.devices), placement=c.placement) for c in configs]
    say = (lambda _line: None) if kw["quiet"] else (lambda line: out.print(line, markup=False))
    json_path = outputs.check_file(kw["json"], "--json") if kw["json"] else None
    try:
        if kw.get("cluster"):
            from dbtier.experiments.comparison import run_comparison_on_cluster

            done = run_comparison_on_cluster(layouts, [c.name for c in configs], kw["cluster"], kw["output"],
                                             kw["workspace"], say, repeat=kw["repeat"], order_seed=kw["repeat_seed"])
        else:
            done = run_comparison(layouts, [c.name for c in configs], kw["output"], kw["workspace"],
                                  lambda prefix: progress_for(out, kw["quiet"], prefix=prefix), say,
                                  reuse=not kw.get("no_reuse"), repeat=kw["repeat"], order_seed=kw["repeat_seed"])
    except KeyboardInterrupt as exc:
        for d in getattr(exc, "kept_run_dirs", []):
            out.print(f"kept: {d}", markup=False)
        raise
    return print_comparison(out, done, json_path, "each layout's own run directory beside it")


@click.command("RUN_DIR...", context_settings={"max_content_width": 100})
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="RUN_DIR...")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=Path("results"), show_default=True,
              help="where the comparison's directory (result.json, report.html) is written")
@click.option("--workspace", type=click.Path(path_type=Path), help="a folder in which dbtier makes its own")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="also write the comparison as JSON here")
@click.option("--wide", is_flag=True, help="print every column, however narrow the terminal")
def runs_command(run_dirs: tuple[Path, ...], output: Path, workspace: Path | None, json_path: Path | None,
                 wide: bool) -> Path:
    """Put run directories made earlier side by side, the first the baseline: the same report as a
    comparison run now (each phase and transaction type against the first run)."""
    from dbtier.experiments.comparison import compare_runs

    out = console(wide=wide)
    json_path = outputs.check_file(json_path, "--json") if json_path else None
    done = compare_runs(list(run_dirs), output, workspace)
    return print_comparison(out, done, json_path, "the runs compared stay where they are")
