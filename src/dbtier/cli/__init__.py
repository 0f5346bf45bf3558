"""The `dbtier` command: parses, calls the parts, prints. User errors end in one line, status 2."""

from __future__ import annotations

import importlib
import os
import signal
import sys

import click

from dbtier.version import __version__
from dbtier.errors import UserError


#: command -> (module, attribute): each command's module (and what it imports: PostgreSQL's client,
#: numpy, pyarrow, matplotlib) is loaded only when that command runs, so a command, and above all one
#: refusing a bad input, starts in a fraction of the time.
COMMANDS = {
    "advise": ("dbtier.cli.advise", "advise"),
    "catalog": ("dbtier.cli.catalog", "catalog"),
    "cluster": ("dbtier.cli.cluster", "cluster"),
    "compare": ("dbtier.cli.compare", "compare"),
    "crash": ("dbtier.cli.crash", "crash"),
    "demo": ("dbtier.cli.demo", "demo"),
    "devices": ("dbtier.cli.devices", "devices"),
    "exec": ("dbtier.cli.exec_cmd", "exec_command"),
    "iobench": ("dbtier.cli.iobench", "iobench"),
    "labs": ("dbtier.cli.labs", "labs"),
    "predict": ("dbtier.cli.predict", "predict"),
    "reproduce": ("dbtier.cli.reproduce", "reproduce"),
    "run": ("dbtier.cli.run", "run"),
    "stats": ("dbtier.cli.stats", "stats"),
    "sweep": ("dbtier.cli.sweep", "sweep"),
    "trace": ("dbtier.cli.trace_cmd", "trace"),
    "workload": ("dbtier.cli.workload", "workload"),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name]
        return getattr(importlib.import_module(module), attr)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="dbtier")
@click.option("--csv", "csv_dir", metavar="DIR",
              help="also write every table the command prints as a CSV file in DIR (made if need be), "
                   "whole: no column or row left out: dbtier --csv tables compare ...")
def cli(csv_dir: str | None) -> None:
    """Will faster storage help this database, by how much, and where should it go?

    dbtier runs programs (PostgreSQL first) on virtual storage devices: an LD_PRELOAD interposer
    maps each directory to a device model (HDD, SSD, PCIe flash, NVMe, RAM SAN) and makes every
    I/O take the time that device would, then reports what iostat would have shown.

    \b
    Start with:
      dbtier demo                          seed 000 on PostgreSQL: an emulated HDD against an SSD
      dbtier run random-index -d hdd=hdd-sata-7200   one workload on the devices you give
      dbtier run sql --setup schema.sql --run work.sql -d hdd=hdd-sata-7200   your own SQL
      dbtier run pgbench -i -s 10 -T 60 -d hdd=hdd-sata-7200 -d ssd=ssd-sata-mlc --place wal=ssd
      dbtier compare pgbench -i -T 60 --experiment layouts.toml     several layouts side by side
      dbtier predict RUN_DIR --place data=hdd,wal=ssd     a traced run on another layout, predicted
      dbtier advise RUN_DIR --fast ssd=ssd-sata-mlc --budget 1GB   where the fast storage should go
      dbtier devices                       the device profiles
      dbtier devices show hdd-sata-7200    one profile and its expected latencies
      dbtier exec -d d=ssd-sata-mlc:/dev/shm/d -- fio ...    any program on a device
      dbtier workload import postgresql-*.csv -o mywork   production's workload from its log
    """
    if csv_dir is not None:
        from pathlib import Path

        from dbtier.report import outputs, terminal

        terminal.CSV_DIR = outputs.check_dir(Path(csv_dir), "--csv")


_unwinding = False


def _terminate(signum, _frame):
    """Ctrl-C, SIGTERM and SIGHUP unwind: servers are stopped and partial results removed. Only the first
    one does: the cleanup it started finishes, whatever signals follow."""
    global _unwinding
    if _unwinding:
        return
    _unwinding = True
    raise KeyboardInterrupt


def _interrupted() -> None:
    """Cleaned up after a signal: the status says interrupted, whatever signal comes on the way out."""
    global _unwinding
    # An interrupt not raised by _terminate (a cancelled replay's, click's Abort) left _unwinding unset,
    # and signal.signal() runs a pending handler before it changes one: a second signal would raise
    # again here, out of main, and Python would end killed by SIGINT instead of exiting 130.
    _unwinding = True
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    click.echo("dbtier: interrupted", err=True)
    sys.exit(130)


def main() -> None:
    try:
        _main()
    except KeyboardInterrupt:  # raised on the way out, after the cleanup: interrupted all the same (not
        sys.exit(130)          # Python's own end for it, killed by SIGINT, which a caller reads as a crash)


def _main() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
    from dbtier.workloads.base import WorkloadError

    try:
        cli.main(standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        _interrupted()
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(0)
    except click.exceptions.UsageError as exc:  # one line, and where to read more
        where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        click.echo(f"dbtier: error: {exc.format_message()}{where}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"dbtier: error: {exc.format_message()}", err=True)
        sys.exit(2)
    except UserError as exc:
        click.echo(f"dbtier: error: {exc}", err=True)
        sys.exit(2)
    except WorkloadError as exc:
        click.echo(f"dbtier: error: the run's result check failed: {exc}", err=True)
        sys.exit(1)
    except Exception as exc:  # a bug: say so plainly; the traceback on request
        if os.environ.get("DBTIER_DEBUG"):
            raise
        click.echo(f"dbtier: internal error: {type(exc).__name__}: {exc} (DBTIER_DEBUG=1 shows the traceback)", err=True)
        sys.exit(1)
