"""`dbtier crash` on a real server at a small size (pgbench scale 1, 2 clients, 1 s): the expected
matrix, each cell over a few cuts of every kind (bench/power_loss.py runs a thousand and more each).

- the defaults on an honest device keep every acknowledged commit and leave no damage;
- synchronous_commit = off loses a suffix of the commits, over less than 3 x wal_writer_delay;
- a device that ignores flushes loses acknowledged commits (fsync = off: test_matrix.py);
- TPC-C (oltp) keeps a ledger and its consistency conditions;
- an fsync failed with EIO: the server PANICs and keeps everything; told to carry on, it loses data;
- full_page_writes = off with torn 4 KiB writes of the tables' pages leaves damage; on, none."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dbtier.crash.run import run_crash, verdict
from dbtier.errors import UserError
from dbtier.experiments.experiment import Experiment
from tests.cli.test_interrupt import leftovers
from tests.conftest import dbtier

PGBENCH = dict(init=True, scale=1, client=2, time=1)


def crash(workspace: Path, device: str, sets=(), cuts: int = 8, kinds=None, fsync_error: bool = False, **kw) -> dict:
    exp = Experiment.from_options("pgbench", device=[device], set=list(sets), **{**PGBENCH, **kw})
    return run_crash(exp, cuts, seed=1, workspace=workspace, fsync_error=fsync_error,
                     **({"kinds": kinds} if kinds else {}))


def test_an_honest_device_with_the_defaults_keeps_every_commit(module_shm_dir):
    r = crash(module_shm_dir, "ssd=ssd-sata-mlc")
    s = r["summary"]
    assert s["lost_commits"] == 0 and s["damaged"] == 0, [x for x in r["states"] if x["lost"] or x["problems"]]
    assert {x["kind"] for x in r["states"]} == {"flush", "random", "torn", "reorder"}
    assert all(x["started"] for x in r["states"])
    # cut 0 recovered on the emulated SATA SSD and timed: PostgreSQL fsyncs every file of the data
    # directory before it replays, a device flush each (seconds), where the host alone takes a tenth of one
    timed = [x["recovery_s"] for x in r["states"] if x["recovery_s"] is not None]
    assert len(timed) == 1 and r["states"][0]["recovery_s"] is not None and 0.5 < timed[0] < 30, timed
    assert sum(x["acknowledged"] for x in r["states"]) > 100, "the cuts fell where commits had been acknowledged"
    assert r["run"]["transactions"] > 100
    assert verdict(r).startswith("0 of 8 cuts lost an acknowledged commit or left damage; recovery took")
    assert verdict(r).endswith("s on the emulated devices (1 timed)")


def test_asynchronous_commit_loses_a_bounded_suffix(module_shm_dir):
    r = crash(module_shm_dir, "ssd=ssd-sata-mlc", ["synchronous_commit=off"], kinds=("random", "flush"))
    lost = [x for x in r["states"] if x["lost"]]
    assert lost, "asynchronous commits are lost at a cut"
    assert all(x["suffix"] for x in lost), "what is lost is the last commits, in commit order"
    assert all(x["lost_span_ms"] <= 3 * 200 for x in lost), [x["lost_span_ms"] for x in lost]
    assert r["summary"]["damaged"] == 0


def test_tpcc_keeps_a_ledger_and_its_consistency_conditions(module_shm_dir):
    """The built-in OLTP (TPC-C) with a ledger row in each transaction that writes: under asynchronous
    commit, a cut loses only the last commits, and every state keeps TPC-C's consistency conditions."""
    exp = Experiment.from_options("oltp", device=["ssd=ssd-sata-mlc"], set=["synchronous_commit=off"], warehouses=1,
                                  items=2000, customers=300, clients=2, duration=2, warmup=0)
    r = run_crash(exp, 4, seed=1, kinds=("random",), workspace=module_shm_dir)
    assert r["run"]["transactions"] > 100, "New-Order, Payment and Delivery are counted"
    lost = [x for x in r["states"] if x["lost"]]
    assert lost and all(x["suffix"] and x["lost_span_ms"] <= 3 * 200 for x in lost), r["states"]
    assert r["summary"]["damaged"] == 0, [x["problems"] for x in r["states"]]


LEDGERED = """\\set aid random(1, 100000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
INSERT INTO my_ledger (client) VALUES (:client_id);
END;
"""


def test_your_own_scripts_name_their_ledger_table(module_shm_dir, tmp_path):
    """pgbench -f with --ledger my_ledger: dbtier makes the table, each transaction writes its row, and
    asynchronous commit is found losing a suffix of them; a script that forgets its row is refused
    after the run, before any cut, with what each transaction must do."""
    script = tmp_path / "mine.sql"
    script.write_text(LEDGERED)
    exp = Experiment.from_options("pgbench", device=["ssd=ssd-sata-mlc"], set=["synchronous_commit=off"], init=True,
                                  file=[str(script)], client=2, time=1)
    r = run_crash(exp, 3, seed=1, kinds=("random",), workspace=module_shm_dir, ledger_table="my_ledger")
    lost = [x for x in r["states"] if x["lost"]]
    assert r["run"]["transactions"] > 100 and lost and all(x["suffix"] for x in lost), r["states"]
    assert r["summary"]["damaged"] == 0
    forgetful = tmp_path / "forgetful.sql"
    forgetful.write_text(LEDGERED.replace("INSERT INTO my_ledger (client) VALUES (:client_id);\n", ""))
    exp = Experiment.from_options("pgbench", device=["ssd=ssd-sata-mlc"], init=True, file=[str(forgetful)], client=2,
                                  time=1)
    with pytest.raises(UserError, match=r"--ledger my_ledger: client \d+ has 0 rows after the run but pgbench "
                                        r"acknowledged [\d,]+ of its transactions; each transaction"):
        run_crash(exp, 3, seed=1, workspace=module_shm_dir, ledger_table="my_ledger")


def test_a_drive_that_ignores_flushes_loses_commits(module_shm_dir):
    """(fsync = off is found losing commits by test_matrix.py.)"""
    r = crash(module_shm_dir, "ssd=ssd-sata-mlc{flush_honoured=0}", kinds=("random",), cuts=4)
    assert r["summary"]["lost_commits"] >= 3, r["states"]
    worst = max(r["states"], key=lambda x: x["lost"] or 0)
    assert worst["lost"] > 100, worst
    # what the drive held and never wrote
    assert any(p["where"] == "in the device cache" and p["file"].split("/")[-2] == "pg_wal"
               for p in worst["pending"]), worst["pending"]


def test_torn_pages_without_full_page_writes_are_found(module_shm_dir):
    # a small cache: the tables' pages are written during the run, and so can be torn. A tear damages
    # a page when it keeps a half the write changed and loses another: about one torn cut in three
    # (3 to 7 of 12 in nine runs, 0 of 12 once in CI), so 30 cuts miss it with odds near 2 in a million
    off = crash(module_shm_dir, "ssd=ssd-sata-mlc", ["full_page_writes=off"], kinds=("torn",), cuts=30, cache="1MB")
    assert off["summary"]["damaged"] >= 1, off["states"]
    on = crash(module_shm_dir, "ssd=ssd-sata-mlc", [], kinds=("torn",), cuts=4, cache="1MB")
    assert on["summary"]["damaged"] == 0 and on["summary"]["lost_commits"] == 0, on["states"]


def test_a_failed_fsync_panics_and_recovers_and_carrying_on_loses_data(module_shm_dir):
    """A checkpoint's fsync of a table's file fails with EIO (its writeback lost, its pages marked
    clean): PostgreSQL 18 PANICs, recovers from the WAL, and no cut after it finds anything. A server
    told to carry on (data_sync_retry = on) completes its next checkpoint over the lost pages: the
    state at the end (cut 0) has lost what the WAL could have restored."""
    r = crash(module_shm_dir, "ssd=ssd-sata-mlc", kinds=("random",), cuts=2, fsync_error=True)
    fault = r["run"]["fsync_error"]
    assert fault["panicked"] and fault["server_said"].startswith("PANIC: could not fsync file"), fault
    assert fault["lost_writes"] + fault["pages"] >= 1 and "/" in fault["file"]
    assert [x["kind"] for x in r["states"]] == ["end", "random"]
    assert all(x["at_ns"] >= fault["at_ns"] for x in r["states"])
    assert r["summary"]["lost_commits"] == 0 and r["summary"]["damaged"] == 0, r["states"]
    assert "the server PANICked and recovered. After it, 0 of 2 cuts lost" in verdict(r)
    on = crash(module_shm_dir, "ssd=ssd-sata-mlc", ["data_sync_retry=on"], kinds=("random",), cuts=1, fsync_error=True)
    fault = on["run"]["fsync_error"]
    assert not fault["panicked"] and fault["server_said"].startswith("ERROR: could not fsync file"), fault
    end = on["states"][0]
    assert end["kind"] == "end" and (end["problems"] or end["lost"]), end
    assert "the server carried on" in verdict(on)


@pytest.mark.parametrize("args, message", [
    (["--cuts", "0"], "--cuts 0: give from 1 to"),
    (["--cuts", "5000000"], "--cuts 5000000: give from 1 to"),
    (["--only", "sideways"], "--only sideways: the kinds of cut are flush, random, torn, reorder"),
    (["--recoveries", "0"], "--recoveries 0: give from 1 to 64 states to recover at once"),
    (["--recoveries", "65"], "--recoveries 65: give from 1 to 64"),
])
def test_bad_cuts_are_one_line(tmp_path, args, message):
    proc = dbtier("crash", "pgbench", "-i", "-T", "1", "-d", "ssd=ssd-sata-mlc", *args, "-o", str(tmp_path))
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("args, message", [
    (["pgbench", "-i", "-T", "1", "-d", "ssd=real:{tmp}"], "cannot be cut"),
    (["random-index", "-d", "ssd=ssd-sata-mlc"], "keeps no ledger of acknowledged commits"),
    (["pgbench", "-T", "1", "-d", "ssd=ssd-sata-mlc"], "its history is the ledger"),
    (["pgbench", "-i", "-T", "1", "-b", "select-only", "-d", "ssd=ssd-sata-mlc"], "its history is the ledger"),
    (["pgbench", "-i", "-T", "1", "--ledger", "t", "-d", "ssd=ssd-sata-mlc"], "give it with pgbench -f FILE only"),
])
def test_what_cannot_be_checked_is_refused(tmp_path, shm_dir, args, message):
    proc = dbtier("crash", *[a.format(tmp=shm_dir) for a in args], "-o", str(tmp_path / "out"))
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_matrix_option_before_a_workload_is_refused(tmp_path):
    proc = dbtier("crash", "--recoveries", "2", "pgbench", "-i", "-T", "1", "-d", "ssd=ssd-sata-mlc", "-o", str(tmp_path))
    assert proc.returncode == 2 and "--recoveries before the workload goes with --matrix" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not list(tmp_path.iterdir())


def test_the_command_line_answers_first_and_keeps_the_result(shm_dir, tmp_path):
    """Three cuts, two states recovered at once after the first (timed, alone): each finding's state
    is the one its fingerprint names, rebuilt by itself in any order."""
    proc = dbtier("crash", "pgbench", "-i", "-c", "2", "-T", "1", "-d", "ssd=ssd-sata-mlc{flush_honoured=0}",
                  "--cuts", "3", "--only", "random", "--recoveries", "2", "--workspace", str(shm_dir),
                  "-o", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    said = next(i for i, ln in enumerate(lines) if ln.startswith("the run: "))  # progress, before the report
    assert lines[said + 1].startswith("3 of 3 cuts lost acknowledged commits"), proc.stdout
    assert "flushes ignored" in proc.stdout
    (run_dir,) = tmp_path.glob("crash-pgbench-*")
    doc = json.loads((run_dir / "result.json").read_text())
    assert doc["kind"] == "crash" and doc["summary"]["lost_commits"] == 3
    assert doc["run"]["recoveries"] == 2 and [x["index"] for x in doc["states"]] == [0, 1, 2]
    # the report: the answer first, the cuts drawn, each finding with the command that rebuilds it
    page = (run_dir / "report.html").read_text()
    assert "3 of 3 cuts lost acknowledged commits" in page and "<svg" in page
    assert f"dbtier crash --rebuild {run_dir} --cut 1" in page
    assert leftovers(shm_dir) == []
    # what was not on the media at the first finding, and the command that builds its state again
    assert "At cut 0, not on the media: " in proc.stdout and "in the device cache" in proc.stdout
    assert f"Rebuild a state: dbtier crash --rebuild {run_dir} --cut 0" in proc.stdout
    for cut in (2, 0, 1):  # any state, bit for bit, in any order
        again = dbtier("crash", "--rebuild", str(run_dir), "--cut", str(cut), "--into", str(tmp_path / f"s{cut}"))
        assert again.returncode == 0 and "the same as the run's" in again.stdout, again.stdout + again.stderr
        assert (tmp_path / f"s{cut}" / "0" / "pgdata" / "PG_VERSION").is_file()
    for args, message in ((["--cut", "3"], "--cut 3: the run made cuts 0 to 2"),
                          ([], "--rebuild RUN_DIR needs --cut K"),
                          (["--cut", "0", "--into", str(tmp_path / "s0")], "exists; give a folder to make")):
        bad = dbtier("crash", "--rebuild", str(run_dir), *args)
        assert bad.returncode == 2 and message in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    bad = dbtier("crash", "--rebuild", str(tmp_path), "--cut", "0")
    assert bad.returncode == 2 and "is not a crash run's directory" in bad.stderr


def test_ctrl_c_leaves_nothing_behind(shm_dir, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "dbtier", "crash", "pgbench", "-i", "-c", "2", "-T", "1", "-d",
                             "ssd=ssd-sata-mlc", "--cuts", "50", "--workspace", str(shm_dir), "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL) and None)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if "cutting the power" in line:
                break
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal does
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, "".join(seen) + (rest or "")
    assert leftovers(shm_dir, out) == []
