"""The reference generated from the code stays the code's: docs/cli.md is every command's --help as
it is now, the profile catalogue in docs/devices.md is the packaged profiles as they are now, and
every command, option and argument a user can give has help text."""

from __future__ import annotations

import difflib
import importlib.util
import re
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generate = _generator()


@pytest.mark.parametrize("page", [generate.CLI_PAGE, generate.DEVICES_PAGE], ids=lambda p: p.name)
def test_the_generated_pages_are_what_the_code_says_now(page):
    expected = generate.pages()[page]
    committed = page.read_text()
    if committed != expected:
        diff = "".join(list(difflib.unified_diff(committed.splitlines(True), expected.splitlines(True),
                                                 "committed", "generated now", n=1))[:40])
        pytest.fail(f"{page.relative_to(ROOT)} is out of date with the code (a command, option, help text or "
                    f"profile changed). Regenerate it with `{generate.REGENERATE}` and commit it:\n{diff}")


def test_the_cli_reference_has_a_section_for_every_command():
    page = generate.CLI_PAGE.read_text()
    paths = [path for path, _, _ in generate.commands()]
    assert {"dbtier run sql", "dbtier run pgbench", "dbtier compare oltp", "dbtier devices validate"} <= set(paths)
    assert re.findall(r"^## (.+)$", page, re.M) == paths


def _described(text: str | None) -> bool:
    return bool(text and text.strip())


def test_every_command_and_option_has_help():
    """Every command has a description, and every option of every command says what it does."""
    missing = []
    for path, cmd, _ in generate.commands():
        if not _described(cmd.help) and not _described(cmd.short_help):
            missing.append(f"{path}: the command has no help")
        for param in cmd.params:
            if isinstance(param, click.Option) and not param.hidden and not _described(param.help):
                missing.append(f"{path} {'/'.join(param.opts)}: no help")
    assert not missing, "give these help text:\n" + "\n".join(missing)


def test_every_argument_is_described_in_its_commands_help():
    """click's arguments have no help of their own: the command's description must name each one
    (RUN_DIR, NAME, TRACE ...), or the user is left to guess what goes there."""
    missing = []
    for path, cmd, _ in generate.commands():
        for param in cmd.params:
            if isinstance(param, click.Argument):
                shown = param.human_readable_name
                if not re.search(rf"\b{re.escape(shown)}\b", cmd.help or ""):
                    missing.append(f"{path} {shown}: not named in the command's description")
    assert not missing, "say what these arguments are in their command's help:\n" + "\n".join(missing)
