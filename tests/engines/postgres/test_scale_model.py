"""The scale model divides every size of a run by one factor, in one place: the database cache, the
page cache, PostgreSQL's memory settings and WAL preallocation, an HDD's write cache and seeks; it
keeps floors where PostgreSQL or a drive needs them, says so, and reaches the server and the device
map of a real run."""

from __future__ import annotations

import pytest

from dbtier.devices.spec import parse_all
from dbtier.errors import UserError
from dbtier.experiments import scale_model
from dbtier.engines.postgres.lab import LabOptions

MB = 1024 * 1024


def _apply(factor, **options):
    requests = parse_all(["disk=hdd-sas-15k-md3000", "flash=pcie-flash-mlc"])
    return scale_model.apply(factor, LabOptions(**options), requests)


def test_factor_one_changes_nothing():
    options, requests, model = _apply(1.0, cache_bytes=64 * MB)
    assert model is None and options.cache_bytes == 64 * MB and options.scale_model is None
    assert requests[0].profile.params["span_scale"] == 1


def test_every_size_divided_by_the_factor():
    options, (disk, flash), model = _apply(100.0, cache_bytes=3200 * MB, page_cache_bytes=6400 * MB,
                                           sets={"work_mem": "400MB", "maintenance_work_mem": "1GB"})
    assert options.cache_bytes == 32 * MB and options.page_cache_bytes == 64 * MB
    assert options.sets["work_mem"] == f"{4 * MB // 1024}kB"
    assert options.sets["maintenance_work_mem"] == f"{1024 * MB // 100 // 1024}kB"
    assert options.sets["effective_cache_size"] == f"{4096 * MB // 100 // 1024}kB"  # PostgreSQL's default 4GB
    assert options.sets["min_wal_size"] == "32768kB"  # 1GB / 100 is under two 16 MB segments: the floor
    p = disk.profile.params
    assert p["capacity_gb"] == 450 and p["span_scale"] == 100  # seeks cross as many cylinders as at full size
    # the controller's 32 MiB per disk: 0.32 MiB would not gather one segment of a stream (1 MiB)
    assert p["write_cache_mib"] == 1.0
    assert p["cache_segments"] == 16 and p["cache_mib"] == 16  # read segments serve streams: kept
    assert flash.profile.params == _apply(1.0)[1][1].profile.params  # flash holds no cache that scales
    account = {s["what"]: s for s in options.scale_model["sizes"]}
    assert options.scale_model["factor"] == 100.0
    assert account["min_wal_size"]["floor"] == "PostgreSQL's minimum"
    assert "floor" not in account["work_mem"] and account["work_mem"]["system"] == 400 * MB
    assert account["disk: seek span (cylinders crossed beyond a segment's reach)"]["run"] == 100


def test_a_write_cache_above_its_floor_is_divided():
    _, (disk, _), _ = _apply(4.0)
    assert disk.profile.params["write_cache_mib"] == 8.0


def test_floors_at_postgresqls_minimums_and_a_drives_segment():
    options, (disk, _), _ = _apply(100000.0, cache_bytes=1024 * MB)
    assert options.cache_bytes == 128 * 1024 and options.sets["work_mem"] == "64kB"
    assert options.sets["maintenance_work_mem"] == "1024kB"
    # 32 MiB / 100,000 would gather no more than a third of a page: a drive gathers a segment (1 MiB)
    assert disk.profile.params["write_cache_mib"] == 1.0


@pytest.mark.parametrize("factor", [0.5, 0.0, -3.0, float("nan"), float("inf"), 1e7])
def test_a_factor_outside_its_range_is_refused(factor):
    with pytest.raises(UserError, match="--scale-model"):
        _apply(factor)


def test_a_bare_number_cannot_be_scaled():
    with pytest.raises(UserError, match="give it with a unit"):
        _apply(10.0, sets={"work_mem": "4096"})
