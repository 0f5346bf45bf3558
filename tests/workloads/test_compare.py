"""`dbtier compare`: one workload on several layouts, its data loaded once and copied into each,
the layouts side by side; interrupted, the finished layouts keep their run directories."""

from __future__ import annotations

import csv
import json
import shutil
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dbtier.errors import UserError
from dbtier.experiments import compare
from dbtier.report.terminal import fmt
from tests.conftest import dbtier, dbtier_in_terminal
from tests.engines.postgres.test_lifecycle import ipc_leftovers, ipc_left_since, postgres_pids, wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "layouts.toml"


def test_the_example_experiment_has_the_four_layouts():
    configs = compare.parse_file(EXAMPLE)
    assert [c.name for c in configs] == ["all-hdd", "log-on-ssd", "indexes-on-ssd", "all-ssd"]
    assert configs[1].placement.roles["wal"] == "ssd" and configs[2].placement.roles["indexes"] == "ssd"


@pytest.fixture(scope="module")
def comparison(module_shm_dir, tmp_path_factory):
    """Random data made once by the setup: if each layout reloaded it, each would draw other rows."""
    folder = tmp_path_factory.mktemp("cmp")
    (folder / "setup.sql").write_text("CREATE TABLE r AS SELECT g AS id, random() AS x FROM generate_series(1, 40000) g;\n"
                                      "CREATE INDEX r_x_idx ON r (x);\n")
    (folder / "run.sql").write_text("SELECT id FROM r WHERE x < 0.3;\nSELECT count(*) FROM r WHERE id % 7 = 0;\n")
    rc, shown = dbtier_in_terminal("compare", "sql", "--setup", str(folder / "setup.sql"), "--run",
                                   str(folder / "run.sql"), "--config", "hdd:d=hdd-sata-7200",
                                   "--config", "split:d=hdd-sata-7200,f=ram-san:data=d,indexes=f",
                                   "--config", "ram:f=ram-san", "--workspace", str(module_shm_dir),
                                   "-o", str(folder / "out"), "--json", str(folder / "c.json"), columns=80)
    assert rc == 0, shown[-2000:]
    return shown, json.loads((folder / "c.json").read_text()), folder / "out"


def test_the_layouts_side_by_side(comparison):
    shown, doc, out = comparison
    assert [c["name"] for c in doc["configurations"]] == ["hdd", "split", "ram"]
    # In an 80-column terminal, from the verdict on (the progress display redraws itself before it):
    # no line longer, every layout's devices with every figure whole.
    report = shown[re.search(r"^(On \w+ this workload ran|No layout beat)", shown, re.M).start():]
    words = " ".join(report.split())  # a header may wrap between its words
    assert "speed-up" in words and "each layout's devices" in words
    assert max(len(line) for line in report.splitlines()) <= 80 and "not shown at 80 columns" not in report
    for layout, result in zip(("hdd", "split", "ram"), doc["results"]):
        for d in result["devices"]:
            io = d["iostat"]
            row = f"{layout} {d['device']} {d['profile']} {fmt(io['%util'])} {fmt(io['r/s'])} {fmt(io['r_await'])}"
            assert row in words, row
    # every read from RAM, against a disk: the devices' own waits (emulated, so the host's load hardly
    # moves them) measured 0.64 against 2.0 ms (the scans' large reads ride a 100 MB/s port on the RAM
    # SAN), and the elapsed time (which a busy host's CPU inflates) shorter
    hdd_wait = doc["results"][0]["devices"][0]["iostat"]["r_await"]
    ram_wait = doc["results"][2]["devices"][0]["iostat"]["r_await"]
    assert ram_wait * 2 < hdd_wait, (ram_wait, hdd_wait)
    assert doc["speedups"][0] == 1.0 and doc["speedups"][2] > 1.2, doc["speedups"]
    (summary,) = out.glob("compare-sql-*")
    assert (summary / "report.html").read_text().count("<svg") >= 2
    assert len(doc["run_dirs"]) == 3 and all((Path(d) / "result.json").exists() for d in doc["run_dirs"])
    for d in doc["run_dirs"]:  # each layout's own page opens with its answer too
        page = (Path(d) / "report.html").read_text()
        assert -1 < page.find('class="verdict"') < page.find("<details")


def test_the_data_was_loaded_once(comparison):
    _, doc, _ = comparison
    rows = [r["metrics"]["statement_times"][0]["rows"] for r in doc["results"]]
    assert len(set(rows)) == 1 and 11000 < rows[0] < 13000  # the same random rows in every layout


def test_each_layout_has_its_own_placement(comparison):
    _, doc, _ = comparison
    where = []
    for d in doc["run_dirs"]:
        result = json.loads((Path(d) / "result.json").read_text())
        where.append({o["object"]: o["device"] for o in result["objects"]})
    assert where == [{"r": "d", "r_x_idx": "d"}, {"r": "d", "r_x_idx": "f"}, {"r": "f", "r_x_idx": "f"}]


def test_ctrl_c_keeps_the_finished_layouts(shm_dir, tmp_path):
    ipc_before = ipc_leftovers()
    # one row a page; the lookups read about 3,000 pages: a moment from RAM, seconds from the disk
    (tmp_path / "setup.sql").write_text("CREATE TABLE t (id int PRIMARY KEY, pad text) WITH (fillfactor = 10);\n"
                                        "INSERT INTO t SELECT g, repeat('x', 700) FROM generate_series(1, 6000) g;\n")
    (tmp_path / "run.sql").write_text("SELECT count(pad) FROM t WHERE id IN "
                                      "(SELECT (1 + random() * 5999)::int FROM generate_series(1, 4000));\n")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "dbtier", "compare", "sql", "--setup", str(tmp_path / "setup.sql"),
                             "--run", str(tmp_path / "run.sql"), "--config", "fast:f=ram-san",
                             "--config", "slow:s=hdd-sata-7200", "--workspace", str(shm_dir), "-o", str(out), "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: list(out.glob("sql-fast-*")), 120, "the first layout's run directory")
        # the second layout's run directory, being built in the workspace
        wait_for(lambda: list(shm_dir.glob("dbtier-*/results-*/sql-slow")), 60, "the second layout to start")
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "kept:" in err or "kept:" in _out
    assert [p.name.split("-2")[0] for p in out.iterdir()] == ["sql-fast"]  # kept; no partial, no summary
    assert (next(out.glob("sql-fast-*")) / "result.json").exists()
    assert postgres_pids(shm_dir) == [] and ipc_left_since(ipc_before) == set()
    assert [p.name for p in shm_dir.glob("dbtier-*/*") if p.name != "runtime"] == []


@pytest.mark.parametrize("args, message", [
    (["--config", "a:d=ram-san"], "at least two configurations"),
    (["--config", "a:d=ram-san", "--config", "a:d=hdd-sata-7200"], "named twice"),
    (["--config", "a", "--config", "b:d=ram-san"], "expected NAME:DEVICES[:PLACEMENT]"),
    (["--config", "a:d=ram-san", "--config", "b:dbtier-seed=ram-san"], "dbtier's own"),
    (["--config", "a:d=ram-san", "--config", "b:d=ram-san:data=x"], "no device named 'x'"),
    (["--experiment", "/nonexistent.toml", "--config", "a:d=ram-san"], "No such file"),
    (["--config", "a:d=ram-san", "--config", "b:d=ram-san", "--repeat", "0"], "--repeat 0: from 1 to 50 runs"),
])
def test_bad_configurations_are_one_line(args, message, shm_dir, tmp_path):
    (tmp_path / "r.sql").write_text("SELECT 1;")
    proc = dbtier("compare", "sql", "--run", str(tmp_path / "r.sql"), *args, "--workspace", str(shm_dir), "-o",
                  str(tmp_path / "o"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert message in proc.stderr
    assert not (tmp_path / "o").exists() and not list(shm_dir.iterdir())


def test_an_experiment_file_is_checked(tmp_path):
    bad = tmp_path / "x.toml"
    for text, message in (("[[config]]\nname = 'a'\ndevice = ['d=ram-san']\n", "did you mean 'devices'"),
                          ("title = 'x'\n", "unknown key 'title'"), ("[[config]\n", "not valid TOML"),
                          ("[[config]]\nname = 'a'\ndevices = 'd=ram-san'\n", "a list of NAME=PROFILE")):
        bad.write_text(text)
        with pytest.raises(UserError, match=message):
            compare.parse_file(bad)


def test_a_workload_of_several_phases(shm_dir, tmp_path):
    """Elapsed summed over the phases; each layout's devices and waits from its longest phase. Each
    layout run twice, in a shuffled order: each is its median run, with the runs' range."""
    (tmp_path / "setup.sql").write_text("CREATE TABLE p AS SELECT g AS id FROM generate_series(1, 20000) g;\n")
    (tmp_path / "run.sql").write_text("-- phase: count\nSELECT count(*) FROM p;\n-- phase: sum\nSELECT sum(id) FROM p;\n")
    proc = dbtier("compare", "sql", "--setup", str(tmp_path / "setup.sql"), "--run", str(tmp_path / "run.sql"),
                  "--config", "hdd:d=hdd-sata-7200", "--config", "ram:f=ram-san", "--workspace", str(shm_dir),
                  "-o", str(tmp_path / "out"), "--json", str(tmp_path / "c.json"), "--repeat", "2")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    rep = doc["repeat"]
    assert rep["n"] == 2 and sorted(map(tuple, rep["order"])) == [("hdd", 1), ("hdd", 2), ("ram", 1), ("ram", 2)]
    assert [len(r) for r in rep["runs"]] == [2, 2] and all((Path(d) / "result.json").exists() for r in rep["runs"]
                                                         for d in r)
    assert doc["run_dirs"][0] in rep["runs"][0] and doc["run_dirs"][1] in rep["runs"][1]  # the median runs
    for s in doc["spread"]:
        assert s["runs"] == 2 and s["min"] <= s["median"] <= s["max"]
    # the RAM SAN beyond the disk's spread (3 to 4 times faster): said so, with the ranges
    assert doc["spread"][1]["within_first"] is False
    assert "beyond the spread of 2 runs each" in " ".join(proc.stdout.split())
    for r in doc["results"]:
        assert r["devices"] and r["elapsed_s"] > 0
    assert "devices and waits of the longest" in " ".join(proc.stdout.split())
    # each phase on each layout, against the first: in the document, the terminal and the page
    assert [row["phase"] for row in doc["phases"]] == ["count", "sum"]
    for row in doc["phases"]:
        hdd, ram = row["layouts"]
        assert hdd["speedup"] == 1.0 and ram["speedup"] == pytest.approx(hdd["elapsed_s"] / ram["elapsed_s"])
    largest = doc["largest_difference"]
    assert largest["layout"] == "ram" and largest["phase"] in ("count", "sum")
    words = " ".join(proc.stdout.split())
    assert "each phase on each layout" in words and f"Where the layouts differ most: phase {largest['phase']}" in words
    (page,) = (tmp_path / "out").glob("compare-sql-*/report.html")
    text = page.read_text()
    assert text.index("each phase's elapsed time") < text.index("elapsed s per layout")  # seconds first


def test_a_pgbench_of_two_scripts_per_script_per_layout(shm_dir, tmp_path):
    """Each script's rate, latency percentiles and speed-up on each layout: in the document, the
    terminal and the DataFrame. Updates wait on the WAL's flush, which the disk makes slow and the RAM
    SAN does not: their mean latency is shorter on the RAM SAN (the speed-up is above 1)."""
    import dbtier as api

    proc = dbtier("compare", "pgbench", "-i", "-s", "1", "-c", "2", "-T", "3", "-b", "select-only@3",
                      "-b", "simple-update@1", "--config", "hdd:d=hdd-sata-7200", "--config", "ram:d=ram-san",
                      "--workspace", str(shm_dir), "-o", str(tmp_path / "out"), "--json", str(tmp_path / "c.json"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    scripts = {row["script"]: row for row in doc["scripts"]}
    assert set(scripts) == {"select-only", "simple-update"}
    update = scripts["simple-update"]["layouts"]
    assert [lay["name"] for lay in update] == ["hdd", "ram"] and update[0]["speedup"] == 1.0
    assert update[1]["speedup"] > 1.5 and update[1]["p99_ms"] < update[0]["p99_ms"]
    assert all(lay["tps"] > 0 and lay["p50_ms"] <= lay["p95_ms"] <= lay["p99_ms"] for lay in update)
    words = " ".join(proc.stdout.split())
    assert "each transaction type on each layout" in words and "simple-update hdd" in words
    frame = api.load(doc["run_dir"]).comparison
    rows = frame[frame["transaction"] == "simple-update"]
    assert list(rows["layout"]) == ["hdd", "ram"] and rows["speedup"].iloc[1] == pytest.approx(update[1]["speedup"])


def test_runs_made_earlier_side_by_side(comparison, tmp_path):
    """compare RUN_DIR RUN_DIR: the runs a comparison made, given back in another order, give the same
    figures with the other run as the baseline; a run of another workload is refused in one line."""
    _, doc, _ = comparison
    hdd, ram = doc["run_dirs"][0], doc["run_dirs"][2]
    proc = dbtier("--csv", str(tmp_path / "tables"), "compare", ram, hdd, "-o", str(tmp_path), "--json",
                  str(tmp_path / "c.json"))
    assert proc.returncode == 0, proc.stderr
    again = json.loads((tmp_path / "c.json").read_text())
    # every table printed, whole, as CSV, in the order shown
    files = sorted(p.name for p in (tmp_path / "tables").iterdir())
    assert files[0].startswith("01-sql-on-2-layouts") and any("each-layout-s-devices" in f for f in files)
    with open(tmp_path / "tables" / files[0], newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0][:2] == ["configuration", "elapsed s"] and [r[0] for r in rows[1:]] == ["ram", "hdd"]
    assert [c["name"] for c in again["configurations"]] == ["ram", "hdd"] and again["earlier"] is True
    assert again["speedups"][1] == pytest.approx(1 / doc["speedups"][2])
    assert "Runs made earlier, each on its own data" in proc.stdout and "They differ" not in proc.stdout
    bad = dbtier("compare", hdd, str(Path(doc["run_dir"])), "-o", str(tmp_path / "no"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "compare puts run directories" in bad.stderr
    assert not (tmp_path / "no").exists()
    other = tmp_path / "oltp-run"  # a run of another workload
    shutil.copytree(hdd, other)
    result = json.loads((other / "result.json").read_text())
    (other / "result.json").write_text(json.dumps({**result, "workload": "oltp"}))
    bad = dbtier("compare", hdd, str(other), "-o", str(tmp_path / "no"))
    assert bad.returncode == 2 and "is a run of oltp" in bad.stderr and "compare runs of one workload" in bad.stderr
    assert not (tmp_path / "no").exists()
