"""A reproduction goes on past a failed run, whatever the failure was, and says which and why; an
article with a CPU figure runs its reference statement first and slows the server's CPU for all its
runs by the measured ratio."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib

import pytest

from dbtier.reproduce import run as run_mod
from dbtier.reproduce.plan import Article, CpuReference, RunSpec
from dbtier.workloads.base import QuietProgress


def test_a_run_that_fails_leaves_the_others_to_run(monkeypatch, tmp_path):
    monkeypatch.delenv("DBTIER_CHECK_SCHEMA")  # the fake runs' documents hold only what this test reads
    ran = []

    def fake_run_spec(spec, base, progress, artifacts, say, cpu_scale=1.0, scale=1.0, engine="postgres"):
        ran.append(spec.key)
        if spec.key == "broken":
            raise RuntimeError("the server went away")
        return {"elapsed_s": 1.0, "server_cpu_s": 0.5, "io_wait_s": 0.1, "host_steal_s": 0.0, "top_events": []}

    monkeypatch.setattr(run_mod, "run_spec", fake_run_spec)
    art = Article("999", "a test", "none", [RunSpec("first", "random-index"), RunSpec("broken", "random-index"),
                                            RunSpec("last", "random-index")], [])
    said = []
    doc = run_mod.reproduce([art], run_mod.Base(), tmp_path, lambda _p: contextlib.nullcontext(None), said.append)
    assert ran == ["first", "broken", "last"]
    (article,) = doc["articles"]
    assert article["failures"] == {"broken": "RuntimeError: the server went away"}
    assert any("broken: failed: RuntimeError: the server went away" in line for line in said)
    assert [r["summary"] is not None for r in article["runs"]] == [True, False, True]


def _calibration_result(cpu_s: float, units: int) -> dict:
    return {"elapsed_s": 1.0, "server_cpu_s": cpu_s, "io_wait_s": 0.0, "host_steal_s": 0.0, "top_events": [],
            "phases": [{"phase": "a=i", "server_cpu_s": cpu_s, "metrics": {"statements": units}}]}


def test_the_cpu_reference_sets_every_runs_scale(monkeypatch, tmp_path):
    monkeypatch.delenv("DBTIER_CHECK_SCHEMA")  # the fake runs' documents hold only what this test reads
    calls = []

    def fake_run_spec(spec, base, progress, artifacts, say, cpu_scale=1.0, scale=1.0, engine="postgres"):
        calls.append((spec.key, cpu_scale))
        if spec.key == "calibrate":  # 12 us per unit here against the article's 240: K = 20
            return _calibration_result(0.012, 1000)
        return {"elapsed_s": 1.0, "server_cpu_s": 0.5, "io_wait_s": 0.1, "host_steal_s": 0.0, "top_events": []}

    monkeypatch.setattr(run_mod, "run_spec", fake_run_spec)
    ref = CpuReference(RunSpec("calibrate", "update-locality"), "a=i", "update", "statements", 240.0, "the article")
    art = Article("999", "a test", "none", [RunSpec("one", "random-index"), RunSpec("two", "random-index")],
                  [], ref)
    said = []
    doc = run_mod.reproduce([art], run_mod.Base(), tmp_path, lambda _p: contextlib.nullcontext(None), said.append)
    assert calls == [("calibrate", 1.0), ("one", 20.0), ("two", 20.0)]
    cpu = doc["articles"][0]["cpu_scale"]
    assert cpu["k"] == 20.0 and cpu["ours_us"] == 12.0 and cpu["units"] == 1000 and cpu["source"] == "the article"
    assert any("--cpu-scale 20" in line for line in said)


def test_a_cpu_slower_than_the_articles_runs_at_its_own_speed():
    ref = CpuReference(RunSpec("calibrate", "update-locality"), "a=i", "update", "statements", 10.0, "the article")
    cpu = run_mod.cpu_scale(ref, _calibration_result(0.020, 1000))  # 20 us here, 10 there
    assert cpu["k"] == 1.0 and "slower" in cpu["note"]


@pytest.mark.parametrize("seed, units_key", [("003", "updates"), ("004", None)])
def test_an_articles_cpu_reference_on_a_real_server(shm_dir, tmp_path, seed, units_key):
    """The calibration run itself: seed 003's updates by key, seed 004's bulk load, on a RAM device;
    the server's CPU per unit measured, and K the article's figure over it."""
    art = importlib.import_module(f"dbtier.reproduce.article{seed}").article(quick=True)
    if seed == "004":  # a fifth of the quick load: the CPU a row costs is the same, in seconds less
        run = art.cpu.run
        art = dataclasses.replace(art, cpu=dataclasses.replace(art.cpu, run=dataclasses.replace(
            run, params={**run.params, "orders": run.params["orders"] // 5})))
    said = []
    cpu = run_mod.calibrate(art, run_mod.Base(workspace=shm_dir), tmp_path,
                            lambda _p: contextlib.nullcontext(QuietProgress()), said.append)
    if units_key:
        assert cpu["units"] == art.cpu.run.params[units_key]
    else:  # the rows COPY loaded: one to seven lines an order
        assert art.cpu.run.params["orders"] <= cpu["units"] <= 7 * art.cpu.run.params["orders"]
    # PostgreSQL spends microseconds per update by key or per row loaded on any current CPU; the
    # articles' CPUs spent 240 (a P4) and 56 (an UltraSPARC IV)
    assert 0.5 < cpu["ours_us"] < 100 and cpu["k"] == round(max(1.0, art.cpu.article_us / cpu["ours_us"]), 2)
    assert (tmp_path / f"seed{seed}" / "cpu-calibration" / "result.json").exists()
    assert any(f"--cpu-scale {cpu['k']:g}" in line for line in said)


def test_the_scale_reference_sets_every_runs_scale_model(monkeypatch, tmp_path):
    """F is the article's database over the footprint of the run that stands for it, for every run."""
    monkeypatch.delenv("DBTIER_CHECK_SCHEMA")  # the fake runs' documents hold only what this test reads
    from dbtier.reproduce.plan import ScaleReference
    from dbtier.workloads import registry

    calls = []

    def fake_run_spec(spec, base, progress, artifacts, say, cpu_scale=1.0, scale=1.0, engine="postgres"):
        calls.append((spec.key, scale))
        return {"elapsed_s": 1.0, "server_cpu_s": 0.5, "io_wait_s": 0.1, "host_steal_s": 0.0, "top_events": []}

    monkeypatch.setattr(run_mod, "run_spec", fake_run_spec)
    runs = [RunSpec("db", "random-index", {"rows": 16000}), RunSpec("other", "table-scan", {"rows": 16000})]
    ours = registry.get("random-index")(rows=16000).footprint().data
    art = Article("999", "a test", "none", runs, [],
                  scale=ScaleReference(1000 * ours, "db", "the article's section 1"))
    said = []
    doc = run_mod.reproduce([art], run_mod.Base(), tmp_path, lambda _p: contextlib.nullcontext(None), said.append)
    assert calls == [("db", 1000.0), ("other", 1000.0)]
    scale = doc["articles"][0]["scale_model"]
    assert scale["factor"] == 1000.0 and scale["ours_bytes"] == ours and scale["source"] == "the article's section 1"
    assert any("1/1000" in line for line in said)


def test_a_scale_reference_of_one_table_is_set_beside_that_tables_loaded_size():
    """Seed 004 states lineitem's size: F is that over lineitem here as loaded, not at the peak a
    rewrite reaches (old and new side by side), and not over the indexes beside it."""
    from dbtier.reproduce.plan import ScaleReference
    from dbtier.workloads import registry

    work = registry.get("io-modes")(orders=1000)
    loaded, peak = work.loaded_bytes(), work.footprint().objects
    assert set(loaded) == {"lineitem", "cl", "nl"}
    assert all(peak[name] == 2 * loaded[name] for name in loaded)
    art = Article("999", "a test", "none", [RunSpec("db", "io-modes", {"orders": 1000})], [],
                  scale=ScaleReference(500 * loaded["lineitem"], "db", "the article's table", objects=("lineitem",)))
    scale = run_mod.scale_factor(art)
    assert scale["factor"] == 500.0 and scale["ours_bytes"] == loaded["lineitem"] and scale["what"] == "lineitem"


def test_run_folders_have_no_spaces():
    from dbtier.reproduce.run import folder_name

    assert folder_name("oltp-large-log on flash") == "oltp-large-log-on-flash"


def test_each_figure_needs_only_its_own_runs(monkeypatch, tmp_path):
    """A run that failed, or that the engine cannot make, takes only the figures that need it: the
    others are computed, and each missing one says which run and why."""
    monkeypatch.delenv("DBTIER_CHECK_SCHEMA")  # the fake runs' documents hold only what this test reads
    from dbtier.reproduce.plan import Claim

    ran = []

    def fake_run_spec(spec, base, progress, artifacts, say, cpu_scale=1.0, scale=1.0, engine="postgres"):
        ran.append((spec.key, engine))
        if spec.key == "broken":
            raise RuntimeError("the server went away")
        return {"elapsed_s": {"a": 4.0, "b": 1.0}[spec.key], "server_cpu_s": 0.5, "io_wait_s": 0.1,
                "host_steal_s": 0.0, "top_events": []}

    monkeypatch.setattr(run_mod, "run_spec", fake_run_spec)

    def speedup(r):
        v = r["a"]["elapsed_s"] / r["b"]["elapsed_s"]
        return {"ours": f"{v:.1f}x", "our_value": v, "reason": "measured"}

    claims = [Claim("a over b", "4x", ("a", "b"), speedup, 4.0),
              Claim("needs the broken run", "2x", ("a", "broken"), speedup, 2.0),
              Claim("needs the skipped run", "3x", ("skipped",), speedup, 3.0)]
    art = Article("999", "a test", "none", [RunSpec(k, "random-index") for k in ("a", "b", "broken", "skipped")],
                  claims, engine="mariadb", not_run={"skipped": "InnoDB cannot lay it out"})
    said = []
    doc = run_mod.reproduce([art], run_mod.Base(), tmp_path, lambda _p: contextlib.nullcontext(None), said.append)
    assert ran == [("a", "mariadb"), ("b", "mariadb"), ("broken", "mariadb")]  # the skipped run is not started
    (article,) = doc["articles"]
    assert doc["engines"] == ["mariadb"] and article["engine"] == "mariadb"
    first, second, third = article["figures"]
    assert first["ours"] == "4.0x" and first["agrees"] is True
    assert second["ours"] == "-" and second["reason"] == "broken: failed: RuntimeError: the server went away"
    assert third["ours"] == "-" and third["reason"] == "skipped: InnoDB cannot lay it out"
    assert article["not_run"] == {"skipped": "InnoDB cannot lay it out"}
    assert any("skipped: not run: InnoDB cannot lay it out" in line for line in said)
    assert (tmp_path / "seed999-mariadb" / "a").is_dir()  # an engine other than PostgreSQL has its own folder


def test_an_articles_runs_on_mariadb_are_innodbs():
    """Seed 002's layouts name InnoDB's redo log for PostgreSQL's WAL (InnoDB's dumps go with its
    data); seed 001's index alone on an SSD is not run on InnoDB, with its reason."""
    from dbtier.reproduce import article001, article002

    art = article002.article(quick=True, engine="mariadb")
    places = {spec.key: spec.places for spec in art.runs}
    assert places["oltp-large-log on flash"] == "data=array,log=logflash"
    assert places["oltp-large-all-HDD"] == "data=array,log=logdisk"
    assert not art.not_run
    assert article002.article(quick=True).runs[3].places == "data=array,wal=logdisk,dump=array"
    art = article001.article(quick=True, engine="mariadb")
    assert set(art.not_run) == {"index-on-raid", "index-on-ssd"} and "InnoDB" in art.not_run["index-on-raid"]
    base = run_mod.Base()
    for spec in article002.article(quick=True, engine="mariadb").runs:  # the options as `run` takes them
        run_mod._lab(spec, base, engine="mariadb")
