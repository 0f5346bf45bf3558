"""dbtier sweep: a sweep file expands into experiments (layouts crossed with axes), every bad input is
one line with nothing started, and a real sweep records every run in its ledger and resumes from it,
running only what has no finished run."""

import json
import shutil

import pytest

from dbtier.errors import UserError
from dbtier.experiments import sweep
from tests.conftest import dbtier

SWEEP = """workload = "random-index"
[options]
rows = 200
[[layout]]
name = "ram"
device = ["d=ram-san"]
[[layout]]
name = "ssd"
device = ["d=ssd-sata-mlc"]
[axes]
cache = ["16MB", "32MB"]
"""


def test_layouts_cross_the_axes(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(SWEEP + 'io-mode = ["direct", "buffered"]\n')
    points = sweep.expand(path)
    assert len(points) == 8 and len({p.key for p in points}) == 8
    assert points[0].name == "layout=ram cache=16MB io-mode=direct"
    assert points[-1].experiment.devices[0].profile.name == "ssd-sata-mlc"
    assert {p.experiment.cache_bytes for p in points} == {16 << 20, 32 << 20}
    # the order of the runs: shuffled with the seed, the same on a resume, less what is done
    order = sweep.plan(points, 2, 7, {})
    assert len(order) == 16 and order == sweep.plan(points, 2, 7, {})
    done = {order[0][0].key: [{"run": order[0][1]}]}
    assert sweep.plan(points, 2, 7, done) == order[1:]


@pytest.mark.parametrize("body, message", [
    (SWEEP + 'cahce = ["1MB"]\n', "unknown option 'cahce'; did you mean 'cache'?"),
    (SWEEP + "rows = []\n", "axis rows has no values"),
    (SWEEP + "rows = 5\n", "axis rows: give its values as a list"),
    (SWEEP.replace("[axes]", "[axis]"), "unknown key 'axis'; did you mean 'axes'?"),
    (SWEEP + 'cpu-scale = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, '
             '24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, '
             '49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, '
             '74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, '
             '99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, '
             '119, 120, 121, 122, 123, 124, 125, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 138, '
             '139, 140, 141, 142, 143, 144, 145, 146, 147, 148, 149, 150, 151, 152, 153, 154, 155, 156, 157, 158, '
             '159, 160, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 173, 174, 175, 176, 177, 178, '
             '179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 197, 198, '
             '199, 200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, '
             '219, 220, 221, 222, 223, 224, 225, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, '
             '239, 240, 241, 242, 243, 244, 245, 246, 247, 248, 249, 250, 251]\n', "more than --max-runs 1,000"),
    (SWEEP + 'cpu-scale = [1, 1.0]\n', "two points make the same experiment"),
    (SWEEP.replace("rows = 200\n", "") + 'rows = [0]\n', "--rows must be at least 1"),
    (SWEEP + 'rows = [5]\n', "rows is both an option and an axis"),
    (SWEEP + 'device = ["d=ram-san"]\n', "devices and placement come from the [[layout]] tables"),
    ("workload = 3\n", "give the workload"),
    ("not toml [", "not valid TOML"),
])
def test_a_bad_sweep_is_one_line_and_starts_nothing(tmp_path, body, message):
    path = tmp_path / "s.toml"
    path.write_text(body)
    with pytest.raises(UserError) as err:
        sweep.expand(path)
    assert message in str(err.value) and "\n" not in str(err.value)
    proc = dbtier("sweep", str(path), "-o", str(tmp_path / "out"))
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_sweep_runs_each_point_records_it_and_resumes(shm_dir, tmp_path):
    """Two layouts x two caches, each twice: eight runs in the ledger, each point's median and range.
    One finished run taken out of the ledger (a driver killed before it wrote it): --resume runs that
    run alone, as its second attempt, and the result holds every point again."""
    path = tmp_path / "s.toml"
    path.write_text(SWEEP)
    proc = dbtier("sweep", str(path), "--repeat", "2", "-o", str(tmp_path / "out"), "--workspace", str(shm_dir),
                  "--json", str(tmp_path / "s.json"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    folder = tmp_path / "out" / doc["sweep_dir"].rsplit("/", 1)[1]
    assert [p["runs"] for p in doc["points"]] == [2, 2, 2, 2]
    for p in doc["points"]:
        assert p["min"] <= p["median"] <= p["max"] and all((folder / d / "result.json").exists() for d in p["run_dirs"])
    records = [json.loads(line) for line in (folder / "ledger.jsonl").read_text().splitlines()]
    assert [r["event"] for r in records].count("done") == 8 and [r["event"] for r in records].count("started") == 8
    # the driver "killed" after one run and before its record: the record and the run directory gone
    lost = next(r for r in records if r["event"] == "done")
    kept = [r for r in records if r is not lost]
    (folder / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    shutil.rmtree(folder / lost["run_dir"])
    again = dbtier("sweep", "--resume", str(folder), "--workspace", str(shm_dir))
    assert again.returncode == 0, again.stderr
    assert "7 done, 1 to run" in again.stdout
    records = [json.loads(line) for line in (folder / "ledger.jsonl").read_text().splitlines()]
    redo = [r for r in records if r["key"] == lost["key"] and r["run"] == lost["run"]]
    assert [r["attempt"] for r in redo if r["event"] == "done"] == [2]
    result = json.loads((folder / "result.json").read_text())
    assert [p["runs"] for p in result["points"]] == [2, 2, 2, 2]
    # nothing left to run: a resume says so and runs nothing
    done = dbtier("sweep", "--resume", str(folder), "--workspace", str(shm_dir))
    assert done.returncode == 0 and "8 done, 0 to run" in done.stdout


def test_a_sweep_killed_mid_run_resumes_with_the_rest(shm_dir, tmp_path):
    """A real kill (SIGKILL to the sweep's process group) once a run has finished: the next command reaps
    what the killed run left, and --resume runs only the runs without a finished record, the one killed
    mid-run as its next attempt."""
    import os
    import signal
    import subprocess
    import sys

    from tests.engines.postgres.test_lifecycle import postgres_pids, wait_for

    path = tmp_path / "s.toml"
    path.write_text(SWEEP.replace("rows = 200", "rows = 1500"))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "dbtier", "sweep", str(path), "-o", str(out), "-q",
                             "--workspace", str(shm_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)

    def ledger() -> list[dict]:
        found = list(out.glob("sweep-*/ledger.jsonl"))
        return [json.loads(line) for line in found[0].read_text().splitlines() if line.endswith("}")] if found else []

    try:
        wait_for(lambda: proc.poll() is not None or sum(r["event"] == "started" for r in ledger()) >= 2, 120,
                 "the sweep's second run")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    (folder,) = out.glob("sweep-*")
    before = ledger()
    finished = {(r["key"], r["run"]) for r in before if r["event"] == "done"}
    assert len(finished) == 1 and proc.returncode == -signal.SIGKILL
    again = dbtier("sweep", "--resume", str(folder), "--workspace", str(shm_dir))
    assert again.returncode == 0, again.stderr
    after = ledger()[len(before):]
    assert not {(r["key"], r["run"]) for r in after if r["event"] == "started"} & finished
    killed = next(r for r in before if r["event"] == "started" and (r["key"], r["run"]) not in finished)
    assert [r["attempt"] for r in after if r["key"] == killed["key"] and r["event"] == "done"] == [2]
    assert [p["runs"] for p in json.loads((folder / "result.json").read_text())["points"]] == [1, 1, 1, 1]
    assert not postgres_pids(shm_dir) and not list(shm_dir.glob("dbtier-*/lab-*"))


@pytest.mark.parametrize("args, message", [
    ([], "give a sweep file, or --resume DIR"),
    (["{file}", "--resume", "{tmp}"], "give a sweep file, or --resume DIR"),
    (["--resume", "{tmp}"], "not a sweep's folder"),
    (["{file}", "--max-runs", "0"], "--max-runs 0: at least 1"),
    (["{file}", "--repeat", "0"], "--repeat 0: from 1 to 50"),
    (["{file}", "--max-runs", "3"], "4 experiments x 1 runs is 4, more than --max-runs 3"),
])
def test_bad_command_lines_are_one_line(tmp_path, args, message):
    (tmp_path / "s.toml").write_text(SWEEP)
    args = [a.replace("{file}", str(tmp_path / "s.toml")).replace("{tmp}", str(tmp_path)) for a in args]
    proc = dbtier("sweep", *args, "-o", str(tmp_path / "out"))
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "out").exists()
