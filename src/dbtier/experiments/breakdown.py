"""A comparison where the layouts differ: every phase, and every transaction type or script, per
layout, each against the first layout; and the one where they differ most.

A whole-run figure hides what a layout changes when one long phase dominates it (a 60-second report
beside a 6-second phase the WAL's device speeds up 1.3 times): the verdict names the phase or the
transaction type where the layouts differ most, among those that weigh enough to be more than noise.

    breakdown(names, results) -> {"phases": [...], "scripts": [...], "largest": {...} | None}
"""

from __future__ import annotations

import math

#: a phase below this share of the baseline's elapsed time is shown, never named as the difference
PHASE_SHARE_MIN = 0.02
#: a transaction type with fewer transactions than this is shown, never named as the difference
SCRIPT_COUNT_MIN = 20
PERCENTILES = ("p50_ms", "p95_ms", "p99_ms")


def phases_of(result: dict) -> list[dict]:
    """A run's measured phases; a run of one phase is its own."""
    return result.get("phases") or [{**result, "phase": result.get("phase") or "run"}]


def _scripts(phase: dict) -> dict[str, dict]:
    """A phase's transaction types or scripts and their latency figures: pgbench's scripts, the OLTP
    driver's transaction types, a replay's statement classes ('class 12')."""
    metrics = phase.get("metrics") or {}
    classes = {f"class {c['class_id']}": c for c in metrics.get("classes") or []}
    return metrics.get("scripts") or metrics.get("latency") or classes


def _ratio(first: float | None, value: float | None, higher: bool) -> float | None:
    if not first or not value or not math.isfinite(first) or not math.isfinite(value):
        return None
    return value / first if higher else first / value


def breakdown(names: list[str], results: list[dict], repeats: list[list[dict]] | None = None) -> dict:
    """Per phase: each layout's elapsed (and tps where the phase has it) and speed-up against the
    first; per transaction type: its rate, latency percentiles and speed-up (its mean latency against
    the first layout's). repeats: each layout's every run (results are their medians): each figure
    gets its least and most, and whether it lies within the first layout's range."""
    by_layout = [{ph["phase"]: ph for ph in phases_of(r)} for r in results]
    every = [[{ph["phase"]: ph for ph in phases_of(r)} for r in runs] for runs in repeats] if repeats else None
    order = [ph["phase"] for ph in phases_of(results[0])]
    total = sum(by_layout[0][p]["elapsed_s"] for p in order) or 1.0
    phases, scripts = [], []
    for name in order:
        first = by_layout[0][name]
        tps = (first.get("metrics") or {}).get("tps")
        row = {"phase": name, "figure": "tps" if tps else "elapsed s", "share": first["elapsed_s"] / total,
               "layouts": []}
        for label, phs in zip(names, by_layout):
            ph = phs.get(name)
            if ph is None:
                row["layouts"].append({"name": label, "elapsed_s": None, "value": None, "speedup": None})
                continue
            value = (ph.get("metrics") or {}).get("tps") if tps else ph["elapsed_s"]
            row["layouts"].append({"name": label, "elapsed_s": ph["elapsed_s"], "value": value,
                                   "speedup": _ratio(tps or first["elapsed_s"], value, bool(tps))})
        if every:
            _ranges(row["layouts"], [[(p.get(name) or {}) for p in runs] for runs in every],
                    lambda ph: (ph.get("metrics") or {}).get("tps") if tps else ph.get("elapsed_s"))
        phases.append(row)
        for script, base in _scripts(first).items():
            srow = {"phase": name, "script": script, "count": base.get("count"), "layouts": []}
            for label, phs in zip(names, by_layout):
                fig = _scripts(phs.get(name) or {}).get(script) or {}
                elapsed = (phs.get(name) or {}).get("elapsed_s")
                count = fig.get("count")
                srow["layouts"].append({
                    "name": label, "tps": count / elapsed if count is not None and elapsed else None,
                    "mean_ms": fig.get("mean_ms"), **{k: fig.get(k) for k in PERCENTILES},
                    "speedup": _ratio(base.get("mean_ms") or base.get("p50_ms"),
                                      fig.get("mean_ms") or fig.get("p50_ms"), False)})
            if every:
                _ranges(srow["layouts"], [[_scripts(p.get(name) or {}).get(script) or {} for p in runs] for runs in every],
                        lambda fig: fig.get("mean_ms") or fig.get("p50_ms"))
            scripts.append(srow)
    return {"phases": phases, "scripts": scripts, "largest": largest(phases, scripts)}


def _ranges(layouts: list[dict], runs: list[list[dict]], value) -> None:
    """Each layout's least and most of a figure over its runs, and whether it overlaps the first's."""
    for i, (lay, each) in enumerate(zip(layouts, runs)):
        values = [v for v in (value(x) for x in each) if v is not None]
        lay["min"], lay["max"] = (min(values), max(values)) if values else (None, None)
        if i and values and layouts[0].get("min") is not None:
            lay["within_spread"] = lay["min"] <= layouts[0]["max"] and layouts[0]["min"] <= lay["max"]


def largest(phases: list[dict], scripts: list[dict]) -> dict | None:
    """The phase or transaction type where a layout differs most from the first (farthest from 1x
    either way), among those that weigh enough: None when the run has one phase and no types (the
    whole-run figure says it all)."""
    if len(phases) < 2 and not scripts:
        return None
    best = None
    for row in phases:
        if row["share"] < PHASE_SHARE_MIN:
            continue
        for lay in row["layouts"][1:]:
            if lay.get("within_spread"):  # no difference measured: never named as one
                continue
            best = _farther(best, lay["speedup"], {"phase": row["phase"], "script": None, "layout": lay["name"],
                                                   "speedup": lay["speedup"], "figure": row["figure"]})
    for row in scripts:
        if (row["count"] or 0) < SCRIPT_COUNT_MIN:
            continue
        for lay in row["layouts"][1:]:
            if lay.get("within_spread"):
                continue
            best = _farther(best, lay["speedup"], {"phase": row["phase"] if len(phases) > 1 else None,
                                                   "script": row["script"],
                                                   "layout": lay["name"], "speedup": lay["speedup"],
                                                   "figure": "mean latency"})
    return best


def _farther(best: dict | None, speedup: float | None, candidate: dict) -> dict | None:
    if speedup is None:
        return best
    if best is None or abs(math.log(speedup)) > abs(math.log(best["speedup"])):
        return candidate
    return best
