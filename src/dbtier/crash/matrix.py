"""`dbtier crash --matrix FILE`: several configurations, each a crash run, in one table; each cell may
say what it expects (safe, a bounded suffix, lost commits, damage), and the table says whether it held.

The file is TOML: the keys at the top are every cell's defaults, each [[cell]] adds or overrides them.
A cell's keys are an experiment file's (workload, device, place, set, cache, io-mode, the workload's
own) and the crash run's: name, cuts, seed, only, fsync-error, ledger, expect.

    workload = "pgbench"
    init = true
    scale = 1
    client = 2
    time = 2
    cuts = 40

    [[cell]]
    name = "defaults"
    device = ["ssd=ssd-sata-mlc"]
    expect = "safe"

    [[cell]]
    name = "synchronous_commit=off"
    device = ["ssd=ssd-sata-mlc"]
    set = { synchronous_commit = "off" }
    expect = "suffix"
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dbtier import tomlfile
from dbtier.crash import ledger, states
from dbtier.crash.run import check_cuts
from dbtier.errors import UserError
from dbtier.experiments.experiment import Experiment

#: what a cell may expect, in words
EXPECTATIONS = {
    "safe": "no lost acknowledged commit and no damage",
    "suffix": "a loss only of the last commits, in commit order, within 3 x wal_writer_delay (MariaDB: 2 x "
              "innodb_flush_log_at_timeout), and no damage",
    "lost": "lost acknowledged commits, the first within 100 cuts",
    "damage": "damage found, the first within 100 cuts",
}
#: a finding expected is found within this many cuts
FIRST_WITHIN = 100
#: the crash run's own keys in a cell (the rest make its experiment)
CRASH_KEYS = ("name", "cuts", "seed", "only", "fsync-error", "ledger", "expect")
MAX_FILE_BYTES = 1 << 20
MAX_CELLS = 200


@dataclass
class Cell:
    name: str
    experiment: Experiment
    cuts: int
    seed: int
    kinds: tuple[str, ...]
    fsync_error: bool
    expect: str | None
    ledger: str | None = None


def load(path: Path, cuts: int | None = None) -> list[Cell]:
    """The cells of a matrix file, each checked before any runs. cuts: every cell's, over the file's."""
    path = Path(path).expanduser()
    where = f"--matrix {path}"
    doc = tomlfile.read(path, where, "a matrix is a TOML file of [[cell]] tables", MAX_FILE_BYTES)
    table = doc.pop("cell", None)
    if not isinstance(table, list) or not table or not all(isinstance(c, dict) for c in table):
        raise UserError(f"{where}: give each configuration as a [[cell]] table")
    if len(table) > MAX_CELLS:
        raise UserError(f"{where}: {len(table)} cells; at most {MAX_CELLS}")
    out, names = [], set()
    for i, own in enumerate(table, 1):
        merged = {**doc, **own}
        name = merged.get("name", f"cell {i}")
        if not isinstance(name, str) or not name.strip():
            raise UserError(f"{where}: cell {i}'s name must be text")
        if name in names:
            raise UserError(f"{where}: two cells are named {name!r}; give each its own name")
        names.add(name)
        out.append(_cell(merged, f"{where}, cell {name!r}", path.resolve().parent, cuts))
    return out


def _cell(doc: dict, where: str, base: Path, cuts: int | None) -> Cell:
    expect = doc.get("expect")
    if expect is not None and expect not in EXPECTATIONS:
        raise UserError(f"{where}: expect = {expect!r}; give one of {', '.join(EXPECTATIONS)}")
    n = cuts if cuts is not None else doc.get("cuts", 200)
    seed = doc.get("seed", 0)
    only = doc.get("only", [])
    fsync_error = doc.get("fsync-error", False)
    for key, value, kind in (("cuts", n, int), ("seed", seed, int), ("fsync-error", fsync_error, bool)):
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise UserError(f"{where}: {key} = {value!r}; give {'a whole number' if kind is int else 'true or false'}")
    if isinstance(only, str):
        only = [only]
    if not isinstance(only, list) or not all(isinstance(k, str) for k in only):
        raise UserError(f"{where}: only = {only!r}; give a list of kinds of cut ({', '.join(states.KINDS)})")
    kinds = tuple(only) or states.KINDS
    try:
        check_cuts(n, kinds)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    exp = Experiment.from_dict({k: v for k, v in doc.items() if k not in CRASH_KEYS}, where, base=base)
    table = doc.get("ledger")
    if table is not None and not isinstance(table, str):
        raise UserError(f"{where}: ledger = {table!r}; give the table's name")
    try:
        ledger.for_workload(exp.make_workload(), table)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    return Cell(doc.get("name", where), exp, n, seed, kinds, fsync_error, expect, table)


def held(expect: str | None, result: dict) -> bool | None:
    """Whether a cell's result is what it expected (None: it expected nothing)."""
    if expect is None:
        return None
    s = result["summary"]
    lost = [x for x in result["states"] if x["lost"]]
    if expect == "safe":  # and nothing a failed fsync dropped left off the media, found by a check or not
        gone = (result["run"].get("fsync_error") or {}).get("never_written_bytes") or 0
        return not s["lost_commits"] and not s["damaged"] and not gone
    if expect == "suffix":
        if result.get("engine") == "mariadb":  # the redo log flushed once a timeout, and that write's own time
            bound = 2e3 * float(result["settings"].get("innodb-flush-log-at-timeout", 1))
        else:
            bound = 3 * _ms(result["settings"].get("wal_writer_delay", "200ms"))
        return bool(lost) and not s["damaged"] and all(x["suffix"] and x["lost_span_ms"] <= bound for x in lost)
    if expect == "lost":
        return s["first_loss"] is not None and s["first_loss"] < FIRST_WITHIN
    return s["first_damage"] is not None and s["first_damage"] < FIRST_WITHIN


def _ms(text: str) -> float:
    """A PostgreSQL time setting in ms (wal_writer_delay: a number of ms, or with its unit)."""
    t = str(text).strip().lower()
    for unit, factor in (("ms", 1.0), ("us", 1e-3), ("min", 60e3), ("s", 1e3)):
        if t.endswith(unit):
            return float(t[: -len(unit)]) * factor
    return float(t)


def slug(index: int, name: str) -> str:
    """A cell's folder in the matrix's run directory: its number and name, as a file name."""
    text = re.sub(r"[^a-z0-9_.]+", "-", name.lower()).strip("-")
    return f"{index:02d}-{text[:60] or 'cell'}"


def run_matrix(cells: list[Cell], folder: Path, workspace: Path | None = None, progress_for=None,
               say=lambda _line: None, recoveries: int | None = None) -> dict:
    """Each cell's crash run in turn, its result.json (and, with a finding, the material to rebuild its
    states) in folder/<cell>/; returns the matrix's rows."""
    from dbtier.crash.run import run_crash, verdict
    from dbtier.experiments.experiment import EXPERIMENT_FILE
    from dbtier.report import jsonout
    from dbtier.workspace import write_private

    rows = []
    for i, cell in enumerate(cells, 1):
        say(f"cell {i} of {len(cells)}: {cell.name}")
        sub = folder / slug(i, cell.name)
        sub.mkdir(mode=0o755)
        kw = {"progress_for": progress_for} if progress_for else {}
        result = run_crash(cell.experiment, cell.cuts, cell.seed, cell.kinds, workspace, say=say,
                           keep=sub / "material", fsync_error=cell.fsync_error, ledger_table=cell.ledger,
                           recoveries=recoveries, **kw)
        result["cell"] = cell.name
        write_private(sub / EXPERIMENT_FILE, cell.experiment.to_toml(), mode=0o644)
        jsonout.write(sub / "result.json", result)
        s = result["summary"]
        rows.append({"cell": cell.name, "folder": sub.name, "expect": cell.expect, "held": held(cell.expect, result),
                     "cuts": cell.cuts, "lost": s["lost_commits"], "damaged": s["damaged"],
                     "first_loss": s["first_loss"], "first_damage": s["first_damage"],
                     "most_lost": s["most_lost"], "longest_loss_ms": s["longest_loss_ms"],
                     "recovery_s": s["recovery_s"], "tps": result["run"].get("tps"),
                     "fsync_error": result["run"].get("fsync_error"), "verdict": verdict(result)})
    return {"kind": "crash-matrix", "cells": rows}


def verdict(doc: dict) -> str:
    """The matrix's answer first: how many cells held what they expected, and which did not."""
    rows = doc["cells"]
    judged = [r for r in rows if r["held"] is not None]
    failed = [r["cell"] for r in judged if not r["held"]]
    if not judged:
        found = sum(1 for r in rows if r["lost"] or r["damaged"])
        return f"{found} of {len(rows)} configurations lost commits or left damage"
    if not failed:
        return f"every configuration held what it expected ({len(judged)} of {len(judged)})"
    return (f"{len(failed)} of {len(judged)} configurations did not hold what they expected: "
            + ", ".join(failed))
