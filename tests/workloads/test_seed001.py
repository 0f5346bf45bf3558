"""Seed 001 on a real server at small scale: the census table's shape and skew, the index alone on
its device, every count checked, and what the cache states leave to read."""

import pytest

from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import LabOptions
from dbtier.devices.spec import parse_all
from dbtier.workloads import census, registry
from dbtier.errors import UserError
from dbtier.workloads.base import QuietProgress
from dbtier.experiments.runner import run_workload

ROWS = 40000


def test_pob_shares_follow_the_census():
    shares = census.pob_shares()
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares[12] == pytest.approx(54445 / 2458285) and shares[32] == pytest.approx(4722 / 2458285)
    slots = census.pob_slots()
    assert len(slots) == 100_000 and slots.count(72) == round(100_000 * 10134 / 2458285)
    assert len(census.COLUMNS) == 125 and ("POB", "int") in census.COLUMNS


@pytest.fixture(scope="module")
def index_on_its_own_device(module_shm_dir):
    reqs = parse_all(["disk=ram-san", "ix=ram-san"])
    return run_workload(registry.get("index-range")(rows=ROWS), reqs, placement.parse(["pob_idx=ix"], ["disk", "ix"]),
                        LabOptions(workspace=module_shm_dir), QuietProgress(), say=lambda _l: None)


def test_every_state_counted_and_amcheck_clean(index_on_its_own_device):
    r = index_on_its_own_device
    counts = r["checks"]["rows_per_state"]
    assert r["checks"]["amcheck"] == "clean"
    # The generated skew: each queried state's share within sampling error of the article's.
    for pob, (state, n) in census.QUERIED.items():
        share = n / census.SEED_ROWS
        assert abs(counts[state] - share * ROWS) < 5 * (share * ROWS) ** 0.5 + 5, (state, counts[state])
    by_phase = {ph["phase"]: ph for ph in r["phases"]}
    assert len(by_phase) == 9
    for ph in r["phases"]:
        assert ph["metrics"]["rows"] == counts[ph["metrics"]["state"]]


def test_the_index_is_read_only_from_its_device_and_hot_reads_nothing(index_on_its_own_device):
    for ph in index_on_its_own_device["phases"]:
        io = {(o["object"], o["device"]): o for o in ph["object_io"]}
        assert not [k for k in io if k[0] == "pob_idx" and k[1] != "ix"]
        assert not [k for k in io if k[0] == "census" and k[1] != "disk"]
        reads = sum(o["reads"] for k, o in io.items() if k[0] in ("pob_idx", "census"))
        if ph["phase"].startswith("hot"):
            assert reads == 0, ph["phase"]  # the cold run just read all it needs into the cache
        elif ph["phase"].startswith("cold"):
            assert io[("pob_idx", "ix")]["reads"] >= 2 and io[("census", "disk")]["reads"] > 0


def test_cross_reads_less_than_cold(index_on_its_own_device):
    phases = {ph["phase"]: ph for ph in index_on_its_own_device["phases"]}

    def reads(name):
        return sum(o["reads"] for o in phases[name]["object_io"] if o["object"] in ("pob_idx", "census"))
    # Puerto Rico after Florida: the index's upper levels and the table pages both states share are cached.
    assert reads("cross Florida then Puerto Rico") < reads("cold Puerto Rico")
    assert reads("cross Nevada then Florida") < reads("cold Florida")


def test_an_unknown_plan_is_refused():
    with pytest.raises(UserError, match="choose one of index, bitmap, planner"):
        registry.get("index-range")(rows=100, plan="hash")
