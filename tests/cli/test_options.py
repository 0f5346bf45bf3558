"""What every command shares: -q, and --json meaning a file to write (or '-', to print it)."""

from __future__ import annotations

import click

from dbtier.cli import cli


def _leaves(group: click.Group, ctx: click.Context, prefix: str = ""):
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        path = f"{prefix}{name}"
        if isinstance(cmd, click.Group):
            if cmd.callback is not None and any(p.name == "quiet" for p in cmd.params):
                yield path, cmd  # a group that does something of its own (devices lists the profiles)
            yield from _leaves(cmd, ctx, f"{path} ")
        else:
            yield path, cmd


def test_every_command_takes_quiet_and_every_json_takes_a_path():
    ctx = click.Context(cli)
    seen = list(_leaves(cli, ctx))
    assert len(seen) > 20  # every workload under run and compare
    for path, cmd in seen:
        names = {p.name: p for p in cmd.params}
        assert "quiet" in names, f"dbtier {path} has no -q"
        assert "-q" in names["quiet"].opts, f"dbtier {path}: --quiet without -q"
        for p in cmd.params:
            if "--json" in getattr(p, "opts", []):
                assert not p.is_flag, f"dbtier {path}: --json is a flag"
