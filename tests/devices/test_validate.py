"""`dbtier devices validate`: DiskSim's demerit recomputed, the five drives of its validation suite
replayed through their profiles, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dbtier.devices import profile, validate
from tests.conftest import dbtier

DATA = Path(__file__).resolve().parents[1] / "data" / "disksim"

#: trace, profile, DiskSim's own demerit (valid/runvalid), and ours as the README states it
DRIVES = [
    ("barracuda", "disksim-barracuda", 0.349, 0.521),
    ("cheetah4LP", "disksim-cheetah4lp", 0.318, 0.411),
    ("atlas_III", "disksim-atlas3", 0.378, 0.522),
    ("hp_c2247a", "disksim-hp-c2247a", 0.090, 0.212),
    ("dec_rz26", "disksim-dec-rz26", 0.340, 0.470),
]
#: the one drive whose demerit is still more than twice DiskSim's (README: what it lacks)
NOT_YET_WITHIN_2X = {"hp_c2247a"}


def test_demerit_of_a_distribution_against_itself_is_zero():
    ms = validate.read_trace(DATA / "barracuda.trace").service_ms
    assert validate.demerit(ms, ms) == 0.0


def test_demerit_of_a_shift_is_the_shift():
    """Every service time 1 ms longer moves the curve 1 ms right: the demerit is 1 ms, up to the
    buckets' width (1 us growing 1% a bucket: about 0.1 ms at 10 ms)."""
    ms = validate.read_trace(DATA / "hp_c2247a.trace").service_ms
    assert validate.demerit(ms, ms + 1.0) == pytest.approx(1.0, abs=0.08)


def test_buckets_are_disksims():
    """statdefs "Physical access time": start 0, step 1, grow 1 (%): 0, 1, 2, ... 100, 102, 104, ..."""
    s = validate.bucket_starts()
    assert list(s[:4]) == [0, 1, 2, 3] and s[100] == 100 and s[101] == 102 and len(s) == 1750


@pytest.mark.parametrize("trace, name, disksim, ours", DRIVES)
def test_each_drive_against_its_measurements(trace, name, disksim, ours):
    """The model is deterministic: the figure the README gives is the figure it computes, and it is
    within twice DiskSim's own on every drive but one. Each mean service time is within 6% of the
    drive's measured one (cheetah4LP is 5.8% under; atlas_III was 10% under before its read-ahead
    was bounded by the tracks as its firmware bounds it)."""
    r = validate.validate(profile.load(name), DATA / f"{trace}.trace")
    assert r["demerit_ms"] == pytest.approx(ours, abs=0.0005)
    assert (r["demerit_ms"] <= 2 * disksim) == (trace not in NOT_YET_WITHIN_2X)
    assert r["modelled_mean_ms"] == pytest.approx(r["measured_mean_ms"], rel=0.06)


def test_the_cli_prints_and_writes_json(tmp_path):
    out = tmp_path / "v.json"
    proc = dbtier("devices", "validate", "disksim-cheetah4lp", str(DATA / "cheetah4LP.trace"), "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["requests"] == 10000 and doc["reads"] + doc["writes"] == 10000
    assert f"{doc['demerit_ms']:.3f} ms" in proc.stdout


@pytest.mark.parametrize("args, message", [
    (["ssd-sata-mlc", "{data}/barracuda.trace"], "is not a disk"),
    (["disksim-barracuda", "/etc/hostname"], "not a DiskSim validate line"),
    (["disksim-dec-rz26", "{data}/atlas_III.trace"], "beyond disksim-dec-rz26's"),
    (["disksim-barracuda", "{data}/nosuch.trace"], "cannot read trace"),
    (["nosuch", "{data}/barracuda.trace"], "unknown device profile"),
])
def test_bad_input_is_one_clear_line(args, message):
    proc = dbtier("devices", "validate", *[a.format(data=DATA) for a in args])
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_an_empty_trace_is_refused(tmp_path):
    empty = tmp_path / "empty.trace"
    empty.write_text("\n")
    proc = dbtier("devices", "validate", "disksim-barracuda", str(empty))
    assert proc.returncode == 2 and "holds no requests" in proc.stderr


def test_a_trace_replays_closed_loop():
    """Each request is issued its think time after the previous one completed (DiskSim's validate
    replay): the first at 0, so the last completes after the sum of service and think times."""
    tr = validate.read_trace(DATA / "dec_rz26.trace")
    p = profile.load("disksim-dec-rz26")
    modelled = validate.replay(p, tr)
    issue, done = p.model().closed(tr.ops, tr.blocks * np.uint64(512), (tr.sectors * 512).astype(np.uint32),
                                   np.round(tr.next_us * 1e3), jobs=1)
    assert issue[0] == 0
    assert np.all(issue[1:] == done[:-1] + np.round(tr.next_us[:-1] * 1e3).astype(np.uint64))
    assert np.allclose(modelled, (done - issue) / 1e6)
