"""The device model alone, in simulated time: iobench's loop (the same patterns and seeds as the
workers) submitted straight to the C model, with no files, page cache or interposer. Any --runtime
takes moments, so a cloud volume's burst credits can be watched running out."""

from __future__ import annotations

import numpy as np

from dbtier.devices import native
from dbtier.devices.bench.jobs import Figures, Job
from dbtier.devices.profile import Profile

#: latencies kept for the percentiles; beyond this the counts still cover every request
LATENCY_CAP = 8_000_000
#: a rate that moves by more than this between the first and the last seconds is a step worth naming
STEP = 0.25


def run(job: Job, profile: Profile, credits: float = 1.0) -> Figures:
    model = profile.model()
    model.set_credits(credits)
    op = native.OP_READ if job.is_read else native.OP_WRITE
    lat, per_s, moved = native.sim_pattern(model, op, job.is_random, job.bs, job.size, job.jobs, 1000, job.runtime,
                                           LATENCY_CAP)
    fig = Figures.from_latencies(lat, moved, job.runtime)
    count = int(per_s.sum())
    return Figures(count, moved / 1048576 / job.runtime, count / job.runtime, fig.mean_us, fig.p50_us, fig.p99_us,
                   job.runtime, per_second=[int(v) for v in per_s])


def step(per_second: list[int]) -> tuple[float, float, int] | None:
    """(rate before, rate after, the second it changed) when the rate steps during the run, as a
    burst bucket running dry does; None when it holds. Whole seconds at both ends, the last dropped
    (it may be cut short)."""
    rates = np.asarray(per_second[:-1] if len(per_second) > 2 else per_second, dtype=float)
    if len(rates) < 3:
        return None
    first, last = rates[0], rates[-1]
    if max(first, last) <= 0 or abs(first - last) <= STEP * max(first, last):
        return None
    mid = (first + last) / 2
    at = int(np.argmax(rates <= mid) if first > last else np.argmax(rates >= mid))
    return float(np.median(rates[:at])) if at else first, float(np.median(rates[at:])), at
