"""What a workload is: its parameters (with help), the tables and indexes it creates (so --place can
name them), an unmeasured preparation, and the measured run. Workloads build their objects through
the lab, so placement applies to them as it would to a user's own schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol


@dataclass(frozen=True)
class Param:
    name: str       # option name, with dashes: --rows
    type: type
    default: Any
    help: str

    @property
    def key(self) -> str:
        return self.name.replace("-", "_")


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

    def __init__(self, **values: Any):
        self.p = {p.key: values.get(p.key, p.default) for p in self.params}

    def prepare(self, lab, progress: Progress) -> None:
        """Builds and loads the data. Runs with the emulation paused: it costs no device time."""
        raise NotImplementedError

    def run(self, lab, progress: Progress) -> dict:
        """The measured part; returns the workload's own figures (counts the result checks used)."""
        raise NotImplementedError

    def warm_cross(self, lab, progress: Progress) -> None:
        """Seed 001's "cross" cache: before the measured run, a different query over the same data
        (another state's rows there), so some of what the run needs is cached and some is not."""
        raise NotImplementedError

    def rates(self, metrics: dict, elapsed_s: float) -> dict:
        """Throughput figures derived from the run's counts and elapsed time."""
        return {}
