"""What a reproduction is made of: runs (a workload, devices, placement, lab options) and figures
(an article's claim beside the same quantity from our runs)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class RunSpec:
    key: str                                 # unique within the article, e.g. "random-hdd"
    workload: str
    params: dict = field(default_factory=dict)
    devices: tuple[tuple[str, str], ...] = ()  # (name, profile)
    places: str = ""                         # --place text
    cache: str = "32MB"
    io_mode: str = "direct"
    page_cache: str | None = None
    label: str = ""                          # how the figure table names it


@dataclass(frozen=True)
class CpuReference:
    """The article's own CPU figure for a statement we can run, from which the reproduction derives
    its CPU scale K: the statement runs first here, small, on a RAM device and at this machine's
    speed; K is the article's CPU per unit over ours, so the server's CPU is as slow as the
    article's machine was for every run of that article (a K below 1 runs at this machine's speed)."""
    run: RunSpec
    phase: str
    unit: str              # what one unit is, e.g. "update"
    count_key: str         # the phase metric that counts the units
    article_us: float      # the article's CPU per unit, in microseconds
    source: str            # where in the article that figure comes from


@dataclass(frozen=True)
class ScaleReference:
    """A size the article states, from which the reproduction derives its scale model F: F is that
    size over the same data of `run` here (its workload's loaded sizes at the reproduction's
    parameters), and every run of the article gives its caches at the article's sizes, divided by F
    (--scale-model)."""
    data_bytes: float
    run: str               # the key of the run whose data stands for the article's
    source: str            # where in the article the size comes from
    objects: tuple[str, ...] = ()  # the tables and indexes the size is of (none: all the run's data)


@dataclass(frozen=True)
class Claim:
    """One of an article's figures before anything runs: what the article measured and its figure,
    the runs ours needs, and how ours is computed from their results (`measure(results)` gives the
    Figure's ours, our_value, reason and verdict). A figure whose runs did not all give a result says
    which and why, and the article's other figures stand."""
    claim: str
    article: str
    needs: tuple[str, ...]
    measure: Callable[[dict], dict]
    article_value: float | None = None

    def figure(self, results: dict, why_missing: dict[str, str]) -> "Figure":
        lacking = [key for key in self.needs if key not in results]
        if lacking:
            whys: dict[str, list[str]] = {}  # runs missing for one reason are named together
            for key in lacking:
                whys.setdefault(why_missing.get(key, "not run"), []).append(key)
            return Figure(self.claim, self.article, "-", self.article_value,
                          reason="; ".join(f"{', '.join(keys)}: {why}" for why, keys in whys.items()))
        try:
            return Figure(self.claim, self.article, article_value=self.article_value, **self.measure(results))
        except (KeyError, StopIteration, ZeroDivisionError) as exc:  # a run that lacks what the figure reads
            return Figure(self.claim, self.article, "-", self.article_value,
                          reason=f"could not compute the figure: {type(exc).__name__} {exc}")


@dataclass
class Figure:
    claim: str             # what the article measured
    article: str           # its figure, as text
    ours: str              # ours, as text
    article_value: float | None = None  # for the agreement verdict, when both are numbers
    our_value: float | None = None
    reason: str = ""       # measured, when ours differs (or why it agrees)
    verdict: bool | None = None  # for a range: are all our values inside it

    @property
    def agrees(self) -> bool | None:
        """Within a factor of 1.35 of the article's figure, or inside its range (None: see the text)."""
        if self.verdict is not None:
            return self.verdict
        if self.article_value is None or self.our_value is None or self.article_value <= 0 or self.our_value <= 0:
            return None
        return abs(math.log(self.our_value / self.article_value)) <= math.log(1.35)


#: The seed articles, by author and title: the published benchmarks dbtier reproduces ("seed 000" is
#: the first of them).
SOURCES = {
    "000": "Mich Talebzadeh, \u201cUse Case Comparison of ASE 15.7 on Solid State Disks [Part 1]\u201d",
    "001": "Ben Martin, \u201cSSD vs. SATA benchmarks, round 2: Server applications\u201d",
    "002": "Fusion-io, \u201cSybase Adaptive Server Enterprise (ASE) 15.5 Performance Evaluation using Fusion-io "
           "Solid State Memory\u201d (technical whitepaper)",
    "003": "Michael Rosenblum, \u201cSolid-State Disks: Sorting out the Myths From the Reality\u201d",
    "004": "Dhimant Chokshi (Sybase), \u201cPerformance on Sybase Devices Using Direct I/O, Dsync and Raw Partition\u201d",
}


@dataclass
class Article:
    seed: str
    title: str
    hardware: str          # what the article ran on, and the profiles standing in for it
    runs: list[RunSpec]
    claims: list[Claim]
    cpu: CpuReference | None = None  # None: run at this machine's CPU speed (the article gives no CPU figure)
    scale: ScaleReference | None = None  # None: caches as given (the article states no database size to scale to)
    engine: str = "postgres"
    not_run: dict[str, str] = field(default_factory=dict)  # runs the engine cannot make (key -> why): skipped


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


def x(v: float) -> str:
    return f"{v:.2f}x" if v == v else "-"


def pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


def device(result: dict, name: str) -> dict:
    return next(d for d in result["devices"] if d["device"] == name)


def phase(result: dict, name: str) -> dict:
    return next(p for p in result["phases"] if p["phase"] == name)


def host_cpus(result: dict) -> int:
    """The CPUs of the machine the run ran on (as its lab recorded them)."""
    return int(result["lab"]["host"]["cpus"])


def cpu_share(result: dict) -> float:
    return pct(result["server_cpu_s"], result["elapsed_s"])


def cpu_both(a: dict, b: dict, a_name: str, b_name: str) -> str:
    """Both runs' server CPU for the same work: a difference in this machine's CPU time between runs
    is magnified by --cpu-scale and can outweigh what the devices changed."""
    return f"server CPU {a['server_cpu_s']:.1f} s on {a_name}, {b['server_cpu_s']:.1f} s on {b_name} for the same work"


def object_share(result: dict, names: tuple[str, ...]) -> float:
    """Share of the run's device time spent on these objects (from the per-object I/O)."""
    rows = result.get("object_io", [])
    total = sum(o["device_s"] for o in rows)
    return pct(sum(o["device_s"] for o in rows if o["object"] in names), total)


def is_wait(event: str) -> bool:
    """A timed event that is waiting, not the server's own CPU."""
    return not event.startswith("CPU")


def where_time_went(result: dict, objects: int = 2) -> str:
    """The measured account of a run: CPU share, its top waits, and the objects with the most device time."""
    waits = [e for e in result.get("top_events", []) if is_wait(e["event"])][:2]
    rows = sorted(result.get("object_io", []), key=lambda o: -o["device_s"])[:objects]
    parts = [f"server CPU {cpu_share(result):.0f}% of elapsed"]
    if waits:
        parts.append("top waits " + ", ".join(f"{e['event']} {e['elapsed_pct']:.0f}%" for e in waits))
    if rows:
        parts.append("device time " + ", ".join(
            f"{o['object']} {o['device_s']:.1f} s ({o['reads']:,} reads, {o['writes']:,} writes)" for o in rows))
    return "; ".join(parts)
