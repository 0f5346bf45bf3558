"""Seed 004's commands on a real server at tiny scale, under direct I/O and dsync: every command
runs, row counts and amcheck hold, and dsync writes through with a flush per write while direct I/O
leaves the flushing to checkpoints and commits."""

import pytest

from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import LabOptions
from dbtier.devices.spec import parse_all
from dbtier.workloads import registry
from dbtier.workloads.base import QuietProgress
from dbtier.experiments.runner import run_workload

PHASES = ["create database", "bulk load", "insert", "update", "create clustered index", "create non-clustered index",
          "update statistics", "alter table", "reorg rebuild", "tablealloc check"]


@pytest.fixture(scope="module")
def modes(module_shm_dir):
    out = {}
    for mode in ("direct", "dsync"):
        out[mode] = run_workload(registry.get("io-modes")(orders=3000), parse_all(["d=ram-san"]),
                                 placement.parse([], ["d"]), LabOptions(io_mode=mode, workspace=module_shm_dir),
                                 QuietProgress(), say=lambda _l: None)
    return out


def test_every_command_runs_and_the_table_checks_clean(modes):
    for r in modes.values():
        assert [ph["phase"] for ph in r["phases"]] == PHASES
        load = r["phases"][1]["metrics"]["rows"]
        inserted = r["phases"][2]["metrics"]["rows"]
        assert load > 3000 and inserted >= 50 and r["checks"] == {"rows": load + inserted, "amcheck": "clean"}
        assert r["phases"][-1]["metrics"]["pages"] > 0


def test_dsync_writes_through_with_a_flush_each(modes):
    def total(r, key):
        return sum(ph["devices"][0]["counters"][key] for ph in r["phases"])
    direct_w, dsync_w = total(modes["direct"], "writes"), total(modes["dsync"], "writes")
    assert dsync_w > 50 and total(modes["dsync"], "flushes") >= 0.9 * dsync_w
    # direct I/O flushes at commits and checkpoints only
    assert total(modes["direct"], "flushes") < 0.3 * direct_w
