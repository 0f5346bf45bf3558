"""`dbtier crash` on a real server at a small size (pgbench scale 1, 2 clients, 1 s): what is timed
(a recovery's time on the emulated devices, the span of what asynchronous commit loses), the command
line's report and rebuilds, and Ctrl-C. The findings that time nothing are in test_crash_findings.py.

- the defaults on an honest device keep every acknowledged commit and leave no damage;
- synchronous_commit = off loses a suffix of the commits, over less than 3 x wal_writer_delay;
- TPC-C (oltp) keeps a ledger and its consistency conditions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dbtier.crash.run import run_crash, verdict
from dbtier.experiments.experiment import Experiment
from tests.cli.test_interrupt import leftovers, processes_naming
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


WORKLOADS = {"postgres": ["pgbench", "-i", "-c", "2", "-T", "1"],
             "mariadb": ["oltp", "--engine", "mariadb", "--items", "2000", "--customers", "300", "--clients", "2",
                         "--duration", "1", "--warmup", "0"]}


@pytest.mark.parametrize("engine", WORKLOADS)
def test_ctrl_c_leaves_nothing_behind(shm_dir, tmp_path, engine):
    """Interrupted as it cuts: the recovering servers stopped, the states, the base image and (MariaDB's,
    as root) the lab's own tmpfs gone."""
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "dbtier", "crash", *WORKLOADS[engine], "-d",
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
    assert processes_naming(str(shm_dir)) == [], "no server of any engine left running"
    assert str(shm_dir) not in Path("/proc/self/mounts").read_text(), "no mount left"
