"""--settings-from SNAPSHOT on real servers: a "production" server's own pg_settings, written as `dbtier
stats snapshot` writes them, applied in the lab where they shape I/O and plans (units converted, --set
winning, the lab's own never taken), and every report showing the run's settings against PostgreSQL's
defaults and production's; a file that is not a snapshot refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dbtier.engines.postgres import production
from tests.conftest import assert_refused_in_one_line, dbtier
from tests.production.conftest import production_lab

PRODUCTION = {"shared_buffers": "48MB", "work_mem": "16MB", "random_page_cost": "1.1", "autovacuum": "on",
              "max_parallel_workers_per_gather": "2", "max_worker_processes": "4", "jit": "on",
              "checkpoint_timeout": "15min", "min_wal_size": "160MB", "effective_io_concurrency": "64"}


@pytest.fixture(scope="module")
def snapshot(module_shm_dir, tmp_path_factory) -> Path:
    """A real server's snapshot, as `dbtier stats snapshot` takes and writes it."""
    from dbtier.production import snapshot as snap

    path = tmp_path_factory.mktemp("prod") / "snapshot.json"
    with production_lab(module_shm_dir, sets=PRODUCTION) as lab, lab.connect() as conn:
        snap.write_json(path, snap.take(conn))
    return path


def test_units_become_postgresql_conf_text():
    where = Path("s.json")
    assert production.conf_value("shared_buffers", {"setting": "16384", "unit": "8kB"}, where) == "131072kB"
    assert production.conf_value("min_wal_size", {"setting": "80", "unit": "MB"}, where) == "81920kB"
    assert production.conf_value("checkpoint_timeout", {"setting": "300", "unit": "s"}, where) == "300s"
    assert production.conf_value("autovacuum_work_mem", {"setting": "-1", "unit": "kB"}, where) == "-1"
    assert production.conf_value("jit", {"setting": "on", "unit": None}, where) == "on"
    assert production.shown("16384", "8kB") == "128MB" and production.shown("1536", "kB") == "1536kB"
    assert production.shown("900", "s") == "15min" and production.shown("200", "ms") == "200ms"


def test_production_settings_are_applied_and_shown(snapshot, module_shm_dir, tmp_path):
    (tmp_path / "s.sql").write_text("CREATE TABLE t AS SELECT g AS id FROM generate_series(1, 1000) g;\n")
    (tmp_path / "q.sql").write_text("SELECT current_setting('work_mem'), current_setting('random_page_cost'), "
                                    "current_setting('shared_buffers'), current_setting('autovacuum');\n")
    out = tmp_path / "out"
    out.mkdir()
    proc = dbtier("run", "sql", "--setup", str(tmp_path / "s.sql"), "--run", str(tmp_path / "q.sql"),
                  "--settings-from", str(snapshot), "--set", "work_mem=8MB", "-d", "d=ssd-sata-mlc",
                  "--workspace", str(module_shm_dir), "-o", str(out), "--json", str(out / "r.json"), check=True)
    result = json.loads((out / "r.json").read_text())
    lab = result["lab"]
    assert lab["cache_bytes"] == 48 << 20  # production's shared_buffers, --cache not given
    assert lab["production"]["file"] == str(snapshot) and lab["production"]["applied"]["random_page_cost"] == "1.1"
    assert lab["production"]["server"]["version"].startswith("18.")
    assert "listen_addresses" not in lab["production"]["applied"] and "io_method" not in lab["production"]["applied"]
    rows = {r["setting"]: r for r in lab["settings_compared"]}
    assert rows["work_mem"] == {"setting": "work_mem", "run": "8MB", "default": "4MB", "production": "16MB",
                                "from": "--set"}
    assert rows["random_page_cost"]["run"] == "1.1" and rows["random_page_cost"]["from"] == "production"
    assert lab["settings"]["autovacuum"] == "on" and "autovacuum" not in rows  # as default and production: not shown
    assert rows["checkpoint_timeout"]["run"] == "15min" and rows["min_wal_size"]["run"] == "160MB"
    assert rows["max_connections"]["from"] == "the lab" and rows["max_connections"]["production"] == "40"
    assert lab["settings"]["jit"] == "on" and lab["settings"]["max_parallel_workers_per_gather"] == "2"
    assert rows["shared_buffers"]["run"] == "48MB" and rows["shared_buffers"]["production"] == "48MB"
    assert "PostgreSQL's default" in proc.stdout and "160MB" in proc.stdout
    (run_dir,) = out.glob("sql-*")
    assert "settings-from = " in (run_dir / "experiment.toml").read_text()
    assert "PostgreSQL&#39;s default" in (run_dir / "report.html").read_text()


def test_a_run_without_a_snapshot_shows_the_labs_preset(module_shm_dir, tmp_path):
    (tmp_path / "q.sql").write_text("SELECT 1;\n")
    out = tmp_path / "out"
    out.mkdir()
    dbtier("run", "sql", "--run", str(tmp_path / "q.sql"), "-d", "d=ram-san", "--workspace", str(module_shm_dir),
           "-o", str(out), "--json", str(out / "r.json"), "-q", check=True)
    rows = {r["setting"]: r for r in json.loads((out / "r.json").read_text())["lab"]["settings_compared"]}
    assert rows["min_wal_size"] == {"setting": "min_wal_size", "run": "1GB", "default": "80MB", "production": None,
                                    "from": "the lab"}
    assert rows["autovacuum"]["run"] == "off" and rows["max_parallel_workers_per_gather"]["run"] == "0"


@pytest.mark.parametrize("text, message", [
    ('{"format": 1,\n "server": {"version": "18.1"},\n "settings": {"work_mem": }}', "line 3: not JSON"),
    ('{"format": 2, "server": {}, "settings": {}}', "format 2, where this dbtier reads format 1"),
    ('{"format": 1, "server": {"version": "18.1"}, "settings": {}}', "no settings"),
    ('{"format": 1, "server": {"version": "18.1"}, "settings": {"work_mem": {"setting": 4096}}}',
     "setting 'work_mem' is not a pg_settings row"),
    ('{"format": 1, "server": {"version": "18.1"}, "settings": {"work_mem": {"setting": "1; x", "unit": "kB"}}}',
     "setting work_mem = '1; x' is not a value dbtier takes"),
])
def test_a_bad_snapshot_is_one_line(text, message, tmp_path):
    (tmp_path / "s.json").write_text(text)
    (tmp_path / "q.sql").write_text("SELECT 1;\n")
    out = tmp_path / "out"
    out.mkdir()
    proc = dbtier("run", "sql", "--run", str(tmp_path / "q.sql"), "--settings-from", str(tmp_path / "s.json"),
                  "-d", "d=ram-san", "-o", str(out))
    assert_refused_in_one_line(proc, f"--settings-from {tmp_path / 's.json'}: {message}", {"output": out})
