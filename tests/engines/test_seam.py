"""The engine seam: the experiment layer reaches a database only through dbtier.engines, by name;
an engine's roles, settings and lab come from it, and a workload runs only on the engines it names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dbtier
from dbtier import engines
from dbtier.errors import UserError
from dbtier.experiments import preflight
from dbtier.experiments.experiment import Experiment
from dbtier.workloads import registry

PACKAGE = Path(dbtier.__file__).parent


def test_an_engine_by_name_and_a_wrong_one_refused():
    pg = engines.get("postgres")
    assert pg.name == "postgres" and pg.roles[0] == "data" and pg.index_role == "indexes"
    assert {pg.log_role, pg.temp_role, pg.dump_role} <= set(pg.roles) and pg.default_io_mode in pg.io_modes
    placement = pg.parse_placement(["wal=ssd"], ["hdd", "ssd"])
    assert placement.roles == {"data": "hdd", "indexes": "hdd", "wal": "ssd", "temp": "hdd", "dump": "hdd"}
    with pytest.raises(UserError, match=r"--engine mysql: not an engine dbtier runs \(engines: postgres, mariadb\)"):
        engines.get("mysql")
    maria = engines.get("mariadb")
    assert maria.roles == ("data", "log", "undo", "temp", "binlog") and maria.index_role is None
    assert {maria.log_role, maria.temp_role, maria.dump_role} <= set(maria.roles)
    assert maria.default_io_mode in maria.io_modes and maria.shares_loads and maria.keeps_loads
    with pytest.raises(UserError, match="--set listen_addresses"):
        pg.parse_settings(["listen_addresses=*"])


def test_an_experiment_names_its_engine_and_a_workload_the_engines_it_runs_on(tmp_path):
    exp = Experiment.from_options("random-index", device="d=ram-san", rows=50)
    assert exp.engine == "postgres" and 'engine = "postgres"' in exp.to_toml()
    (tmp_path / "e.toml").write_text('workload = "random-index"\nengine = "postgress"\ndevice = "d=ram-san"\n')
    with pytest.raises(UserError, match="did you mean postgres"):
        Experiment.from_toml(tmp_path / "e.toml")

    class OtherSql(registry.get("random-index")):
        engines = ("innodb",)
    with pytest.raises(UserError, match="runs on innodb, not postgres"):
        preflight.check_engine(OtherSql(rows=50), "postgres")


def test_nothing_above_the_seam_builds_a_lab_of_its_own():
    """The experiment layer asks the engine for its lab, placement and settings: it imports no
    engine's lab, placement or settings module."""
    for path in (PACKAGE / "experiments").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("dbtier.engines.postgres"), f"{path.name} imports {node.module}"
