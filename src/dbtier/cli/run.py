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
from dbtier.experiments.options import GROUPS, OPTIONS, SEVERAL_RUNS_KEYS, Option
from dbtier.workloads import registry


def _click_option(o: Option):
    """One shared option as click declares it, from the option table."""
    decls = [f"--{o.name}", *([o.short] if o.short else []), o.key]
    if o.flag:
        return click.option(*decls, is_flag=True, help=o.help)
    kind = (click.Choice(o.type) if isinstance(o.type, tuple) else click.Path(path_type=Path) if o.type is Path
            else o.type)
    return click.option(*decls, type=kind, multiple=o.multiple, default=() if o.multiple else o.default,
                        show_default=o.default is not None and not o.multiple, metavar=o.metavar, help=o.help)


#: The options every PostgreSQL command shares (experiments/options.py), by their parameter's name.
LAB_OPTIONS = [(o.key, _click_option(o)) for o in OPTIONS]
#: how `dbtier run WORKLOAD --help` groups the shared options; the workload's own come first
OPTION_GROUPS = {**{o.key: o.group for o in OPTIONS}, "configs": "Devices and placement",
                 "experiment": "Devices and placement", "help": "Output"}


class GroupedCommand(click.Command):
    """A workload's command: its --help lists the workload's arguments and own options first, then the
    shared ones in groups, as pgbench's usage does."""

    arguments: tuple[tuple[str, str], ...] = ()  # (metavar, help) of each positional parameter

    def format_options(self, ctx, formatter) -> None:
        if self.arguments:
            with formatter.section("Arguments"):
                formatter.write_dl(list(self.arguments))
        groups: dict[str, list] = {}
        for param in self.get_params(ctx):
            if isinstance(param, click.Argument):  # in Arguments with its help, or the words after `--`
                continue
            record = param.get_help_record(ctx)
            if record is not None:
                groups.setdefault(OPTION_GROUPS.get(param.name, f"{self.name} options"), []).append(record)
        for title in [f"{self.name} options", *GROUPS]:
            if title in groups:
                with formatter.section(title):
                    formatter.write_dl(groups[title])


def _runtime_options(func):
    """`dbtier run --experiment FILE`'s own options: where the run goes and how it speaks."""
    for o in reversed(OPTIONS):
        if not o.experiment and o.key not in SEVERAL_RUNS_KEYS:
            func = _click_option(o)(func)
    return func


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
    skip = SEVERAL_RUNS_KEYS  # one run runs here

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
        if p.trailing:  # after `--`: passed on untouched, options and all
            func = click.argument(p.key, nargs=-1, type=click.UNPROCESSED, metavar=p.metavar)(func)
            continue
        kind = click.Choice(p.choices) if p.choices else p.type
        if p.positional:  # required on the command line; its help in the command's Arguments section
            kind = click.Path(path_type=Path) if p.type is Path else kind
            func = click.argument(p.key, type=kind, metavar=p.metavar)(func)
            continue
        if p.type is bool:
            func = click.option(f"--{p.name}", *p.flags, p.key, is_flag=True, default=p.default, help=p.help)(func)
            continue
        func = click.option(f"--{p.name}", *p.flags, p.key, type=kind, default=p.default, multiple=p.multiple,
                            show_default=not p.multiple and p.default is not None, metavar=p.metavar,
                            help=p.help)(func)
    summary = cls.summary[:1].upper() + cls.summary[1:]  # as every command's summary reads
    command = click.command(cls.name, cls=GroupedCommand, short_help=summary,
                            help=f"{summary}.\n\n{cls.description}", context_settings={"max_content_width": 100})(func)
    command.arguments = tuple((p.metavar, p.help) for p in cls.params if p.positional)
    return command


@click.group("run", cls=RunGroup, invoke_without_command=True, context_settings={"max_content_width": 100})
@click.option("--experiment", "experiment_path", type=click.Path(path_type=Path), metavar="FILE",
              help="run the experiment in this TOML file (its keys are the options' names, and 'workload'); a "
                   "run directory's experiment.toml runs that run again")
@_runtime_options
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


def experiment_of(cls, kw: dict, **given) -> Experiment:
    """The experiment a workload's command line describes (`given`: options that come another way,
    as a compare's layout's devices and placement, typed)."""
    ctx = click.get_current_context(silent=True)
    # an option left at its default is not given: the experiment's defaults apply (and --settings-from's
    # shared_buffers stands for a --cache not given)
    defaulted = {k for k in kw if ctx is not None and ctx.get_parameter_source(k) == click.core.ParameterSource.DEFAULT}
    shared = {o.key: kw[o.key] for o in OPTIONS if o.experiment and o.key in kw and o.key not in defaulted}
    return Experiment.from_options(cls.name, **{**shared, **given}, **{p.key: kw[p.key] for p in cls.params})


def execute(cls, kw: dict) -> Path:
    return run_experiment(experiment_of(cls, kw), kw)


def run_experiment(exp: Experiment, kw: dict) -> Path:
    """Runs it as `dbtier run` does: every check before the first thing is made, the report, then
    --json, then (if the output folder could not take the run directory) the line that says where it is."""
    if kw.get("repeat", 1) != 1:
        return _repeated(exp, kw)
    out = console(wide=kw["wide"])
    say = (lambda _line: None) if kw["quiet"] else (lambda line: out.print(line, markup=False))
    json_path = outputs.check_file(kw["json"], "--json") if kw["json"] else None
    outcome = runner.run(exp, kw["output"], kw["workspace"], kw["keep"], lambda: progress_for(out, kw["quiet"]), say,
                         reuse=not kw.get("no_reuse"), production=kw.get("production"))
    if not kw["quiet"]:
        from dbtier.report import runview

        runview.print_run(out, outcome.result)
    out.print(f"run directory: {outcome.run_dir}", markup=False)
    if json_path:
        jsonout.write(json_path, {**outcome.result, "run_dir": str(outcome.run_dir)})
    outcome.check()
    return outcome.run_dir


def _repeated(exp: Experiment, kw: dict) -> Path:
    """--repeat N: the experiment N times on one loaded cluster, as a comparison of one layout; its
    median run and the runs' range."""
    from dbtier.cli.compared import print_comparison
    from dbtier.experiments.comparison import run_comparison

    if kw.get("production") or kw.get("keep"):
        raise UserError("--repeat runs the experiment several times: give --production or --keep to one run")
    out = console(wide=kw["wide"])
    say = (lambda _line: None) if kw["quiet"] else (lambda line: out.print(line, markup=False))
    json_path = outputs.check_file(kw["json"], "--json") if kw["json"] else None
    done = run_comparison([exp], ["run"], kw["output"], kw["workspace"],
                          lambda prefix: progress_for(out, kw["quiet"], prefix=prefix), say,
                          reuse=not kw.get("no_reuse"), repeat=kw["repeat"], order_seed=kw["repeat_seed"])
    return print_comparison(out, done, json_path, "each run's own directory beside it")
