"""A `real` device: a folder on this machine's own disk, no injected latency. The interposer counts
every call; /proc/diskstats shows what reached the disk; a cold start evicts the files from the
host's page cache, so the first scan reads from the disk and the second from memory."""


import pytest

from dbtier.measure.diskstats import block_device
from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import LabOptions
from dbtier.devices.spec import parse_all
from dbtier.workloads import registry
from dbtier.workloads.base import QuietProgress
from dbtier.experiments.runner import run_workload

ROWS = 2000


def test_real_device_buffered_cold_scan(disk_dir, shm_dir):
    disk = block_device(disk_dir)
    if disk is None:
        pytest.skip(f"{disk_dir} has no block device behind it (no /proc/diskstats figures to compare)")
    result = run_workload(registry.get("table-scan")(rows=ROWS, scans=2), parse_all([f"disk=real:{disk_dir}"]),
                          placement.parse([], ["disk"]),
                          LabOptions(cache_bytes=8 << 20, io_mode="buffered", workspace=shm_dir), QuietProgress(),
                          say=lambda _l: None)
    dev = result["devices"][0]
    table = ROWS * 8192
    # the interposer saw both scans' reads (the host's cache served the second, unseen by the disk)...
    assert dev["counters"]["read_bytes"] >= 2 * table
    assert dev["page_cache"]["hit_pages"] + dev["page_cache"]["miss_pages"] == 0  # no emulated cache on real
    assert dev["lateness"]["count"] > 0 and dev["counters"]["spin_ns"] == 0       # nothing was delayed
    # ...and the disk delivered the table once, after the cold start's eviction (other programs on
    # this machine may add a little)
    ds = dev["diskstats"]
    assert ds["block_device"] == disk
    assert 0.9 * table <= ds["read_bytes"] <= 1.5 * table + (4 << 20)
    assert ds["r/s"] > 0
    # %util may be 0: the kernel adds busy time only when a timer tick (a jiffy, 1-10 ms) passes with a
    # request in flight, and a virtual disk served from its host's cache can deliver the table in less
    assert 0 <= ds["%util"] <= 100
