"""iostat figures and lateness percentiles from counters, hand-computed."""

import pytest

from dbtier.measure import iostat, lateness


def counters(**kw):
    base = dict(reads=0, writes=0, flushes=0, read_bytes=0, write_bytes=0, read_ns=0, write_ns=0, flush_ns=0,
                busy_ns=0, cache_hits=0)
    base.update(kw)
    return base


def test_iostat_definitions():
    # 100 reads of 8 KiB, each 5 ms, back to back over 0.5 s busy in a 1 s interval
    f = iostat.figures(counters(reads=100, read_bytes=100 * 8192, read_ns=100 * 5_000_000, busy_ns=500_000_000), 1.0)
    assert f["r/s"] == 100 and f["r_await"] == pytest.approx(5.0)
    assert f["rMB/s"] == pytest.approx(100 * 8192 / 1048576)
    assert f["svctm"] == pytest.approx(5.0) and f["%util"] == pytest.approx(50.0)
    assert f["aqu-sz"] == pytest.approx(0.5) and f["rareq-sz"] == pytest.approx(8.0)


def test_queueing_shows_in_await_not_svctm():
    # 2 requests issued together on a 5 ms device: busy 10 ms, awaits 5 and 10 ms
    f = iostat.figures(counters(reads=2, read_ns=15_000_000, busy_ns=10_000_000), 0.01)
    assert f["r_await"] == pytest.approx(7.5) and f["svctm"] == pytest.approx(5.0)
    assert f["aqu-sz"] == pytest.approx(1.5) and f["%util"] == pytest.approx(100.0)


def test_lateness_percentiles():
    hist = [[1000, 50], [2000, 45], [50000, 5]]
    assert lateness.percentile(hist, 50) == 1000
    assert lateness.percentile(hist, 95) == 2000
    assert lateness.percentile(hist, 99) == 50000
    assert lateness.percentile([], 50) == 0
