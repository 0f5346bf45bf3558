"""`dbtier run WORKLOAD`: one seed experiment on PostgreSQL, on the devices and placement given."""

from __future__ import annotations

from pathlib import Path

import click

from dbtier.cli.progress import progress_for
from dbtier.errors import UserError
from dbtier.report import jsonout, outputs
from dbtier.report.terminal import console
from dbtier.experiments import runner
from dbtier.experiments.experiment import Experiment
from dbtier.workloads import registry


#: options a command that lays out its own devices (compare) does not take
LAYOUT_OPTIONS = ("devices", "places", "cache_state", "keep")


#: The options every PostgreSQL command shares, by the name of their parameter: devices, placement,
#: server, output.
LAB_OPTIONS = [
    ("devices", click.option("--device", "-d", "devices", multiple=True, metavar="NAME=PROFILE[:DIR]",
        help="a device: a profile from 'dbtier devices' (or a .toml), optionally on your own folder DIR "
        "(repeatable; the first is the default for everything)")),
    ("places", click.option("--place", "-p", "places", multiple=True, metavar="KEY=DEVICE[,...]",
        help="where things go: data, indexes, wal, temp, dump, or a table or index name "
        "(e.g. data=hdd,wal=ssd,t_attribute_idx=ssd)")),
    ("cache", click.option("--cache", default="32MB", show_default=True, metavar="SIZE",
        help="the database cache (shared_buffers); the seeds' tables were several times larger")),
    ("io_mode", click.option("--io-mode", type=click.Choice(["direct", "buffered", "dsync"]), default="direct",
        show_default=True,
        help="direct: data and WAL bypass the OS page cache; buffered: through the (emulated) page "
        "cache; dsync: cached reads, every write synchronous to the device")),
    ("cache_state", click.option("--cache-state", type=click.Choice(["cold", "hot", "cross"]), default="cold",
        show_default=True,
        help="cold: restarted, caches empty; hot: the workload run once first; cross: a different "
        "query over the same data run first (seed 001)")),
    ("page_cache", click.option("--page-cache", metavar="SIZE",
        help="the emulated OS page cache (default: three times --cache, as with shared_buffers at a quarter of "
        "the memory)")),
    ("cpu_scale", click.option("--cpu-scale", type=float, default=1.0, show_default=True, metavar="K",
        help="run the server as on a CPU K times slower (2: twice as slow); its processes spend K times "
        "their CPU time between calls, clients keep this machine's")),
    ("scale_model", click.option("--scale-model", type=float, default=1.0, show_default=True, metavar="F",
        help="this run's data stands for a system with F times as much: give every size (--cache, --page-cache, "
        "--set work_mem...) as that system's, and dbtier divides them and each HDD's write cache by F and "
        "stretches its seeks as over F times the data; 1: off")),
    ("sets", click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
        help="any PostgreSQL setting, on top of dbtier's preset (repeatable)")),
    ("pg_bin", click.option("--pg-bin", type=click.Path(path_type=Path),
        help="another PostgreSQL 18 install's bin folder (default: the embedded one)")),
    ("workspace", click.option("--workspace", type=click.Path(path_type=Path),
        help="a folder in which dbtier makes its own, dbtier-UID, for clusters and devices (default: "
        "/dev/shm, in RAM)")),
    ("output", click.option("--output", "-o", type=click.Path(path_type=Path), default=Path("results"),
        show_default=True,
        help="where the run directory (result.json, report.html, server.log) is written")),
    ("json_path", click.option("--json", "json_path", type=click.Path(path_type=Path),
        help="also write the result JSON here")),
    ("trace", click.option("--trace", is_flag=True, help="record every I/O: trace.parquet in the run directory")),
    ("keep", click.option("--keep", is_flag=True,
        help="keep the workspace (cluster, log) after the run, for inspection")),
    ("wide", click.option("--wide", is_flag=True, help="print every column of every table, however narrow the terminal "
        "(by default a narrow one leaves the least needed columns out, and says which)")),
    ("quiet", click.option("--quiet", "-q", is_flag=True, help="print only errors and the run directory")),
]


#: how `dbtier run WORKLOAD --help` groups the shared options (by parameter name); the workload's own
#: come first, under its name
OPTION_GROUPS = {
    "devices": "Devices and placement", "places": "Devices and placement", "configs": "Devices and placement",
    "experiment": "Devices and placement",
    "cache": "Server", "io_mode": "Server", "sets": "Server", "pg_bin": "Server",
    "page_cache": "Emulation", "cache_state": "Emulation", "cpu_scale": "Emulation", "scale_model": "Emulation",
    "trace": "Emulation",
    "workspace": "Output", "output": "Output", "json_path": "Output", "keep": "Output", "wide": "Output",
    "quiet": "Output", "help": "Output",
}
GROUP_ORDER = ("Devices and placement", "Server", "Emulation", "Output")


class GroupedCommand(click.Command):
    """A workload's command: its --help lists the workload's own options first, then the shared ones
    in groups, as pgbench's usage does."""

    def format_options(self, ctx, formatter) -> None:
        groups: dict[str, list] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                groups.setdefault(OPTION_GROUPS.get(param.name, f"{self.name} options"), []).append(record)
        for title in [f"{self.name} options", *GROUP_ORDER]:
            if title in groups:
                with formatter.section(title):
                    formatter.write_dl(groups[title])


def lab_options(func, skip: tuple[str, ...] = ()):
    """Adds the shared options but those `skip` names."""
    for name, option in reversed(LAB_OPTIONS):
        if name not in skip:
            func = option(func)
    return func


class WorkloadGroup(click.Group):
    """One subcommand per registered workload, with the workload's own parameters as options; `execute`
    runs one (cls, options), `skip` leaves lab options out."""

    execute = None
    skip: tuple[str, ...] = ()
    extra = ()  # more options, the command's own

    def list_commands(self, ctx) -> list[str]:
        return registry.names()

    def get_command(self, ctx, name):
        return workload_command(registry.get(name), type(self).execute, self.skip, self.extra)

    def resolve_command(self, ctx, args):
        cmd = self.get_command(ctx, args[0])  # unknown names: one line from the registry, status 2
        return cmd.name, cmd, args[1:]


class RunGroup(WorkloadGroup):
    @staticmethod
    def execute(cls, kw):
        return execute(cls, kw)


def workload_command(cls, execute_, skip=(), extra=()) -> click.Command:
    def callback(**kw):
        return execute_(cls, kw)  # the run directory: the Python API's answer

    func = lab_options(callback, skip)
    for option in reversed(extra):
        func = option(func)
    for p in reversed(cls.params):  # the workload's own parameters first in --help
        kind = click.Choice(p.choices) if p.choices else p.type
        if p.type is bool:
            func = click.option(f"--{p.name}", *p.flags, p.key, is_flag=True, default=p.default, help=p.help)(func)
            continue
        func = click.option(f"--{p.name}", *p.flags, p.key, type=kind, default=p.default, multiple=p.multiple,
                            show_default=not p.multiple and p.default is not None, metavar=p.metavar,
                            help=p.help)(func)
    summary = cls.summary[:1].upper() + cls.summary[1:]  # as every command's summary reads
    return click.command(cls.name, cls=GroupedCommand, short_help=summary,
                         help=f"{summary}.\n\n{cls.description}", context_settings={"max_content_width": 100})(func)


@click.group("run", cls=RunGroup, invoke_without_command=True, context_settings={"max_content_width": 100})
@click.option("--experiment", "experiment_path", type=click.Path(path_type=Path), metavar="FILE",
              help="run the experiment in this TOML file (its keys are the options' names, and 'workload'); a "
                   "run directory's experiment.toml runs that run again")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=Path("results"), show_default=True,
              help="with --experiment: where the run directory is written")
@click.option("--workspace", type=click.Path(path_type=Path), help="with --experiment: the workspace's folder")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="with --experiment: also write the "
              "result JSON here")
@click.option("--keep", is_flag=True, help="with --experiment: keep the workspace after the run")
@click.option("--wide", is_flag=True, help="with --experiment: print every column")
@click.option("--quiet", "-q", is_flag=True, help="with --experiment: print only errors and the run directory")
@click.pass_context
def run(ctx, experiment_path, **runtime) -> Path | None:
    """Run one workload on PostgreSQL with its files on the given devices.

    \b
    Examples:
      dbtier run random-index -d hdd=hdd-sata-7200
      dbtier run random-index -d hdd=hdd-sata-7200 -d ssd=ssd-sata-mlc --place data=hdd,t_attribute_idx=ssd
      dbtier run table-scan -d ssd=ssd-sata-mlc --rows 16000 --scans 5 --json scan.json
      dbtier run --experiment results/random-index-20261126-120000/experiment.toml   # that run again

    The data is loaded with the emulation paused, the server restarts (a cold cache), and only the
    workload itself is measured: elapsed, the server's CPU time against its time waiting on the devices,
    iostat figures per device, and the emulation's lateness. 'dbtier run WORKLOAD --help' shows the
    workload's own parameters. Every run directory holds its experiment.toml."""
    if experiment_path is None:
        if ctx.invoked_subcommand is None:
            raise UserError("give a workload (dbtier run --help lists them) or --experiment FILE")
        return None
    if ctx.invoked_subcommand is not None:
        raise UserError(f"give a workload ({ctx.invoked_subcommand}) or --experiment FILE, not both")
    return run_experiment(Experiment.from_toml(experiment_path), runtime)


def experiment_of(cls, kw: dict, devices=None, placement=None) -> Experiment:
    """The experiment a workload's command line describes (devices and placement given typed, for a
    command whose layouts come another way)."""
    return Experiment.from_options(
        cls.name, device=devices if devices is not None else kw["devices"],
        place=placement if placement is not None else kw["places"], cache=kw["cache"], page_cache=kw["page_cache"],
        io_mode=kw["io_mode"], cache_state=kw["cache_state"], cpu_scale=kw["cpu_scale"], scale_model=kw["scale_model"],
        set=kw["sets"], pg_bin=kw["pg_bin"], trace=kw["trace"], **{p.key: kw[p.key] for p in cls.params})


def execute(cls, kw: dict) -> Path:
    return run_experiment(experiment_of(cls, kw), kw)


def run_experiment(exp: Experiment, kw: dict) -> Path:
    """Runs it as `dbtier run` does: every check before the first thing is made, the report, then
    --json, then (if the output folder could not take the run directory) the line that says where it is."""
    out = console(wide=kw["wide"])
    say = (lambda _line: None) if kw["quiet"] else (lambda line: out.print(line, markup=False))
    json_path = outputs.check_file(kw["json_path"], "--json") if kw["json_path"] else None
    outcome = runner.run(exp, kw["output"], kw["workspace"], kw["keep"], lambda: progress_for(out, kw["quiet"]), say)
    if not kw["quiet"]:
        from dbtier.report import runview

        runview.print_run(out, outcome.result)
    out.print(f"run directory: {outcome.run_dir}", markup=False)
    if json_path:
        jsonout.write(json_path, {**outcome.result, "run_dir": str(outcome.run_dir)})
    outcome.check()
    return outcome.run_dir
