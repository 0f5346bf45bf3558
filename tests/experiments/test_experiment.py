"""One experiment, typed: read from the command line's options, a TOML file or a run directory, and
written by one writer; every run directory holds its experiment.toml, and running that file again
runs the same experiment (the same workload, parameters, devices, placement and lab options)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import dbtier
from dbtier.errors import UserError
from dbtier.experiments.experiment import EXPERIMENT_FILE, Experiment
from tests.conftest import dbtier as dbtier_cli


def test_options_to_toml_and_back(tmp_path):
    (tmp_path / "s.sql").write_text("CREATE TABLE t (a int);\n")
    (tmp_path / "r.sql").write_text("SELECT 1;\n")
    exp = Experiment.from_options("sql", device=["hdd=hdd-sata-7200", f"ssd=ssd-sata-mlc:{tmp_path}"],
                                  place="data=hdd,wal=ssd,t=ssd", cache="64MB", page_cache="256MB",
                                  io_mode="buffered", cpu_scale=2.5, scale_model=10, set=["work_mem=8MB"],
                                  setup=[str(tmp_path / "s.sql")], run=[str(tmp_path / "r.sql")], passes=2,
                                  trace=True)
    assert exp.cache_bytes == 64 << 20 and exp.page_cache_bytes == 256 << 20 and exp.settings == {"work_mem": "8MB"}
    path = tmp_path / "e.toml"
    path.write_text(exp.to_toml())
    again = Experiment.from_toml(path)
    assert again.to_toml() == exp.to_toml()
    assert (again.workload, again.cache_bytes, again.page_cache_bytes, again.io_mode, again.cpu_scale,
            again.scale_factor, again.settings, again.trace) == ("sql", 64 << 20, 256 << 20, "buffered", 2.5, 10.0,
                                                                {"work_mem": "8MB"}, True)
    assert [d.directory for d in again.devices] == [None, tmp_path.resolve()]
    assert again.placement.roles["wal"] == "ssd" and again.placement.objects == {"t": "ssd"}
    assert again.make_workload().p["setup"] == (tmp_path / "s.sql",) and again.make_workload().p["passes"] == 2
    # a file written before --passes had its name: its 'repeat' is read as passes
    old = tmp_path / "old.toml"
    old.write_text(path.read_text().replace("passes = 2", "repeat = 2"))
    assert "repeat = 2" in old.read_text() and Experiment.from_toml(old).make_workload().p["passes"] == 2


def test_a_files_relative_paths_are_read_from_its_folder(tmp_path):
    (tmp_path / "q.sql").write_text("SELECT 1;\n")
    (tmp_path / "e.toml").write_text('workload = "pgbench"\ndevice = "d=ram-san"\nfile = ["q.sql@3"]\ntime = 5\n'
                                     'client = 2\n[set]\nmax_connections = 30\n')
    exp = Experiment.from_toml(tmp_path / "e.toml")
    assert exp.params["file"] == (Path(f"{tmp_path}/q.sql@3"),) and exp.settings == {"max_connections": "30"}
    assert exp.make_workload().scripts[0][0] == "q.sql"


@pytest.mark.parametrize("text, message", [
    ("device = 'd=ram-san'\n", "give the workload"),
    ("workload = 'random-index'\ndevice = 'd=ram-san'\nrow = 5\n", "has no option --row; did you mean --rows?"),
    ("workload = 'random-index'\ndevice = 'd=ram-san'\nrows = 'many'\n", "--rows 'many': give a whole number"),
    ("workload = 'random-index'\ndevice = 'd=ram-san'\nrows = 1.5\n", "--rows 1.5: give a whole number"),
    ("workload = 'random-index'\ndevice = 'd=ram-san'\ncache = 32\n", "--cache 32: give a size with its unit"),
    ("workload = 'random-index'\ndevice = 'd=ram-san'\ncache = '32'\n", "--cache 32: give a unit"),
    ("workload = 'random-index'\ndevice = 'd=ram-san'\nset = 'port=1'\n", "set must be a table"),
    ("workload = 'random-index'\ndevice = 'd=ram-san'\n[set]\nport = 5433\n", "--set port: the lab listens"),
    ("workload = 'random-index'\ndevice = 'd=ram-san'\nio-mode = 'fast'\n", "--io-mode fast: choose one of"),
    ("workload = 'random-index'\ndevice = 'd=ram-san'\ncpu-scale = 'slow'\n", "--cpu-scale 'slow': give a number"),
    ("workload = 'random-index'\ndevice = 'd=ram-san'\ncache-state = 'warm'\n", "--cache-state warm: choose one"),
    ("workload = 'random-index'\ndevice = 7\n", "--device: give devices as NAME=PROFILE"),
    ("workload = 'random-indx'\ndevice = 'd=ram-san'\n", "did you mean random-index?"),
    ("workload = 'random-index'\ndevice = 'd=ram-san'\nplace = 'data=x'\n", "no device named 'x'"),
    ("workload = [\n", "not valid TOML"),
])
def test_a_bad_experiment_file_is_one_line(text, message, tmp_path):
    path = tmp_path / "e.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=message.replace("?", r"\?").replace("(", r"\(").replace("[", r"\[")):
        Experiment.from_toml(path)
    proc = dbtier_cli("run", "--experiment", str(path), "-o", str(tmp_path / "out"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert str(path) in proc.stderr and not (tmp_path / "out").exists()


def _same_run(first: Path, second: Path) -> None:
    """Two run directories of one experiment: its file, and what the results say was run."""
    assert (second / EXPERIMENT_FILE).read_text() == (first / EXPERIMENT_FILE).read_text()
    a, b = (json.loads((d / "result.json").read_text()) for d in (first, second))
    for key in ("workload", "params", "cache_state"):
        assert a[key] == b[key], key
    for key in ("cache_bytes", "io_mode", "cpu_scale", "placement", "user_settings", "scale_model"):
        assert a["lab"][key] == b["lab"][key], key
    assert [(d["name"], d["profile"], d["params"]) for d in a["lab"]["devices"]] == \
        [(d["name"], d["profile"], d["params"]) for d in b["lab"]["devices"]]


@pytest.mark.parametrize("how", ["random-index", "sql", "pgbench"])
def test_a_run_directorys_experiment_runs_the_run_again(how, module_shm_dir, tmp_path):
    (tmp_path / "s.sql").write_text("CREATE TABLE t AS SELECT g AS id FROM generate_series(1, 500) g;\n")
    (tmp_path / "q.sql").write_text("SELECT count(*) FROM t;\n")
    (tmp_path / "b.sql").write_text("\\set k random(1, 500)\nSELECT id FROM t WHERE id = :k;\n")
    args = {"random-index": ["--rows", "200", "--cache", "8MB"],
            "sql": ["--setup", "s.sql", "--run", "q.sql", "--set", "work_mem=8MB"],
            "pgbench": ["--setup", "s.sql", "-f", "b.sql@2", "-t", "20", "-c", "2", "--io-mode", "buffered"]}[how]
    ws = ["--workspace", str(module_shm_dir), "-q"]
    dbtier_cli("run", how, *args, "-d", "hdd=hdd-sata-7200", "-d", "ssd=ram-san", "--place", "wal=ssd", *ws,
               "-o", str(tmp_path / "first"), check=True, cwd=tmp_path)
    (first,) = (tmp_path / "first").iterdir()
    dbtier_cli("run", "--experiment", str(first / EXPERIMENT_FILE), *ws, "-o", str(tmp_path / "again"), check=True)
    (again,) = (tmp_path / "again").iterdir()
    _same_run(first, again)
    if how == "random-index":  # and from Python, the experiment object itself
        result = dbtier.run(dbtier.Experiment.load(first), output=str(tmp_path / "api"), workspace=str(module_shm_dir))
        _same_run(first, result.path)
