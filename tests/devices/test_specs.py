"""A run's state is built from device specs, structs the library describes (no text crosses the
border): what the library would not take is refused with one line, before anything is written, and
what it takes is what the state holds."""

from __future__ import annotations

import math

import pytest

from dbtier.devices import native
from dbtier.devices.pagecache import PageCache
from dbtier.errors import UserError

HDD = native.param_table()["hdd"]["params"]


def _create(tmp_path, devices, page_cache=None):
    native.create_state(tmp_path / "state", devices, page_cache)
    return native.dump_state(tmp_path / "state")


def test_what_the_spec_says_is_what_the_state_holds(tmp_path):
    state = _create(tmp_path, [("disk", "hdd", "/data/disk/", {"rpm": 15000.0, "seek_a_ms": -1.5}),
                               ("mem", "ram", "/data/mem", {})],
                    PageCache(1 << 20, readahead_kb=64, dirty_background_pct=5, dirty_pct=30, dsync_data=True))
    disk, mem = state["devices"]
    assert (disk["name"], disk["kind"], disk["dir"]) == ("disk", "hdd", "/data/disk")
    assert disk["params"]["rpm"] == 15000.0 and disk["params"]["seek_a_ms"] == -1.5
    # what the profile does not give is the option table's default, in the table's order
    assert list(disk["params"]) == [p["name"] for p in HDD]
    assert disk["params"]["cylinders"] == next(p["default"] for p in HDD if p["name"] == "cylinders")
    assert mem["kind"] == "ram"
    assert state["page_cache"]["bytes"] == 1 << 20 and state["page_cache"]["dsync_data"] == 1


@pytest.mark.parametrize("devices, page_cache, want", [
    ([("d", "hdd", "/d", {"rpm": -7200.0})], None, "rpm = -7200: it cannot be negative"),
    ([("d", "hdd", "/d", {"cache_mib": -0.0})], None, "cannot be negative"),
    ([("d", "hdd", "/d", {"rpm": math.nan})], None, "not a number"),
    ([("d", "hdd", "/d", {"rpm": math.inf})], None, "not a number"),
    ([("d", "hdd", "/d", {"rpm": 99999.0})], None, "outside 3600..20000"),
    ([("d", "hdd", "/d", {"channels": 4.0})], None, "hdd devices have no parameter 'channels'"),
    ([("d", "tape", "/d", {})], None, "unknown device kind 'tape'"),
    ([("d\x1b[31m", "ram", "/d", {})], None, "control character in its name"),
    ([("d", "ram", "/d\x7f", {})], None, "control character in its directory"),
    ([("d\x00x", "ram", "/d", {})], None, "after its end"),
    ([("n" * 64, "ram", "/d", {})], None, "name is longer than 63 bytes"),
    ([("n" * 300, "ram", "/d", {})], None, "name is longer than 63 bytes"),
    ([("d", "ram", "/" * 1024, {})], None, "directory is longer than 1023 bytes"),
    ([("", "ram", "/d", {})], None, "no name"),
    ([("d", "ram", "d", {})], None, "is not absolute"),
    ([("d", "ram", "/d", {})] * 17, None, "at most 16"),
    ([("d", "ram", "/d", {})], PageCache(-1), "the page cache's size must be a whole number from 0"),
    ([("d", "ram", "/d", {})], PageCache(1 << 64), "the page cache's size must be a whole number"),
    ([("d", "ram", "/d", {})], PageCache(1 << 20, readahead_kb=-128), "readahead_kb must be a whole number"),
    ([("d", "ram", "/d", {})], PageCache(1 << 20, readahead_kb=2), "readahead_kb 2 is outside 4..65536"),
    ([("d", "ram", "/d", {})], PageCache(1 << 20, dirty_pct=0), "dirty_pct 0 is outside 1..100"),
    ([("d", "ram", "/d", {})], PageCache(1 << 20, dirty_background_pct=1.5), "whole number"),
])
def test_refused_in_one_line_and_nothing_written(tmp_path, devices, page_cache, want):
    with pytest.raises(UserError) as exc:
        native.create_state(tmp_path / "state", devices, page_cache)
    assert want in str(exc.value) and "\n" not in str(exc.value)
    assert list(tmp_path.iterdir()) == []


def test_a_model_takes_the_same_specs():
    model = native.Model("ram", {"latency_us": 100.0})
    start, done = model.submit(0, native.OP_READ, 0, 4096)
    assert start == 0 and done > 100_000
    for params, want in (({"latency_us": -1.0}, "cannot be negative"), ({"latency_us": math.nan}, "not a number"),
                         ({"rpm": 7200.0}, "ram devices have no parameter 'rpm'")):
        with pytest.raises(UserError, match=want):
            native.Model("ram", params)
