"""One piece of advice: the question (a recorded run, a slow and a fast device, a budget), checked
before anything is predicted, then the search's answer as a result document: the placement to use,
the alternatives, the speed-up against fast-storage curve, and the objects that matter and why."""

from __future__ import annotations

import time
from dataclasses import dataclass

from dbtier import engines
from dbtier.advisor import budget as budget_mod
from dbtier.advisor.candidates import Candidate, candidates as find_candidates
from dbtier.advisor.search import MINOR_SHARE, Advisor, Option, Search, headline, placement_for
from dbtier.errors import UserError
from dbtier.units import fmt_bytes
from dbtier.prediction import scenario as scenario_mod
from dbtier.prediction.recording import Recording
from dbtier.prediction.replay import Predictor

#: alternatives listed beside the recommendation
TOP = 5


@dataclass
class Question:
    rec: Recording
    devices: list                 # (name, Profile) as a prediction takes them: the recorded ones, then added ones
    slow: str
    fast: str
    candidates: list[Candidate]
    budget: budget_mod.Budget

    @property
    def total_bytes(self) -> int:
        return sum(c.bytes for c in self.candidates)

    def profile(self, name: str):
        return dict(self.devices)[name]


def _device(text: str, option: str) -> tuple[str, str]:
    name, sep, spec = str(text).partition("=")
    if not sep or not name.strip() or not spec.strip():
        raise UserError(f"{option} {text!r}: expected NAME=PROFILE, for example {option} "
                        f"{'ssd=ssd-sata-mlc' if option == '--fast' else 'hdd=hdd-sata-7200'}")
    return name.strip(), spec.strip()


def question(rec: Recording, fast: str, slow: str | None, budget: str | None, cost: str | None,
             max_cost: float | None) -> Question:
    """Everything checked before the first prediction; each refusal one line."""
    fast_name, _ = _device(fast, "--fast")
    texts = [fast]
    if slow is not None:
        slow_name, _ = _device(slow, "--slow")
        texts.insert(0, slow)
    else:
        slow_name = rec.lab.placement["data"]
    if slow_name == fast_name:
        raise UserError(f"--fast {fast!r}: the fast device needs a name of its own; {slow_name} is the slow one "
                        "(the run's data device, unless --slow names another)")
    scenario = scenario_mod.build(rec, tuple(texts), (), None, 1.0)
    cands = find_candidates(rec)
    active = [c for c in cands if c.active]
    if not active:
        raise UserError(f"{rec.run_dir}: no object of the run reached a device while it was measured, so no "
                        "placement changes it; faster storage will not help this run")
    total = sum(c.bytes for c in cands)
    b = budget_mod.parse(budget, cost, max_cost, total)
    smallest = min(active, key=lambda c: c.bytes)
    if b.fast_bytes < smallest.bytes:
        what = f"--budget {budget}" if budget is not None else f"--max-cost {max_cost:g}"
        raise UserError(f"{what}: room for {fmt_bytes(b.fast_bytes)} on the fast device, and the smallest object "
                        f"with I/O ({smallest.name}) takes {fmt_bytes(smallest.bytes)}; give at least that")
    return Question(rec, scenario.devices, slow_name, fast_name, cands, b)


def device_specs(q: Question) -> list:
    """The slow and the fast device, as a live run takes them."""
    from dbtier.devices.spec import DeviceSpec
    return [DeviceSpec(n, q.profile(n), spec=q.profile(n).name) for n in (q.slow, q.fast)]


def extreme_placements(q: Question) -> list:
    """Everything on the slow device, and everything that can move on the fast one: what a live run
    must have room for, whichever placement the search picks."""
    every = frozenset(c.name for c in q.candidates)
    engine = engines.get(q.rec.lab.engine)
    return [placement_for(frozenset(), q.slow, q.fast, engine=engine),
            placement_for(every, q.slow, q.fast, engine=engine)]


def advise(q: Question, progress=lambda _n, _what: None, workspace=None) -> tuple[dict, Advisor]:
    """workspace: where each prediction's state is made (a claim of it; the default one if None)."""
    started = time.perf_counter()
    predictor = Predictor(q.rec, workspace)
    advisor = Advisor(predictor, q.candidates, q.devices, q.slow, q.fast, progress, q.rec.lab.engine)
    search = advisor.run(q.budget)
    return document(q, advisor, search, time.perf_counter() - started), advisor


def _distinct(ranked: list[Option], cands: list[Candidate], n: int) -> list[Option]:
    """The best n, each differing from every one before it in an object that matters (at least
    MINOR_SHARE of the device time): placements that differ only in objects the run barely touched
    predict alike, and are no alternative worth running."""
    total = sum(c.device_s for c in cands if c.active)
    major = {c.name for c in cands if c.active and c.device_s >= MINOR_SHARE * total}
    out: list[Option] = []
    for o in ranked:
        if all((o.fast ^ p.fast) & major for p in out):
            out.append(o)
            if len(out) == n:
                break
    return out


def _option(q: Question, o: Option) -> dict:
    return {"place": o.place, "fast": sorted(o.fast), "fast_bytes": o.fast_bytes, "value": o.value,
            "speedup": o.speedup, "cost": q.budget.cost(o.fast_bytes, q.total_bytes)}


def document(q: Question, advisor: Advisor, search: Search, seconds: float) -> dict:
    rec = q.rec
    metric, recorded_value, higher = headline([{"recorded": p} for p in rec.phases], "recorded")
    ranked = _distinct(search.best(q.budget.fast_bytes, len(search.options)), q.candidates, TOP + 1)
    best = ranked[0]
    everything = search.options.get(frozenset(c.name for c in q.candidates if c.active))
    elapsed = sum(p["elapsed_s"] for p in rec.phases)
    cpu = sum(p.get("server_cpu_s", 0.0) for p in rec.phases)
    objects = []
    for c in q.candidates:
        alone = search.options.get(frozenset({c.name}))
        objects.append({"name": c.name, "kind": c.kind, "bytes": c.bytes, "sized_by": c.sized_by,
                        "reads": c.reads, "random_reads": c.random_reads, "writes": c.writes, "flushes": c.flushes,
                        "device_s": c.device_s, "reason": c.reason(),
                        "alone_speedup": alone.speedup if alone else None, "recommended": c.name in best.fast})
    frontier = search.frontier()
    curve = []
    for i, o in enumerate(frontier):
        prev = frontier[i - 1] if i else None
        per_gib = ((o.speedup - prev.speedup) / ((o.fast_bytes - prev.fast_bytes) / (1 << 30))
                   if prev and o.fast_bytes > prev.fast_bytes else None)
        curve.append({**_option(q, o), "gain_per_gib": per_gib})
    notes = ["sizes are each object's at the end of the recorded run; leave room for growth " +
             ("(the redo log is one file of innodb_log_file_size, written round; undo grows with long "
              "transactions, temp with sorts that spill)" if rec.lab.engine == "mariadb" else
              f"(the WAL grows to max_wal_size, {rec.lab.settings.get('max_wal_size', 'its setting')}, between "
              "checkpoints)")]
    if rec.lab.engine == "mariadb":
        notes.append("a replay repeats the recorded run's calls, and a faster MariaDB run may make I/O the recording "
                     "did not: with part of its tables on the fast device a TPC-C's purge fell behind and read undo "
                     "back from the slow one, and the advice's gain was overstated up to 2.2x (docs/advise.md); "
                     "verify it live (--verify K) before you buy on its figure")
    return {
        "kind": "advice", "run_dir": str(rec.run_dir), "workload": rec.result.get("workload"),
        "engine": rec.lab.engine,
        "devices": {"slow": {"name": q.slow, "profile": q.profile(q.slow).name},
                    "fast": {"name": q.fast, "profile": q.profile(q.fast).name}},
        "budget": {**q.budget.to_dict(), "described": q.budget.describe()},
        "metric": metric, "higher_is_better": higher, "recorded_value": recorded_value,
        "baseline_value": advisor.base_value, "total_bytes": q.total_bytes,
        "recommended": _option(q, best),
        "alternatives": [_option(q, o) for o in ranked[1:]],
        "everything_fast": _option(q, everything) if everything else None,
        "curve": curve,
        "objects": objects,
        "server_cpu_share": cpu / elapsed if elapsed > 0 else None,
        "search": {"method": search.method, "predictions": advisor.predictions, "seconds": seconds,
                   "placements": len(search.options)},
        "notes": notes,
    }


def verified_best(doc: dict) -> dict:
    """Of the placements run live, the one that measured best: the advice stands unless another ran
    better by more than the tie (TIE, as the predictions are judged)."""
    from dbtier.advisor.search import TIE
    runs = doc["verify"]
    sign = 1 if doc["higher_is_better"] else -1
    advised = runs[0]
    best = max(runs, key=lambda v: sign * v["measured"])
    if best is advised or sign * best["measured"] <= sign * advised["measured"] * (1 + sign * TIE):
        best = advised
    gain = best["measured"] / advised["measured"] if doc["higher_is_better"] else advised["measured"] / best["measured"]
    return {"label": best["label"], "place": best["place"], "measured": best["measured"], "fast_bytes": best["fast_bytes"],
            "over_advice": gain}
