"""`run` and `compare` from Python, with the command line's arguments: each keyword is an option
of `dbtier run WORKLOAD --help` (or compare's) with its dashes written as underscores (a one-letter
keyword is the one-letter option: T=30 is -T 30), a list for a repeatable option, True for a flag.
They run exactly as the commands do (the same checks, run directory and cleanup) and return the run
directory, loaded. They raise UserError for bad input (the command's one-line message),
WorkloadError when the workload ran but its result check failed (nothing is reported as valid), and
KeyboardInterrupt on Ctrl-C."""

from __future__ import annotations

from pathlib import Path

import click

from dbtier.api.results import Result, load
from dbtier.errors import UserError


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


def _invoke(command: str, workload: str, options: dict) -> Result:
    from dbtier.cli import cli

    options = {"quiet": True, **options}
    try:
        folder = cli.main([command, workload, *_argv(options)], prog_name="dbtier", standalone_mode=False)
    except click.ClickException as exc:  # a bad option or value, as the command line says it
        raise UserError(exc.format_message()) from None
    except click.exceptions.Abort:  # click's name for Ctrl-C (the run cleaned up behind it)
        raise KeyboardInterrupt from None
    if not isinstance(folder, Path):
        raise UserError(f"dbtier {command} {workload} wrote no run directory")
    return load(folder)


def run(workload: str, **options) -> Result:
    """Runs one workload, as `dbtier run WORKLOAD`:

        run("random-index", device="hdd=hdd-sata-7200", rows=2000)
        run("pgbench", device=["hdd=hdd-sata-7200", "ssd=ssd-sata-mlc"], place="wal=ssd", i=True, T=30)
    """
    return _invoke("run", workload, options)


def compare(workload: str, **options) -> Result:
    """Runs one workload on several layouts, as `dbtier compare WORKLOAD`:

        compare("random-index", config=["hdd:d=hdd-sata-7200", "ssd:d=ssd-sata-mlc"], rows=2000)
    """
    return _invoke("compare", workload, options)
