"""A "production" server for the tests: a real lab server (the embedded binaries, its files on emulated
devices) that logs as the capture settings say and preloads pg_stat_statements. Its clients are real
(psycopg, psql, pgbench); nothing here writes log text by hand."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from dbtier.devices.spec import parse_all
from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import Lab, LabOptions
from dbtier.production.logsettings import CAPTURE, STATISTICS, as_sets


@contextlib.contextmanager
def production_lab(workspace: Path, destinations: str = "stderr,csvlog,jsonlog", devices=("prod=ram-san",),
                   sets: dict[str, str] | None = None):
    """A lab server logging every statement to its pgdata/log, in each of `destinations`."""
    all_sets = as_sets(CAPTURE, STATISTICS)
    all_sets.update({"logging_collector": "on", "log_destination": f"'{destinations}'",
                     "log_rotation_size": "0", "max_connections": "40"})
    all_sets.update(sets or {})
    names = [d.split("=", 1)[0] for d in devices]
    with Lab(parse_all(list(devices)), placement.parse([], names), LabOptions(workspace=workspace, sets=all_sets),
             say=lambda _line: None) as lab:
        yield lab  # the emulation stays paused (a lab's state outside a measurement): production's own speed


def log_files(lab, suffix: str) -> list[Path]:
    """The server's log files of one destination (.log for stderr, .csv, .json), oldest first."""
    return sorted((lab.cluster.pgdata / "log").glob(f"*{suffix}"))


@pytest.fixture(scope="module")
def production_workspace(module_shm_dir) -> Path:
    return module_shm_dir
