"""`dbtier run`: bad input ends in one clear line and status 2, before any server starts; a small
run writes its run directory (result.json, report.html, server.log) and --json."""

import json
import os

import pytest

from dbtier.report import verdict
from dbtier.report.terminal import fmt
from tests.conftest import dbtier, dbtier_in_terminal


@pytest.mark.parametrize("args, message", [
    (["nosuch-workload", "-d", "a=hdd-sata-7200"], "unknown workload 'nosuch-workload'"),
    (["random-indx", "-d", "a=hdd-sata-7200"], "did you mean random-index"),
    (["random-index"], "give at least one --device"),
    (["random-index", "-d", "a=hdd-sata-72000"], "unknown device profile"),
    (["random-index", "-d", "a"], "expected NAME=PROFILE"),
    (["random-index", "-d", "a=hdd-sata-7200", "-d", "a=ssd-sata-mlc"], "already a device named a"),
    (["random-index", "-d", "a=hdd-sata-7200", "--place", "data=b"], "no device named 'b'"),
    (["random-index", "-d", "a=hdd-sata-7200", "--place", "data"], "expected KEY=DEVICE"),
    (["random-index", "-d", "a=hdd-sata-7200", "--place", "t_attribute_ix=a"], "did you mean t_attribute_idx"),
    (["table-scan", "-d", "a=hdd-sata-7200", "--place", "t_attribute_idx=a"], "has no table, index or materialized view"),
    (["random-index", "-d", "a=hdd-sata-7200", "--set", "io_method=io_uring"], "io_uring would bypass"),
    (["random-index", "-d", "a=hdd-sata-7200", "--rows", "0"], "--rows must be at least 1"),
    (["random-index", "-d", "a=hdd-sata-7200", "--rows", "many"], "not a valid integer"),
    (["random-index", "-d", "a=hdd-sata-7200", "--cache", "huge"], "expected a size"),
    (["random-index", "-d", "a=hdd-sata-7200", "--pg-bin", "/nonexistent"], "not a directory"),
    (["random-index", "-d", "a=hdd-sata-7200", "--pg-bin", "/usr/bin"], "no postgres or initdb there"),
    (["random-index", "-d", "a=hdd-sata-7200:/nonexistent"], "not a directory"),
    (["update-locality", "-d", "a=hdd-sata-7200", "--updates", "-1"], "--updates must be at least 0"),
    (["insert-loop", "-d", "a=hdd-sata-7200", "--cache-state", "hot"], "insert-loop supports cold"),
    (["index-range", "-d", "a=hdd-sata-7200", "--plan", "hash"], "'hash' is not one of"),
    (["random-index", "-d", "a=hdd-sata-7200", "--repeat", "0"], "--repeat 0: from 1 to 50 runs"),
    (["random-index", "-d", "a=hdd-sata-7200", "--repeat", "2", "--keep"], "give --production or --keep to one run"),
])
def test_bad_input_one_line_status_2(args, message, shm_dir, tmp_path):
    proc = dbtier("run", *args, "--workspace", str(shm_dir), "-o", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not list(shm_dir.glob("lab-*"))  # nothing was built
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_small_run_writes_its_run_directory(shm_dir, tmp_path):
    # A table over a quarter of the cache is scanned through a small buffer ring: each scan reads it.
    # In an 80-column terminal.
    rc, shown = dbtier_in_terminal("run", "table-scan", "-d", "ssd=ssd-sata-mlc", "--rows", "600", "--scans", "3",
                                   "--cache", "8MB", "--workspace", str(shm_dir), "-o", str(tmp_path), "--json",
                                   str(tmp_path / "r.json"), "--trace", columns=80)
    assert rc == 0, shown
    assert "run directory:" in shown
    (run,) = tmp_path.glob("table-scan-*")
    doc = json.loads((run / "result.json").read_text())
    assert json.loads((tmp_path / "r.json").read_text()) == {**doc, "run_dir": str(run)}
    assert doc["schema_version"] == 2 and doc["workload"] == "table-scan"
    assert doc["metrics"] == {"scans": 3, "rows_returned": 3, "table_pages": 600}
    dev = doc["devices"][0]
    # Three full scans of 600 pages, read through the device (3 x 4.7 MiB), less what the buffer ring
    # of one scan left cached for the next (under 1 MiB); beside them only catalog pages (under 1 MiB).
    table = next(o for o in doc["object_io"] if o["object"] == "t")
    assert 3 * 600 * 8192 - 2 * (1 << 20) <= table["read_bytes"] <= 3 * 600 * 8192
    assert table["read_bytes"] <= dev["counters"]["read_bytes"] <= table["read_bytes"] + (1 << 20)
    assert 24 < dev["iostat"]["rareq-sz"] <= 128  # the read stream combines pages into reads of up to 128 KiB
    assert doc["lab"]["placement"]["data"] == "ssd" and doc["lab"]["postgres"]["version"].startswith("18")
    html = (run / "report.html").read_text()
    assert "<svg" in html and "table-scan" in html and "http" not in html.split("<svg")[0].lower().replace(
        "http-equiv", "")
    assert "database system is ready to accept connections" in (run / "server.log").read_text()
    assert doc["trace"] == "trace.parquet" and (run / "trace.parquet").stat().st_size > 0
    assert not list(shm_dir.glob("lab-*"))
    # The answer first, in the terminal and the page, its numbers the document's
    lines = verdict.run(doc)
    flat = " ".join(shown.split())
    assert -1 < flat.find(" ".join(" ".join(lines).split())) < flat.find("devices over the measured interval")
    page = html.split("<details")[0]
    assert all(line.replace("'", "&#39;") in page for line in lines), lines
    # 80 columns: no line longer, every device figure in full (or its column named as left out)
    # (the report, from its verdict on: the progress display before it redraws itself with cursor moves,
    # which a capture of the terminal strips and may join)
    report = shown[shown.find(lines[0].split()[0]):]
    assert max(len(line) for line in report.splitlines()) <= 80
    table = shown.split("devices over the measured interval")[1].split("\n\n")[0]
    left_out = table.split("not shown at 80 columns:")[1] if "not shown at 80" in table else ""
    for col in ("r/s", "rMB/s", "r_await", "%util", "svctm"):
        assert f" {fmt(dev['iostat'][col])} " in f" {table} ".replace("\n", " ") or col in left_out, (col, table)


def test_repeat_runs_it_n_times_and_gives_the_median_and_range(shm_dir, tmp_path):
    proc = dbtier("run", "random-index", "--rows", "200", "-d", "d=ram-san", "--repeat", "3", "--workspace",
                  str(shm_dir), "-o", str(tmp_path), "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    (spread,) = doc["spread"]
    assert doc["repeat"]["n"] == 3 and len(doc["repeat"]["runs"][0]) == 3 and spread["runs"] == 3
    assert spread["min"] <= spread["median"] <= spread["max"] and doc["run_dirs"][0] in doc["repeat"]["runs"][0]
    assert len(list(tmp_path.glob("random-index-run-r*"))) == 3
    assert "Over 3 runs: elapsed s" in proc.stdout


def test_own_folder_and_pg_bin(shm_dir, tmp_path, disk_dir):
    """A device on a folder of the user's, the PostgreSQL named by --pg-bin."""
    from dbtier.devices.hostfs import is_ram
    from dbtier.engines.postgres.binaries import embedded_bin_dir

    proc = dbtier("run", "random-index", "--rows", "50", "-d", f"fast=nvme-gen4:{disk_dir}", "--pg-bin",
                  str(embedded_bin_dir()), "--workspace", str(shm_dir), "-o", str(tmp_path), check=True)
    if not is_ram(disk_dir):  # the host's disk is slower than the modelled 51 us: the user is told
        assert "warning: device fast (nvme-gen4) models I/Os" in proc.stdout
    doc = json.loads(next(tmp_path.glob("random-index-*/result.json")).read_text())
    assert doc["lab"]["postgres"]["bin"] == str(embedded_bin_dir())
    assert doc["lab"]["devices"][0]["dir"].startswith(str(disk_dir))
    assert {o["device"] for o in doc["objects"]} == {"fast"}
    assert not list(disk_dir.iterdir())  # the lab's folder inside the user's is gone with the run


def test_keep_leaves_the_workspace_and_the_reaper_respects_it(shm_dir, tmp_path):
    from dbtier.workspace import Workspace

    proc = dbtier("run", "table-scan", "--rows", "50", "--scans", "1", "-d", "ssd=ssd-sata-mlc", "--keep",
                  "--workspace", str(shm_dir), "-o", str(tmp_path), check=True)
    (kept,) = shm_dir.glob("dbtier-*/lab-*")
    assert f"workspace kept: {kept}" in proc.stdout
    assert (kept / "server.log").exists() and list(kept.glob("dev/ssd/pgdata/PG_VERSION"))
    assert Workspace.open(shm_dir).reap() == [] and kept.exists()
    if os.geteuid() == 0:  # its lab's user serves the next lab: nothing kept is that user's any more
        assert [p for p in [kept, *kept.rglob("*")] if p.lstat().st_uid != 0] == []


def test_a_phased_workload_reports_each_phase(shm_dir, tmp_path):
    proc = dbtier("run", "update-locality", "--rows", "5000", "-d", "disk=ram-san", "--workspace", str(shm_dir),
                  "-o", str(tmp_path), check=True)
    for phase in ("a=i", "a=10*i", "a=100*i-j", "all phases", "top wait event"):
        assert phase in proc.stdout
    doc = json.loads(next(tmp_path.glob("update-locality-*/result.json")).read_text())
    assert [ph["phase"] for ph in doc["phases"]] == ["a=i", "a=10*i", "a=100*i-j"]
    assert doc["checks"]["amcheck"] == "clean" and doc["checks"]["rows"] == 5000
    for ph in doc["phases"]:
        assert ph["top_events"] and ph["object_io"] and "pg_stat_io" in ph
    html = next(tmp_path.glob("update-locality-*/report.html")).read_text()
    assert html.count("<svg") >= 4 and "update-locality: a=100*i-j" in html and "I/O by object" in html


def test_scale_model_reaches_the_server_and_the_devices(shm_dir, tmp_path):
    """--scale-model 200: sizes given as the system's (a 6,400 MB cache, a 1 TB disk's seeks and its
    write cache) run at 1/200, and the result and the report say so."""
    proc = dbtier("run", "random-index", "-d", "hdd=hdd-sata-7200", "--rows", "300",
                  "--cache", "6400MB", "--scale-model", "200", "--workspace", str(shm_dir), "-o", str(tmp_path),
                  check=True)
    (run,) = tmp_path.glob("random-index-*")
    doc = json.loads((run / "result.json").read_text())
    lab = doc["lab"]
    assert lab["cache_bytes"] == 32 * 1024 * 1024 and lab["settings"]["shared_buffers"] == "32768kB"
    assert lab["settings"]["work_mem"] == "64kB"  # PostgreSQL's 4MB / 200 is under its minimum
    assert lab["scale_model"]["factor"] == 200
    params = lab["devices"][0]["params"]
    assert params["span_scale"] == 200 and params["capacity_gb"] == 1000
    sizes = {s["what"]: s for s in lab["scale_model"]["sizes"]}
    assert sizes["hdd: write cache"]["run"] == 2.0 and sizes["hdd: write cache"]["floor"]  # 16 MiB / 200: a segment
    assert "data at 1/200 of the system described" in proc.stdout
