"""A measured interval: its collectors driven through one protocol, and the phase's figures they
contribute, in PhaseResult's shape.

    with measured(collectors, label) as interval:   # each prepared, then started, in its start rank
        ... the workload's phase ...                  # the clock runs only here
    interval.result                                   # after: each stopped (in its stop rank), then asked

A collector (measure/collectors.py) has:

    start_rank, stop_rank    when it starts and stops among the others (lowest first): the order a
                             measurement needs is declared by each collector, not by its caller
    prepare()                before any starts: what may cost device time or must precede the others
                             (catalog reads, statistics snapshots), outside the interval
    start(interval)          at the clock's start
    stop(interval)           at the clock's stop (`interval.elapsed_s` is set by then)
    contribute(interval, figures)   afterwards, in the collectors' order: its figures into the phase's
                             (a later collector may read an earlier one's)

A new collector is a class there and a place in the list that Lab.measure builds."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Protocol

from dbtier.measure.result import PhaseResult


@dataclass
class Interval:
    label: str
    t0_ns: int = 0               # the trace's window (set by the collector that starts the clock)
    t1_ns: int = 0
    elapsed_s: float = 0.0
    not_ours: set = field(default_factory=set)  # server processes that belong to the measurement itself
    notes: dict = field(default_factory=dict)   # what collectors hand each other (names, samples, backends)
    result: dict = field(default_factory=dict)  # PhaseResult.to_dict(), once the interval is over


class Collector(Protocol):
    start_rank: int
    stop_rank: int

    def prepare(self) -> None: ...
    def start(self, interval: Interval) -> None: ...
    def stop(self, interval: Interval) -> None: ...
    def contribute(self, interval: Interval, figures: dict) -> None: ...


@contextlib.contextmanager
def measured(collectors: list, label: str = "run"):
    """Runs the interval around the with-block (see the module's docstring). A collector that fails
    to start stops those started before it."""
    interval = Interval(label)
    for c in collectors:
        c.prepare()
    started = []
    try:
        for c in sorted(collectors, key=lambda c: c.start_rank):
            c.start(interval)
            started.append(c)
    except BaseException:
        for c in sorted(started, key=lambda c: c.stop_rank):
            with contextlib.suppress(Exception):
                c.stop(interval)
        raise
    t0 = time.monotonic()
    try:
        yield interval
    finally:
        interval.elapsed_s = time.monotonic() - t0
        for c in sorted(started, key=lambda c: c.stop_rank):
            c.stop(interval)
    figures: dict = {"elapsed_s": interval.elapsed_s}
    for c in collectors:
        c.contribute(interval, figures)
    interval.result = PhaseResult(**figures).to_dict()
