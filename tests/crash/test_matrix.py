"""`dbtier crash --matrix FILE`: several configurations, each a crash run, in one table with what each
expected and whether it held; the shipped matrix file is valid; every bad file is one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dbtier.crash import matrix
from tests.cli.test_interrupt import leftovers
from tests.conftest import dbtier

ROOT = Path(__file__).resolve().parents[2]

TWO_CELLS = '''
workload = "pgbench"
init = true
scale = 1
client = 2
time = 1
only = ["random"]

[[cell]]
name = "defaults"
device = ["ssd=ssd-sata-mlc"]
cuts = 2
expect = "safe"

[[cell]]
name = "fsync=off, expected safe"
device = ["ssd=ssd-sata-mlc"]
set = { fsync = "off" }
cuts = 4
expect = "safe"
'''


def test_a_matrix_says_which_configurations_held(shm_dir, tmp_path):
    """Two cells: the defaults hold (safe); fsync = off, wrongly expected safe, loses commits at every
    cut, so the table says NO and the command exits 1, as a failed test would."""
    path = tmp_path / "m.toml"
    path.write_text(TWO_CELLS)
    proc = dbtier("crash", "--matrix", str(path), "--workspace", str(shm_dir), "-o", str(tmp_path / "out"),
                  "--json", str(tmp_path / "m.json"))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    said = max(i for i, ln in enumerate(lines) if ln.startswith("the run: "))
    assert lines[said + 1] == "1 of 2 configurations did not hold what they expected: fsync=off, expected safe"
    assert "fsync=off, expected safe: 4 of 4 cuts lost acknowledged commits" in proc.stdout
    doc = json.loads((tmp_path / "m.json").read_text())
    (run_dir,) = (tmp_path / "out").glob("crash-matrix-*")
    assert doc["run_dir"] == str(run_dir) and json.loads((run_dir / "matrix.json").read_text())["cells"] == doc["cells"]
    safe, off = doc["cells"]
    assert safe["held"] is True and safe["lost"] == 0 and safe["damaged"] == 0
    assert off["held"] is False and off["lost"] == 4 and off["first_loss"] == 0
    result = json.loads((run_dir / off["folder"] / "result.json").read_text())
    assert result["settings"]["fsync"] == "off" and max(x["lost"] for x in result["states"]) > 100
    assert (run_dir / off["folder"] / "material").is_dir(), "a cell that found something keeps its material"
    assert not (run_dir / safe["folder"] / "material").exists()
    page = (run_dir / "report.html").read_text()
    assert "1 of 2 configurations did not hold what they expected" in page and off["folder"] in page
    cell_page = (run_dir / off["folder"] / "report.html").read_text()
    assert f"dbtier crash --rebuild {run_dir / off['folder']} --cut 3" in cell_page
    assert leftovers(shm_dir) == []


def test_the_shipped_matrix_is_the_issues_and_loads():
    cells = matrix.load(ROOT / "examples" / "power-loss.toml")
    assert len(cells) == 19 and len({c.name for c in cells}) == 19
    assert {c.expect for c in cells} == set(matrix.EXPECTATIONS)
    assert sum(c.fsync_error for c in cells) == 2
    assert all(c.cuts == 100 for c in cells) and all(c.cuts == 7 for c in matrix.load(ROOT / "examples" / "power-loss.toml", cuts=7))


@pytest.mark.parametrize("text, message", [
    (None, "no such file"),
    ("workload = ", "not valid TOML"),
    ('workload = "pgbench"\n', "give each configuration as a [[cell]] table"),
    ('workload = "pgbench"\ninit = true\n[[cell]]\ndevice = ["s=ssd-sata-mlc"]\nexpect = "fine"\n',
     "expect = 'fine'; give one of safe, suffix, lost, damage"),
    ('workload = "pgbench"\ninit = true\n[[cell]]\nname = "a"\ndevice = ["s=ssd-sata-mlc"]\n[[cell]]\nname = "a"\n'
     'device = ["s=ssd-sata-mlc"]\n', "two cells are named 'a'"),
    ('workload = "random-index"\n[[cell]]\ndevice = ["s=ssd-sata-mlc"]\n', "keeps no ledger of acknowledged commits"),
    ('workload = "pgbench"\ninit = true\n[[cell]]\ndevice = ["s=ssd-sata-mlc"]\ncuts = 0\n', "--cuts 0: give from 1 to"),
    ('workload = "pgbench"\ninit = true\n[[cell]]\ndevice = ["s=ssd-sata-mlc"]\nonly = ["sideways"]\n',
     "--only sideways: the kinds of cut are"),
    ('workload = "pgbench"\ninit = true\n[[cell]]\ndevice = ["s=ssd-sata-mlc"]\nfsync-error = "yes"\n',
     "fsync-error = 'yes'; give true or false"),
    ('workload = "pgbench"\ninit = true\n[[cell]]\ndevice = ["s=nosuchprofile"]\n', "cell 'cell 1'"),
], ids=["missing", "not-toml", "no-cells", "bad-expect", "same-name", "no-ledger", "no-cuts", "bad-kind",
        "bad-flag", "bad-device"])
def test_a_bad_matrix_is_one_line(tmp_path, text, message):
    path = tmp_path / "m.toml"
    if text is not None:
        path.write_text(text)
    proc = dbtier("crash", "--matrix", str(path), "-o", str(tmp_path / "out"))
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_matrix_goes_alone(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(TWO_CELLS)
    proc = dbtier("crash", "--matrix", str(path), "pgbench", "-i", "-d", "s=ssd-sata-mlc")
    assert proc.returncode == 2 and "give it alone" in proc.stderr


def test_a_safe_cell_that_left_written_data_off_the_media_did_not_hold():
    """A failed fsync's dropped pages that no cut's check found (a table no condition reads) are still
    lost: what the server wrote before the failure and the media lacked at the end."""
    clean = {"lost_commits": 0, "damaged": 0, "first_loss": None, "first_damage": None}
    result = {"summary": clean, "states": [], "run": {"fsync_error": {"never_written_bytes": 0}}}
    assert matrix.held("safe", result) is True
    result["run"]["fsync_error"]["never_written_bytes"] = 16384
    assert matrix.held("safe", result) is False
    assert matrix.held("safe", {"summary": clean, "states": [], "run": {}}) is True  # no fault injected
