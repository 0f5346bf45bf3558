"""`dbtier crash` on a real server at a small size (pgbench scale 1, 2 clients, 1 s): what a layout or a
setting loses, each over a few cuts (bench/power_loss.py runs a thousand and more each), and bad input.
Nothing here is timed (test_crash.py has what is), so it runs beside other modules.

- your own pgbench scripts keep a ledger with --ledger TABLE;
- a device that ignores flushes loses acknowledged commits (fsync = off: test_matrix.py);
- full_page_writes = off with torn 4 KiB writes of the tables' pages leaves damage, the page named told
  as the torn copy of a write; on, no damage;
- an fsync failed with EIO: the server PANICs and keeps everything; told to carry on, it loses data."""

from __future__ import annotations

import pytest

from dbtier.crash.run import run_crash, verdict
from dbtier.errors import UserError
from dbtier.experiments.experiment import Experiment
from dbtier.report import crashview
from tests.conftest import dbtier
from tests.crash.test_crash import crash


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
    # a page pg_checksums or the server names has its story told: the cut tore the write that carried it
    told = [x["page"] for x in off["states"] if x.get("page")]
    assert told and all(p["torn"] and "a torn copy of the write sent" in p["text"] for p in told), \
        [(x["problems"], x.get("page")) for x in off["states"] if x["problems"]]
    on = crash(module_shm_dir, "ssd=ssd-sata-mlc", [], kinds=("torn",), cuts=4, cache="1MB")
    assert on["summary"]["damaged"] == 0 and on["summary"]["lost_commits"] == 0, on["states"]


def test_a_failed_fsync_panics_and_recovers_and_carrying_on_loses_data(module_shm_dir):
    """A checkpoint's fsync of a table's file fails with EIO (its writeback lost, its pages marked
    clean), the data files buffered as PostgreSQL writes them in production: PostgreSQL 18 PANICs,
    recovers from the WAL, and no cut after it finds anything. A server told to carry on
    (data_sync_retry = on) completes its next checkpoint over the lost pages: the state at the end
    (cut 0) has lost what the WAL could have restored."""
    r = crash(module_shm_dir, "ssd=ssd-sata-mlc", kinds=("random",), cuts=2, fsync_error=True, io_mode="buffered")
    fault = r["run"]["fsync_error"]
    assert fault["panicked"] and fault["server_said"].startswith("PANIC: could not fsync file"), fault
    assert "/" in fault["file"] and fault["never_written_bytes"] == 0, fault  # recovery wrote its pages again
    assert [x["kind"] for x in r["states"]] == ["end", "random"]
    assert all(x["at_ns"] >= fault["at_ns"] for x in r["states"])
    assert r["summary"]["lost_commits"] == 0 and r["summary"]["damaged"] == 0, r["states"]
    assert "the server PANICked and recovered; at the end the media held all it had written" in verdict(r)
    on = crash(module_shm_dir, "ssd=ssd-sata-mlc", ["data_sync_retry=on"], kinds=("random",), cuts=1, fsync_error=True,
               io_mode="buffered")
    fault = on["run"]["fsync_error"]
    assert not fault["panicked"] and fault["server_said"].startswith("ERROR: could not fsync file"), fault
    end = on["states"][0]
    assert end["kind"] == "end" and (end["problems"] or end["lost"]), end
    assert fault["never_written_bytes"] > 0, fault  # what the lost pages held, on no media at the end
    assert "the server carried on" in verdict(on)
    page = " ".join(t for section in crashview.sections(on, "run") for t in section.text)
    assert f"At the end {fault['never_written_bytes'] / 1024:,.0f} KiB of what the server had written" in page


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
