"""Load once, run many, on real servers: a run with --restore keeps the cluster it loaded, a second run
of the same dump copies it without restoring (its own record and output say so), `dbtier labs` lists
and removes kept clusters, and a kept cluster whose configuration changed is refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dbtier.devices.spec import parse_all
from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import Lab, LabOptions
from tests.conftest import assert_refused_in_one_line, dbtier


@pytest.fixture(scope="module")
def dump(module_shm_dir, tmp_path_factory) -> Path:
    """A real custom-format dump of a small database, by this PostgreSQL's pg_dump."""
    path = tmp_path_factory.mktemp("dump") / "shop.dump"
    with Lab(parse_all(["d=ram-san"]), placement.parse([], ["d"]), LabOptions(workspace=module_shm_dir),
             say=lambda _l: None) as lab:
        db = lab.handle
        db.execute("CREATE TABLE shop (id int PRIMARY KEY, name text)")
        db.execute("INSERT INTO shop SELECT g, 'item ' || g FROM generate_series(1, 3000) g")
        proc = db.client("pg_dump", "-Fc", "-f", str(path), db.database, as_me=True).run()
        assert proc.returncode == 0, proc.stderr
    return path


def _run(dump: Path, workspace: Path, out: Path, *extra: str):
    work = out / "count.sql"
    work.write_text("SELECT count(*) FROM shop;\n")
    proc = dbtier("run", "sql", "--restore", str(dump), "--run", str(work), "-d", "d=ssd-sata-mlc", "--workspace",
                  str(workspace), "-o", str(out), "--json", str(out / "r.json"), *extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, json.loads((out / "r.json").read_text())


def _labs(workspace: Path, tmp_path: Path) -> list[dict]:
    dbtier("labs", "--workspace", str(workspace), "--json", str(tmp_path / "labs.json"), "-q", check=True)
    return json.loads((tmp_path / "labs.json").read_text())["kept"]


def test_a_second_run_of_the_same_dump_does_not_restore(dump, module_shm_dir, tmp_path):
    first_out, second_out = tmp_path / "a", tmp_path / "b"
    first_out.mkdir(), second_out.mkdir()
    first, r1 = _run(dump, module_shm_dir, first_out)
    assert r1["loaded_cluster"]["reused"] is False and "reusing" not in first.stdout
    second, r2 = _run(dump, module_shm_dir, second_out)
    assert r2["loaded_cluster"] == {**r1["loaded_cluster"], "reused": True}
    assert f"reusing the loaded cluster from {r1['loaded_cluster']['kept_at']}" in second.stdout
    # the run reports the restore it stands on as its own: the dump's sha256 and its notes
    assert r2["files"][0]["sha256"] == r1["files"][0]["sha256"] and r2["notes"] == r1["notes"]
    # ... and the files it ran itself as its own: this run's --run file, not the first run's
    assert [f["path"] for f in r2["files"] if f["option"] == "run"] == [str(second_out / "count.sql")]
    assert r2["checks"]["restored"]["format"] == "custom"
    assert r2["metrics"]["statement_times"][0]["rows"] == 1  # count(*): one row, on the copied data
    (kept,) = [k for k in _labs(module_shm_dir, tmp_path) if k["key"] == r1["loaded_cluster"]["key"]]
    assert kept["made_by"]["workload"] == "sql" and kept["bytes"] > 0
    assert [f["option"] for f in kept["made_by"]["files"]] == ["restore"]
    # removed, the next run restores again
    dbtier("labs", "remove", kept["key"], "--workspace", str(module_shm_dir), "-q", check=True)
    assert kept["key"] not in [k["key"] for k in _labs(module_shm_dir, tmp_path)]
    third_out = tmp_path / "c"
    third_out.mkdir()
    _third, r3 = _run(dump, module_shm_dir, third_out)
    assert r3["loaded_cluster"]["reused"] is False
    # --no-reuse: loaded afresh in the run's own lab, the kept one neither used nor replaced
    fourth_out = tmp_path / "d"
    fourth_out.mkdir()
    fourth, r4 = _run(dump, module_shm_dir, fourth_out, "--no-reuse")
    assert "loaded_cluster" not in r4 and "reusing" not in fourth.stdout and r4["checks"]["restored"]["sha256"]
    assert [k["key"] for k in _labs(module_shm_dir, tmp_path)].count(r3["loaded_cluster"]["key"]) == 1


def test_other_settings_load_again(dump, module_shm_dir, tmp_path):
    _proc, r = _run(dump, module_shm_dir, tmp_path, "--set", "maintenance_work_mem=32MB")
    keys = [k["key"] for k in _labs(module_shm_dir, tmp_path)]
    assert r["loaded_cluster"]["reused"] is False and r["loaded_cluster"]["key"] in keys and len(keys) >= 2


def test_a_kept_cluster_changed_since_is_refused(dump, module_shm_dir, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    _proc, r = _run(dump, module_shm_dir, a, "--set", "work_mem=8MB")
    key = r["loaded_cluster"]["key"]
    (kept,) = [k for k in _labs(module_shm_dir, tmp_path) if k["key"] == key]
    with open(Path(kept["path"]) / "pgdata" / "postgresql.conf", "a") as conf:
        conf.write("listen_addresses = '*'\n")
    work = b / "count.sql"
    work.write_text("SELECT count(*) FROM shop;\n")
    proc = dbtier("run", "sql", "--restore", str(dump), "--run", str(work), "-d", "d=ssd-sata-mlc", "--set",
                  "work_mem=8MB", "--workspace", str(module_shm_dir), "-o", str(b))
    os.remove(work)
    assert_refused_in_one_line(proc, f"dbtier labs remove {key}", {"output": b})
    dbtier("labs", "remove", "--all", "--workspace", str(module_shm_dir), "-q", check=True)
    assert _labs(module_shm_dir, tmp_path) == []


def test_labs_refuses_an_unknown_key(module_shm_dir, tmp_path):
    proc = dbtier("labs", "remove", "0123456789abcdef", "--workspace", str(module_shm_dir))
    assert_refused_in_one_line(proc, "no kept cluster 0123456789abcdef", {})


def test_the_room_a_kept_load_takes_is_checked_before_the_first_load(dump, module_shm_dir, tmp_path, monkeypatch):
    """The first run of a dump loads it in a seed lab, kept beside the run's copy: that room is asked for
    before anything is made; once kept, it is on disk already and not asked for again."""
    from dbtier.experiments import preflight, runner
    from dbtier.experiments.experiment import Experiment

    work = tmp_path / "count.sql"
    work.write_text("SELECT count(*) FROM shop;\n")
    exp = Experiment.from_options("sql", device="d=ssd-sata-mlc", restore=str(dump), run=[str(work)],
                                  set=["work_mem=5MB"])
    asked: list[dict[str, int]] = []
    real = preflight.place_of

    def recorded(path):
        place = real(path)
        asked.append(place.parts)
        return place

    def seed_parts(seeding):
        asked.clear()
        monkeypatch.setattr(preflight, "place_of", recorded)
        runner.check(exp, module_shm_dir, seeding=seeding)
        monkeypatch.setattr(preflight, "place_of", real)
        return [n for parts in asked for what, n in parts.items() if what == "the loaded cluster the run copies"]

    (first,) = seed_parts("kept")
    assert first >= dump.stat().st_size  # the restored database, at least the dump's size
    assert seed_parts(None) == [] and seed_parts("fresh") == [first]
    _run(dump, module_shm_dir, tmp_path, "--set", "work_mem=5MB")  # keeps the load
    assert seed_parts("kept") == [] and seed_parts("shared") == [] and seed_parts("fresh") == [first]
