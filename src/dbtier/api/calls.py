"""`run` and `compare` from Python. `run` takes an `Experiment`, or a workload's name and keywords
that build one: each keyword is an option of `dbtier run WORKLOAD --help` with its dashes written as
underscores (`io_mode="buffered"`, `rows=300`), or a one-letter option's letter (pgbench's `T=30` is
`-T 30`), a list for a repeatable option, True for a flag; devices may be given as `DeviceSpec`s and
the placement as a `Placement`. Where the run goes: `output`, `workspace`, `keep`, `json`. It runs
what the command runs (the same checks, run directory and cleanup) and returns the run directory,
loaded. It raises UserError for bad input (the command's one-line message), WorkloadError when the
workload ran but its result check failed (nothing is reported as valid), and KeyboardInterrupt on
Ctrl-C."""

from __future__ import annotations

from pathlib import Path

import click

from dbtier.api.results import Result, load
from dbtier.errors import UserError

#: where a run goes and how it speaks: not part of the experiment
RUNTIME = ("output", "workspace", "keep", "json", "quiet", "wide")
#: the command line's one-letter options beside the workloads' own
LETTERS = {"d": "device", "p": "place", "o": "output", "q": "quiet"}


def _options(workload: str, options: dict) -> dict:
    """Keywords as option names: one-letter ones spelled out (the workload's flags, then the lab's)."""
    from dbtier.workloads import registry

    letters = {f.lstrip("-"): p.key for p in registry.get(workload).params for f in p.flags if len(f) == 2}
    out = {}
    for key, value in options.items():
        if len(key) == 1:
            key = letters.get(key) or LETTERS.get(key) or key
        out[key] = value
    return out


def run(workload, **options) -> Result:
    """Runs one workload, as `dbtier run WORKLOAD` (or an experiment, as `dbtier run --experiment`):

        run("random-index", device="hdd=hdd-sata-7200", rows=2000)
        run("pgbench", device=["hdd=hdd-sata-7200", "ssd=ssd-sata-mlc"], place="wal=ssd", i=True, T=30)
        run(Experiment.load(run_dir), output="again")
    """
    from dbtier.report import jsonout, outputs
    from dbtier.experiments import runner
    from dbtier.experiments.experiment import Experiment

    if isinstance(workload, Experiment):
        exp, given = workload, options
        unknown = sorted(set(given) - set(RUNTIME))
        if unknown:
            raise UserError(f"{unknown[0]}: an experiment is given whole; only {', '.join(RUNTIME)} go beside it")
    else:
        options = _options(workload, options)
        given = {k: options.pop(k) for k in RUNTIME if k in options}
        exp = Experiment.from_options(workload, **options)
    json_path = outputs.check_file(Path(given["json"]), "--json") if given.get("json") else None
    output = Path(given.get("output") or "results")
    workspace = Path(given["workspace"]) if given.get("workspace") else None
    outcome = runner.run(exp, output, workspace, bool(given.get("keep")), say=lambda _line: None)
    if json_path:
        jsonout.write(json_path, {**outcome.result, "run_dir": str(outcome.run_dir)})
    outcome.check()
    return load(outcome.run_dir)


def _argv(options: dict) -> list[str]:
    args: list[str] = []
    for key, value in options.items():
        flag = f"-{key}" if len(key) == 1 else "--" + key.replace("_", "-")  # pgbench's -i, -T
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            for item in value:
                args += [flag, str(item)]
        else:
            args += [flag, str(value)]
    return args


def compare(workload: str, **options) -> Result:
    """Runs one workload on several layouts, as `dbtier compare WORKLOAD`:

        compare("random-index", config=["hdd:d=hdd-sata-7200", "ssd:d=ssd-sata-mlc"], rows=2000)
    """
    from dbtier.cli import cli

    options = {"quiet": True, **options}
    try:
        folder = cli.main(["compare", workload, *_argv(options)], prog_name="dbtier", standalone_mode=False)
    except click.ClickException as exc:  # a bad option or value, as the command line says it
        raise UserError(exc.format_message()) from None
    except click.exceptions.Abort:  # click's name for Ctrl-C (the run cleaned up behind it)
        raise KeyboardInterrupt from None
    if not isinstance(folder, Path):
        raise UserError(f"dbtier compare {workload} wrote no run directory")
    return load(folder)
