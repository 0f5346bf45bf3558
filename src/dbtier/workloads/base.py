"""What a workload is: its parameters (with help), the tables and indexes it creates (so --place can
name them), an unmeasured preparation, and the measured run. Workloads build their objects through
the lab, so placement applies to them as it would to a user's own schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Protocol

from dbtier.errors import UserError


@dataclass(frozen=True)
class Param:
    name: str       # option name, with dashes: --rows
    type: type
    default: Any
    help: str
    minimum: int | None = 1  # for numbers: the smallest value that makes sense
    choices: tuple[str, ...] | None = None  # for words: the values it takes

    @property
    def key(self) -> str:
        return self.name.replace("-", "_")


@dataclass(frozen=True)
class Phase:
    """One measured part of a workload (seed 003's three update tests, seed 002's build steps).
    cold: restart with empty caches before it; otherwise it runs straight after the previous phase.
    warm: run unmeasured but emulated between the restart and the measurement (hot or cross cache)."""
    name: str
    run: Callable[[Any, "Progress"], dict]
    cold: bool = True
    warm: Callable[[Any, "Progress"], Any] | None = None


class Progress(Protocol):
    def phase(self, text: str, total: int | None = None) -> None: ...
    def advance(self, n: int = 1) -> None: ...


class QuietProgress:
    def phase(self, text: str, total: int | None = None) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass


class WorkloadError(Exception):
    """The workload ran but its result check failed: the measurement must not be reported as valid."""


class Workload:
    name: ClassVar[str]
    seed: ClassVar[str]          # which seed article it reproduces, e.g. "000"
    summary: ClassVar[str]       # one line
    description: ClassVar[str]   # what the seed did, and how this scales it
    params: ClassVar[tuple[Param, ...]] = ()
    objects: ClassVar[dict[str, str]] = {}  # name -> "table" | "index"
    #: the --cache-state values it supports: hot and cross repeat reads, so only read-only workloads
    cache_states: ClassVar[tuple[str, ...]] = ("cold",)

    def __init__(self, **values: Any):
        self.p = {p.key: values.get(p.key, p.default) for p in self.params}
        for p in self.params:
            value = self.p[p.key]
            if p.choices and value not in p.choices:
                raise UserError(f"--{p.name} {value}: choose one of {', '.join(p.choices)}")
            if p.type is int and p.minimum is not None and value < p.minimum:
                raise UserError(f"--{p.name} must be at least {p.minimum}")

    def prepare(self, lab, progress: Progress) -> None:
        """Builds and loads the data. Runs with the emulation paused: it costs no device time."""
        raise NotImplementedError

    def run(self, lab, progress: Progress) -> dict:
        """The measured part; returns the workload's own figures (counts the result checks used)."""
        raise NotImplementedError

    def phases(self, cache_state: str = "cold") -> list[Phase]:
        """The measured parts, in order. By default one: run, from the given cache state."""
        warm = {"cold": None, "hot": self.run, "cross": self.warm_cross}[cache_state]
        return [Phase("run", self.run, warm=warm)]

    def verify(self, lab) -> dict:
        """Checks after the measured phases (unmeasured): raise WorkloadError if the data is wrong;
        returns what was checked."""
        return {}

    def warm_cross(self, lab, progress: Progress) -> None:
        """Seed 001's "cross" cache: before the measured run, a different query over the same data
        (another state's rows there), so some of what the run needs is cached and some is not."""
        raise NotImplementedError

    def rates(self, metrics: dict, elapsed_s: float, phase: str = "run", measured: dict | None = None) -> dict:
        """Throughput figures derived from a phase's counts, its elapsed time, and (measured) the
        lab's figures for it (CPU, devices)."""
        return {}
