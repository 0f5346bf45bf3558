"""Emulation fidelity: the standard QD1 patterns run live through the interposer, per profile,
land on the figures `dbtier devices show` expects.

The statistic is the median: the driver is Python on a shared 2-core machine, and its scheduling
hiccups (outside the emulated call) put a tail on the mean that says nothing about the device.
Tolerances: flash and RAM devices are deterministic, so the live median may exceed the model's only
by the driver's own per-call overhead: 2% + 4 us. HDD random patterns add rotational variance
(uniform over one rotation, 8.3 ms at 7200 rpm): with 300 samples the median's standard error is
~3%, so 12% is four standard errors. The interposer's own lateness (measured inside the call) must
stay at a few microseconds; the host's own call may outrun the model on at most 3% of requests
(NVMe's 13 us writes meet the host's memory management now and then; the data file's pages are
allocated up front). A failure while the hypervisor stole CPU time, or while the host's own calls
outlasted the model on more than 3% of requests, is retried: that is the host's noise, measured,
whatever the emulation does."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from dbtier.devices import patterns, profile
from dbtier.devices.session import run_on_device
from dbtier.measure import lateness
from tests.conftest import retry_while_host_steals

PROFILES = ["hdd-sata-7200", "hdd-sas-15k", "ssd-sata-mlc", "pcie-flash-mlc", "pcie-flash-slc", "ram-san", "nvme-gen4"]


def run_live(prof, pattern, count, data_file: Path) -> tuple[np.ndarray, dict]:
    """Runs the pattern through a fresh emulated device; returns latencies and the device counters."""
    warm = patterns.warmup_count(prof, pattern)
    cmd = [sys.executable, "-m", "dbtier.devices.ioload", str(data_file),
           "--op", "read" if pattern.op == 1 else "write", "--block", str(pattern.block),
           "--span", str(pattern.span), "--count", str(count), "--warmup", str(warm), "--seed", str(pattern.seed)]
    if pattern.random:
        cmd.append("--random")
    out, dev = run_on_device(prof, data_file.parent, cmd)
    return np.array(json.loads(out)["latency_ns"]), dev


@pytest.mark.parametrize("name", PROFILES)
@pytest.mark.parametrize("pattern", patterns.STANDARD, ids=lambda p: p.name.replace(" ", "-"))
def test_live_matches_model(name, pattern, gib_file):
    prof = profile.load(name)
    hdd_random = prof.kind == "hdd" and pattern.random
    count = 300 if hdd_random else 1500
    expect = patterns.expected(prof, pattern, count)  # the very requests the live run issues

    def check(run):
        lat, dev = run
        live_us = float(np.median(lat)) / 1e3
        late = lateness.summary(dev)
        if hdd_random:
            assert live_us == pytest.approx(expect.p50_us, rel=0.12), (name, pattern.name, live_us, expect.p50_us, late)
        else:
            assert expect.p50_us * 0.98 <= live_us <= expect.p50_us * 1.02 + 4, (name, pattern.name, live_us,
                                                                                 expect.p50_us, late)
        # The interposer saw every request, returned on time, and the host rarely outran the model.
        ops = dev["reads"] if pattern.op == 1 else dev["writes"]
        assert ops == count + patterns.warmup_count(prof, pattern)
        assert late["p50_us"] < 2.0, late
        assert dev["overruns"] <= 0.03 * ops

    def host_slow(run):
        """The host's own measurements of this attempt: its calls outlasting the model, or the emulation's
        waits waking late (most calls returned 2 us or more past their modelled completion: the wait
        is this host's, the model's time was kept)."""
        _lat, dev = run
        ops = dev["reads"] if pattern.op == 1 else dev["writes"]
        if dev["overruns"] > 0.03 * ops:
            return f"the host's own call outlasted the model on {dev['overruns']} of {ops} requests"
        late = lateness.summary(dev)
        if late["p50_us"] >= 2.0:
            return f"the emulation's waits woke late on this host (p50 {late['p50_us']:.1f} us past the model)"
        return None

    retry_while_host_steals(lambda: run_live(prof, pattern, count, gib_file), check, host_slow=host_slow)
