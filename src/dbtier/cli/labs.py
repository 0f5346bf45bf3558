"""`dbtier labs`: the loaded clusters kept in the workspace (experiments/loaded.py), and removing them."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from dbtier.errors import UserError
from dbtier.experiments import loaded
from dbtier.report import jsonout, outputs
from dbtier.report.terminal import console

_WORKSPACE = click.option("--workspace", type=click.Path(path_type=Path), help="the folder dbtier keeps its "
                          "workspace in, as given to 'dbtier run' (default: /dev/shm, in RAM)")


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _what(made_by: dict) -> str:
    files = [f"--{f['option']} {Path(f['path']).name}" for f in made_by.get("files", [])]
    own = [k.replace("_", " ") if v is True else f"{k.replace('_', ' ')} {v}" for k, v in made_by.items()
           if k not in ("workload", "files") and v]
    return " ".join([made_by.get("workload", "?"), *files, *own])[:90]


@click.group(invoke_without_command=True, context_settings={"max_content_width": 100})
@_WORKSPACE
@click.option("--json", "json_path", type=click.Path(path_type=Path), metavar="PATH",
              help="also write the list as JSON here")
@click.option("--quiet", "-q", is_flag=True, help="only the keys, one a line")
@click.pass_context
def labs(ctx, workspace: Path | None, json_path: Path | None, quiet: bool) -> None:
    """List the loaded clusters kept for later runs.

    \b
    dbtier labs                    each kept cluster: its key, what loaded it, size, age
    dbtier labs remove KEY...      remove those (--all: every one)

    A run of your own database ('run sql', 'run pgbench', 'run client' with --restore, --setup or a
    --prepare-command) keeps the cluster it loaded, keyed by the dump's and setup files' sha256, the
    load's own options, the engine and its version and the settings given; the next run, compare or advise
    --verify of the same load copies it instead of loading again, and says so. Kept clusters take at
    most a quarter of the workspace's file system (the oldest go first)."""
    if ctx.invoked_subcommand:
        return
    json_path = outputs.check_file(json_path, "--json") if json_path else None
    entries = loaded.kept_list(workspace)
    if json_path:
        jsonout.write(json_path, {"kind": "labs", "kept": entries})
    if quiet:
        click.echo("\n".join(e["key"] for e in entries))
        return
    out = console()
    if not entries:
        out.print("no loaded cluster is kept (a run with --restore or --setup keeps the one it loads)")
        return
    table = Table(title="loaded clusters kept for later runs", title_justify="left")
    for col in ("key", "made by", "server", "MiB", "age"):
        table.add_column(col, justify="right" if col in ("MiB", "age") else "left")
    for e in entries:
        server = f"{e['engine'].get('name', 'postgres')} {e['engine'].get('version', '?')}"
        table.add_row(e["key"], _what(e["made_by"]), server, f"{e['bytes'] / 2**20:,.1f}", _age(e["age_s"]))
    out.print(table)


@labs.command()
@click.argument("keys", nargs=-1, metavar="KEY")
@click.option("--all", "everything", is_flag=True, help="remove every kept cluster")
@_WORKSPACE
@click.option("--quiet", "-q", is_flag=True, help="print nothing")
def remove(keys: tuple[str, ...], everything: bool, workspace: Path | None, quiet: bool) -> None:
    """Remove kept clusters: each KEY as 'dbtier labs' lists it, or --all."""
    if everything and keys:
        raise UserError("give keys or --all, not both")
    if everything:
        keys = tuple(e["key"] for e in loaded.kept_list(workspace))
    elif not keys:
        raise UserError("give the KEY of a kept cluster ('dbtier labs' lists them), or --all")
    for key, size in loaded.remove(list(keys), workspace):
        if not quiet:
            click.echo(f"removed {key} ({size / 2**20:,.1f} MiB)")
