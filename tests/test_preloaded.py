"""The suite's `dbtier()` forks its commands from a process that has imported dbtier (tests/preloaded.py):
each must answer exactly as a fresh `python -m dbtier` does (output, errors, exit status), see the
environment, folder and TMPDIR it is given, and leave nothing behind."""

from __future__ import annotations

import os

import pytest

from tests.conftest import _preloaded_dbtier, dbtier

COMMANDS = [
    ("--help",),
    ("run", "--help"),
    ("devices",),
    ("run", "random-index", "-d", "a=hdd-sata-720"),   # refused: status 2, one line
    ("predict", "/nonexistent-run-dir"),
    ("runn",),
]


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_a_forked_command_answers_as_a_fresh_one(args):
    assert _preloaded_dbtier().can_run(None), "the preloaded parent did not start"
    forked, fresh = dbtier(*args), dbtier(*args, fresh=True)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_a_forked_command_has_its_own_folder_environment_and_tmpdir(tmp_path):
    """The environment given is the one the command reads (TMPDIR among it), in the folder given."""
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "COLUMNS": "200"}
    proc = dbtier("trace", "does-not-exist.parquet", env=env, cwd=tmp_path)
    fresh = dbtier("trace", "does-not-exist.parquet", env=env, cwd=tmp_path, fresh=True)
    assert (proc.returncode, proc.stderr) == (fresh.returncode, fresh.stderr)
    assert not list((tmp_path / "tmp").iterdir())


def test_an_environment_that_changes_what_loads_gets_a_fresh_interpreter():
    preloaded = _preloaded_dbtier()
    assert preloaded.can_run({**os.environ, "TMPDIR": "/tmp"})
    assert not preloaded.can_run({**os.environ, "DBTIER_NATIVE_DIR": "/elsewhere"})
    assert not preloaded.can_run({**os.environ, "LD_PRELOAD": "x.so"})
