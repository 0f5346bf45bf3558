"""`dbtier run WORKLOAD`: one seed experiment on PostgreSQL, on the devices and placement given."""

from __future__ import annotations

from pathlib import Path

import click

from dbtier.cli.progress import progress_for
from dbtier.errors import UserError
from dbtier.pg import capacity
from dbtier.pg import placement as placement_mod
from dbtier.pg.lab import LabOptions
from dbtier.devices.spec import parse_all
from dbtier.pg.settings import parse_sets
from dbtier.report import jsonout, outputs
from dbtier.report.rundir import run_dir
from dbtier.report.terminal import console
from dbtier.workloads import registry
from dbtier.workloads.runner import check_cache_state, run_workload
from dbtier.workspace import Workspace


def lab_options(func):
    """The options every PostgreSQL command shares: devices, placement, server, output."""
    options = [
        click.option("--device", "-d", "devices", multiple=True, metavar="NAME=PROFILE[:DIR]",
                     help="a device: a profile from 'dbtier devices' (or a .toml), optionally on your own folder DIR "
                          "(repeatable; the first is the default for everything)"),
        click.option("--place", "-p", "places", multiple=True, metavar="KEY=DEVICE[,...]",
                     help="where things go: data, indexes, wal, temp, dump, or a table or index name "
                          "(e.g. data=hdd,wal=ssd,t_attribute_idx=ssd)"),
        click.option("--cache", default="32MB", show_default=True,
                     help="the database cache (shared_buffers); the seeds' tables were several times larger"),
        click.option("--io-mode", type=click.Choice(["direct", "buffered", "dsync"]), default="direct",
                     show_default=True,
                     help="direct: data and WAL bypass the OS page cache; buffered: through the (emulated) page "
                          "cache; dsync: cached reads, every write synchronous to the device"),
        click.option("--cache-state", type=click.Choice(["cold", "hot", "cross"]), default="cold", show_default=True,
                     help="cold: restarted, caches empty; hot: the workload run once first; cross: a different "
                          "query over the same data run first (seed 001)"),
        click.option("--page-cache", metavar="SIZE",
                     help="the emulated OS page cache (default: three times --cache, as with shared_buffers at a quarter of "
                          "the memory)"),
        click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
                     help="any PostgreSQL setting, on top of dbtier's preset (repeatable)"),
        click.option("--pg-bin", type=click.Path(path_type=Path),
                     help="another PostgreSQL 18 install's bin folder (default: the embedded one)"),
        click.option("--workspace", type=click.Path(path_type=Path),
                     help="a folder in which dbtier makes its own, dbtier-UID, for clusters and devices (default: "
                          "/dev/shm, in RAM)"),
        click.option("--output", "-o", type=click.Path(path_type=Path), default=Path("results"), show_default=True,
                     help="where the run directory (result.json, report.html, server.log) is written"),
        click.option("--json", "json_path", type=click.Path(path_type=Path), help="also write the result JSON here"),
        click.option("--trace", is_flag=True, help="record every I/O: trace.parquet in the run directory"),
        click.option("--keep", is_flag=True, help="keep the workspace (cluster, log) after the run, for inspection"),
        click.option("--quiet", "-q", is_flag=True, help="print only errors and the run directory"),
    ]
    for option in reversed(options):
        func = option(func)
    return func


class WorkloadGroup(click.Group):
    """One subcommand per registered workload, with the workload's own parameters as options."""

    def list_commands(self, ctx) -> list[str]:
        return registry.names()

    def get_command(self, ctx, name):
        return _workload_command(registry.get(name))

    def resolve_command(self, ctx, args):
        cmd = self.get_command(ctx, args[0])  # unknown names: one line from the registry, status 2
        return cmd.name, cmd, args[1:]


def _workload_command(cls) -> click.Command:
    def callback(**kw):
        execute(cls, kw)

    func = lab_options(callback)
    for p in reversed(cls.params):  # the workload's own parameters first in --help
        kind = click.Choice(p.choices) if p.choices else p.type
        if p.type is bool:
            func = click.option(f"--{p.name}", *p.flags, p.key, is_flag=True, default=p.default, help=p.help)(func)
            continue
        func = click.option(f"--{p.name}", *p.flags, p.key, type=kind, default=p.default, multiple=p.multiple,
                            show_default=not p.multiple and p.default is not None, metavar=p.metavar,
                            help=p.help)(func)
    return click.command(cls.name, short_help=cls.summary, help=f"{cls.summary}.\n\n{cls.description}",
                         context_settings={"max_content_width": 100})(func)


@click.group("run", cls=WorkloadGroup, context_settings={"max_content_width": 100})
def run() -> None:
    """Run one workload on PostgreSQL with its files on the given devices.

    \b
    Examples:
      dbtier run random-index -d hdd=hdd-sata-7200
      dbtier run random-index -d hdd=hdd-sata-7200 -d ssd=ssd-sata-mlc --place data=hdd,t_attribute_idx=ssd
      dbtier run table-scan -d ssd=ssd-sata-mlc --rows 16000 --scans 5 --json scan.json

    The data is loaded with the emulation paused, the server restarts (a cold cache), and only the
    workload itself is measured: elapsed, the server's CPU time against its time waiting on the devices,
    iostat figures per device, and the emulation's lateness. 'dbtier run WORKLOAD --help' shows the
    workload's own parameters."""


def execute(cls, kw: dict) -> None:
    out = console()
    requests = parse_all(kw["devices"])
    placement = placement_mod.parse(kw["places"], [r.name for r in requests])
    workload = cls(**{p.key: kw[p.key] for p in cls.params})
    check_cache_state(workload, kw["cache_state"])
    options = LabOptions(cache=kw["cache"], io_mode=kw["io_mode"], page_cache=kw["page_cache"],
                         sets=parse_sets(kw["sets"]), pg_bin=kw["pg_bin"],
                         workspace=kw["workspace"], trace=kw["trace"], keep=kw["keep"])
    say = (lambda _line: None) if kw["quiet"] else (lambda line: out.print(line, markup=False))
    # Every check before the first thing is made: the workspace, the run directory, a device's folder.
    capacity.check_run(workload, requests, placement, options, kw["cache_state"])
    outputs.check_dir(kw["output"], "--output")
    if kw["json_path"]:
        kw["json_path"] = outputs.check_file(kw["json_path"], "--json")
    with run_dir(kw["output"], cls.name, Workspace.open(kw["workspace"])) as folder:
        with progress_for(out, kw["quiet"]) as progress:
            result = run_workload(workload, requests, placement, options, progress, folder.path, say,
                                  cache_state=kw["cache_state"])
        jsonout.write(folder.path / "result.json", result)
        from dbtier.report import html, runview  # matplotlib: loaded once there is something to chart

        html.write(folder.path / "report.html", f"dbtier run {cls.name}", result["started"], runview.run_sections(result))
    if kw["json_path"]:
        jsonout.write(kw["json_path"], {**result, "run_dir": str(folder.final)})
    if not kw["quiet"]:
        runview.print_run(out, result)
    out.print(f"run directory: {folder.final}", markup=False)
