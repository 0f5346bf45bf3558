"""What a workload is: its parameters (with help), the tables and indexes it creates (so --place can
name them), an unmeasured preparation, and the measured run. Workloads build their objects through
the lab, so placement applies to them as it would to a user's own schema."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
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
    maximum: int | None = None  # for numbers: the largest value that works (e.g. connections the server allows)
    multiple: bool = False  # repeatable: its value is a tuple of what was given, in order
    flags: tuple[str, ...] = ()  # other names for it (pgbench's -c, -j, ...)
    metavar: str | None = None
    positional: bool = False  # given without its name (dbtier run replay WORKLOAD_DIR): metavar names it
    #: the words after `--` on the command line (a program's own command line): a tuple of text, given
    #: as a list in an experiment file
    trailing: bool = False

    def __post_init__(self):
        if self.positional and (self.multiple or self.flags or self.type is bool or not self.metavar):
            raise ValueError(f"{self.name}: a positional parameter is one value, named by its metavar")
        if self.trailing and not self.multiple:
            raise ValueError(f"{self.name}: the words after '--' are a tuple (multiple=True)")

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


def _absolute(path) -> Path:
    return Path(os.path.abspath(os.path.expanduser(str(path))))


PAGE = 8192
MAX_INT = 2**53  # beyond any size or count a run could reach; PostgreSQL's bigint and JSON hold it
_PAGE_SPACE = PAGE - 24  # a heap or index page's room for tuples and their line pointers


def _align(n: int) -> int:
    return (n + 7) & ~7


def heap_bytes(rows: int, tuple_bytes: int) -> int:
    """A table of `rows` rows of `tuple_bytes` (header and data, before alignment): whole pages, as
    PostgreSQL fills them, each row with its 4-byte line pointer."""
    per_page = max(1, _PAGE_SPACE // (_align(tuple_bytes) + 4))
    return -(-rows // per_page) * PAGE if rows > 0 else 0


def btree_bytes(entries: int, key_bytes: int, fill: float = 0.9) -> int:
    """A B-tree index of `entries` keys of `key_bytes`: leaves filled to `fill` (fillfactor 90 when
    built or appended in order), plus the inner pages (about one per hundred leaves)."""
    per_page = max(1, int(_PAGE_SPACE * fill) // (8 + _align(key_bytes) + 4))
    leaves = -(-entries // per_page) if entries > 0 else 0
    return (leaves + leaves // 100 + 2) * PAGE


@dataclass
class Footprint:
    """What a workload's data takes at its peak, estimated from its parameters (rather more than less):
    each table and index by name (placed where --place puts it), the WAL it generates (the lab caps
    what stays on disk at max_wal_size), temp files, dumps, files outside every device (bulk-load input,
    in the lab's own folder), and memory: dbtier's own (the keys a client holds) and the server's
    beyond its caches (work_mem)."""
    objects: dict[str, int] = field(default_factory=dict)
    wal: int = 0
    temp: int = 0
    dump: int = 0
    scratch: int = 0
    client_memory: int = 0
    server_memory: int = 0
    databases: int = 0  # databases it creates besides the lab's own (each a copy of template1)
    connections: int = 1  # server connections it holds at once (besides the lab's wait sampler)
    connections_option: str = ""  # the parameter that sets them, if one does
    memory_option: str = ""  # the parameter that sets server_memory, if one does

    @property
    def data(self) -> int:
        return sum(self.objects.values())


CACHE_STATES = ("cold", "hot", "cross")


def check_cache_state(workload: Workload, cache_state: str) -> None:
    if cache_state not in workload.cache_states:
        raise UserError(f"--cache-state {cache_state}: {workload.name} supports {', '.join(workload.cache_states)} "
                        "(it changes its data, so a repeated run would not read what the first one did)")


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
    #: the parameters that make its data larger (named when the data would not fit)
    size_options: ClassVar[tuple[str, ...]] = ()
    #: a user's own workload: its objects are whatever its setup made, so --place names are checked
    #: against the database after the setup, not against `objects`
    user_objects: ClassVar[bool] = False
    #: the database engines it runs on (dbtier.engines): its SQL and its client programs are theirs
    engines: ClassVar[tuple[str, ...]] = ("postgres",)
    #: the engine it is told it runs on (for_engine); PostgreSQL until told another
    engine: str = "postgres"

    def __init__(self, **values: Any):
        self.p = {p.key: values.get(p.key, p.default) for p in self.params}
        for p in self.params:
            if p.type is Path and self.p[p.key] is not None:  # absolute: as recorded, and as its client sees it
                v = self.p[p.key]
                self.p[p.key] = tuple(map(_absolute, v)) if isinstance(v, (tuple, list)) else _absolute(v)
            value = self.p[p.key]
            if p.multiple or value is None:
                continue
            if p.choices and value not in p.choices:
                raise UserError(f"--{p.name} {value}: choose one of {', '.join(p.choices)}")
            if p.type is int and abs(value) > MAX_INT:
                raise UserError(f"--{p.name} {value}: too large (at most {MAX_INT:,})")
            if p.type is int and p.minimum is not None and value < p.minimum:
                raise UserError(f"--{p.name} must be at least {p.minimum}")
            if p.type is int and p.maximum is not None and value > p.maximum:
                raise UserError(f"--{p.name} must be at most {p.maximum}")

    def footprint(self, cache_state: str = "cold") -> Footprint:
        """The bytes its data, indexes, WAL and temp files take, from its parameters (see Footprint):
        checked against the free space and memory before anything starts."""
        return Footprint()

    def loaded_bytes(self) -> dict[str, int]:
        """Each table's and index's size once loaded and at rest, where the footprint gives its peak
        (a rewrite holds old and new): what a scale model sets beside an article's stated sizes."""
        return self.footprint().objects

    def for_engine(self, engine: str) -> None:
        """Told the engine it will run on (one of `engines`), before anything is made: what its options
        cannot mean there is refused now."""
        self.engine = engine

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

    def notes(self) -> list[str]:
        """What the user should hear of how the run went beside its figures (set after it ran)."""
        return []

    def files(self) -> list[dict]:
        """The user's files it ran, each {option, path, sha256} (set once they ran)."""
        return []

    def outputs(self) -> dict[str, Path | bytes]:
        """What its programs wrote that belongs in the run directory, by the name it gets there: a file
        in the lab, or its content (set after it ran)."""
        return {}

    def load_identity(self) -> dict | None:
        """What makes its loaded data what it is (its input files' sha256, its load's own parameters), for
        a loaded cluster to be kept and used again by a later run of the same; None: not kept."""
        return None

    def warm_cross(self, lab, progress: Progress) -> None:
        """Seed 001's "cross" cache: before the measured run, a different query over the same data
        (another state's rows there), so some of what the run needs is cached and some is not."""
        raise NotImplementedError

    def rates(self, metrics: dict, elapsed_s: float, phase: str = "run", measured: dict | None = None) -> dict:
        """Throughput figures derived from a phase's counts, its elapsed time, and (measured) the
        lab's figures for it (CPU, devices)."""
        return {}
