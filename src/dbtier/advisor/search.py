"""The search for the placement: every candidate placement that fits is predicted when there are few
candidates; beyond that a MILP (HiGHS, through scipy) picks from the predicted benefit of each object
alone and of each table with its index together, and the predictor refines around its answer. Every
placement the advice names was predicted whole, so objects that interact (a table and its index
seeking between each other on one disk) are judged by the replay, never by adding benefits up."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import numpy as np

from dbtier import engines
from dbtier.advisor.budget import Budget
from dbtier.advisor.candidates import Candidate, role_parts
from dbtier.prediction.replay import Predictor
from dbtier.prediction.scenario import Scenario

#: up to this many candidates with I/O, every placement that fits is predicted (2^12 = 4,096)
ENUMERATE_MAX = 12
#: a candidate with less of the recorded device time than this share is not enumerated: the
#: refinement tries it (added, dropped, swapped), judged by the predictor like every other placement
MINOR_SHARE = 0.01
#: the solver's alternatives predicted whole, and the neighbours of a placement tried per refining round
SOLVER_ALTERNATIVES = 6
NEIGHBOURS_PER_ROUND = 12
REFINE_ROUNDS = 8
#: predicted speed-ups this close are a tie (the replay's own spread is larger): the smaller placement wins
TIE = 0.01


@dataclass(frozen=True)
class Option:
    """One placement, predicted."""
    fast: frozenset[str]   # the candidates on the fast device
    fast_bytes: int
    value: float           # the headline figure predicted (elapsed s, or tps / tpm)
    speedup: float         # against everything on the slow device
    place: str             # the --place text that makes it


@dataclass
class Search:
    """What the search found and how: the options it predicted, in the order it predicted them."""
    options: dict[frozenset, Option] = field(default_factory=dict)
    method: str = ""
    seconds: float = 0.0

    def best(self, fast_bytes: int, n: int = 1) -> list[Option]:
        """The best that fit, best first; predictions within TIE of the best are a tie, which the one
        using the least fast storage wins."""
        fits = sorted((o for o in self.options.values() if o.fast_bytes <= fast_bytes),
                      key=lambda o: (-o.speedup, o.fast_bytes, sorted(o.fast)))
        if not fits:
            return []
        ties = [o for o in fits if o.speedup >= fits[0].speedup * (1 - TIE)]
        first = min(ties, key=lambda o: (o.fast_bytes, -o.speedup, sorted(o.fast)))
        return [first] + [o for o in fits if o is not first][:n - 1]

    def frontier(self) -> list[Option]:
        """The best speed-up found at each amount of fast storage: each point needs more bytes than the
        one before and gives more."""
        out: list[Option] = []
        for o in sorted(self.options.values(), key=lambda o: (o.fast_bytes, -o.speedup)):
            if not out or o.speedup > out[-1].speedup * (1 + 1e-9):
                out.append(o)
        return out


def placement_for(fast: frozenset[str], slow_device: str, fast_device: str,
                  objects: list[str] = (), engine=None, used: tuple[str, ...] | None = None):
    """The candidates in `fast` on the fast device (the WAL, temp and InnoDB's redo log, undo and binary
    log by their roles), all else on the slow. What follows `data` (PostgreSQL's catalogs, InnoDB's
    system tablespace) goes with it: on the fast device, every object of `objects` (all the candidate
    tables and indexes) not in `fast` is named on the slow one. engine: the run's (PostgreSQL's if None);
    used: the roles the run used (None: all), the others following data (nothing of the run is there)."""
    engine = engine or engines.get("postgres")
    parts = role_parts(engine)
    roles = {r: slow_device for r in engine.roles}
    for role in parts:
        if role in fast:
            roles[role] = fast_device
    placed = {n: fast_device for n in sorted(fast) if n not in parts and n != engine.system_part}
    if engine.system_part in fast:
        roles["data"] = fast_device
        placed.update({n: slow_device for n in objects if n not in fast})
    for role in parts:
        if used is not None and role not in used:
            roles[role] = roles["data"]
    return engine.make_placement(roles, dict(sorted(placed.items())))


def headline(phases: list[dict], side: str = "predicted") -> tuple[str, float, bool]:
    """The figure a placement is judged by: the transaction rate of a one-phase run that has one
    (higher is better), else the elapsed time over every phase (lower is better)."""
    if len(phases) == 1:
        rates = phases[0][side].get("rates") or {}
        for key in ("tps", "tpm"):
            if isinstance(rates.get(key), (int, float)) and not isinstance(rates[key], bool):
                return key, float(rates[key]), True
    return "elapsed s", float(sum(ph[side]["elapsed_s"] for ph in phases)), False


class Advisor:
    """Predicts placements of the candidates on a slow and a fast device (one prediction per
    placement, remembered)."""

    def __init__(self, predictor: Predictor, candidates: list[Candidate], devices: list, slow: str, fast: str,
                 progress=lambda _done, _what: None, engine: str = "postgres"):
        self.predictor = predictor
        self.engine = engines.get(engine)
        self.parts = role_parts(self.engine)
        self.candidates = {c.name: c for c in candidates}
        self.objects = [c.name for c in candidates if c.name not in (*self.parts, self.engine.system_part)]
        self.devices, self.slow, self.fast = devices, slow, fast
        self.progress = progress
        self.predictions = 0
        self.search = Search()
        base = self._predict(frozenset())
        self.metric, self.base_value, self.higher = base

    # -- one placement ----------------------------------------------------------------------------

    def placement(self, fast: frozenset[str]):
        return placement_for(fast, self.slow, self.fast, self.objects, self.engine,
                             tuple(r for r in self.parts if r in self.candidates))

    def place_text(self, fast: frozenset[str]) -> str:
        """The --place text, shortest: what goes where `data` goes is not named."""
        p = self.placement(fast)
        parts = [f"data={p.roles['data']}"] + [f"{r}={p.roles[r]}" for r in self.parts
                                                  if p.roles[r] != p.roles["data"]]
        parts += [f"{n}={d}" for n, d in p.objects.items() if d != p.roles["data"] or
                  self.candidates[n].kind == "index"]
        return ",".join(parts)

    def _predict(self, fast: frozenset[str]) -> tuple[str, float, bool]:
        scenario = Scenario(self.devices, self.placement(fast))
        prediction = self.predictor.predict(scenario, figures=False)
        self.predictions += 1
        return headline(prediction.phases)

    def evaluate(self, fast) -> Option:
        fast = frozenset(fast)
        known = self.search.options.get(fast)
        if known is not None:
            return known
        _metric, value, higher = self._predict(fast) if fast else (self.metric, self.base_value, self.higher)
        speedup = (value / self.base_value if higher else self.base_value / value) if value > 0 else float("inf")
        option = Option(fast, self.bytes(fast), value, speedup, self.place_text(fast))
        self.search.options[fast] = option
        self.progress(self.predictions, option.place)
        return option

    def bytes(self, fast) -> int:
        return sum(self.candidates[n].bytes for n in fast)

    # -- the search -------------------------------------------------------------------------------

    def run(self, budget: Budget) -> Search:
        started = time.perf_counter()
        self.evaluate(frozenset())
        active = [c.name for c in self.candidates.values() if c.active]
        total = sum(self.candidates[n].device_s for n in active)
        major = [n for n in active if self.candidates[n].device_s >= MINOR_SHARE * total]
        minor = len(active) - len(major)
        also = (f"; the {minor} with less than {MINOR_SHARE:.0%} of the device time each, and dropping any, tried by "
                "the refinement" if minor else "; dropping any of them tried by the refinement")
        for seed in self._role_level():  # what a DBA would try first: every role-level placement that fits
            if self.bytes(seed) <= budget.fast_bytes:
                self.evaluate(seed)
        if len(major) <= ENUMERATE_MAX:
            self.search.method = (f"every placement of the {len(major)} objects with most of the device time that "
                                  f"fits and has no room left for another of them, predicted{also}")
            for combo in _maximal(major, {n: self.candidates[n].bytes for n in major}, budget.fast_bytes):
                self.evaluate(combo)
            gain = self._gains(active, budget.fast_bytes)
            self._refine(self.search.best(budget.fast_bytes)[0], list(gain), gain, {}, budget.fast_bytes)
        else:
            self.search.method = (f"{len(active)} objects with I/O: a MILP (HiGHS) on each one's predicted benefit "
                                  "(and each table's with its index), its best answers predicted whole and refined")
            self._solve(active, budget.fast_bytes)
        self._curve(major, active)
        self.search.seconds = time.perf_counter() - started
        return self.search

    def _role_level(self) -> list[frozenset]:
        """The placements by role: data (the tables and what follows data), indexes (PostgreSQL's), and
        each other role (the WAL or redo log, temp, undo...), each on the fast device or not."""
        data_kinds = ("table", "materialized view", "catalog", self.engine.system_part)
        groups = [frozenset(n for n, c in self.candidates.items() if c.kind in data_kinds),
                  frozenset(n for n, c in self.candidates.items() if c.kind == "index")]
        groups += [frozenset({r}) for r in self.parts if r in self.candidates]
        groups = [g for g in groups if g]
        out = []
        for k in range(1, len(groups) + 1):
            for combo in itertools.combinations(groups, k):
                out.append(frozenset().union(*combo))
        return out

    def _cost(self, option: Option) -> float:
        """Lower is better, in the figure's own terms: elapsed, or time per transaction."""
        return 1.0 / option.value if self.higher else option.value

    def _gains(self, names: list[str], capacity: int) -> dict[str, float]:
        """Each object's predicted benefit alone (in _cost's terms), of those that fit."""
        base = self._cost(self.evaluate(frozenset()))
        return {n: base - self._cost(self.evaluate({n})) for n in names if self.candidates[n].bytes <= capacity}

    def _solve(self, active: list[str], capacity: int) -> None:
        base = self._cost(self.evaluate(frozenset()))
        gain = self._gains(active, capacity)
        pairs = {}
        for n in gain:  # an index and its table: predicted together, for what they do to each other
            table = self.candidates[n].table
            if table in gain and self.candidates[n].bytes + self.candidates[table].bytes <= capacity:
                both = base - self._cost(self.evaluate({n, table}))
                pairs[(table, n)] = both - gain[n] - gain[table]
        names = list(gain)
        seen: list[frozenset] = []
        for _ in range(SOLVER_ALTERNATIVES):
            chosen = _knapsack(names, gain, pairs, {n: self.candidates[n].bytes for n in names}, capacity, seen)
            if chosen is None:
                break
            seen.append(chosen)
            self.evaluate(chosen)
        best = self.search.best(capacity)[0]
        self._refine(best, names, gain, pairs, capacity)

    def _refine(self, start: Option, names: list[str], gain: dict, pairs: dict, capacity: int) -> None:
        """Local search with the predictor: add one, drop one, or swap one for another, the neighbours
        the solver's estimate ranks first, until no neighbour predicts better."""
        current = start
        for _ in range(REFINE_ROUNDS):
            inside, outside = sorted(current.fast & set(names)), [n for n in names if n not in current.fast]
            moves = [current.fast | {o} for o in outside] + [current.fast - {i} for i in inside]
            moves += [(current.fast - {i}) | {o} for i in inside for o in outside]
            moves = [m for m in moves if self.bytes(m) <= capacity and m not in self.search.options]

            def estimate(fast):
                return sum(gain.get(n, 0.0) for n in fast) + sum(v for (a, b), v in pairs.items() if a in fast and b in fast)
            moves.sort(key=estimate, reverse=True)
            for m in moves[:NEIGHBOURS_PER_ROUND]:
                self.evaluate(m)
            best = self.search.best(capacity)[0]
            if best.speedup <= current.speedup * (1 + 1e-9):
                return
            current = best

    def _curve(self, major: list[str], active: list[str]) -> None:
        """Beyond the budget too, so the curve shows where more fast storage stops paying: from nothing,
        add whichever of the objects with most of the device time predicts the best gain per byte, until
        they all are fast; then everything with I/O."""
        current = self.evaluate(frozenset())
        while True:
            outside = [n for n in major if n not in current.fast]
            if not outside:
                break
            steps = [self.evaluate(current.fast | {n}) for n in outside]
            current = max(steps, key=lambda o: ((o.speedup - current.speedup) / max(1, o.fast_bytes - current.fast_bytes),
                                                 o.speedup))
        self.evaluate(frozenset(active))


def _maximal(names: list[str], size: dict[str, int], capacity: int) -> list[frozenset]:
    """Every set of `names` that fits in `capacity` and to which none of the others can be added: the
    only ones that can be best, when an object moved to the faster device never slows the run (where
    it might, through a disk's layout, the refinement tries dropping each object)."""
    out = []
    for k in range(len(names), 0, -1):
        for combo in itertools.combinations(names, k):
            used = sum(size[n] for n in combo)
            if used <= capacity and all(used + size[n] > capacity for n in names if n not in combo):
                out.append(frozenset(combo))
    return out


def _knapsack(names: list[str], gain: dict[str, float], pairs: dict[tuple[str, str], float], size: dict[str, int],
              capacity: int, exclude: list[frozenset]) -> frozenset | None:
    """max sum gain_i x_i + sum pair_ij y_ij  s.t.  sum size_i x_i <= capacity, y_ij = x_i AND x_j,
    and none of the excluded answers again (a no-good cut each)."""
    n, pair_list = len(names), list(pairs)
    if not n:
        return None
    col = {nm: i for i, nm in enumerate(names)}
    nv = n + len(pair_list)
    c = np.zeros(nv)
    for nm, g in gain.items():
        c[col[nm]] = -g
    rows, lo, hi = [], [], []
    row = np.zeros(nv)
    row[:n] = [size[nm] for nm in names]
    rows.append(row), lo.append(-np.inf), hi.append(float(capacity))
    for k, (a, b) in enumerate(pair_list):
        c[n + k] = -pairs[(a, b)]
        for one in (a, b):  # y <= x_a, y <= x_b
            r = np.zeros(nv)
            r[n + k], r[col[one]] = 1, -1
            rows.append(r), lo.append(-np.inf), hi.append(0.0)
        r = np.zeros(nv)  # y >= x_a + x_b - 1
        r[n + k], r[col[a]], r[col[b]] = 1, -1, -1
        rows.append(r), lo.append(-1.0), hi.append(np.inf)
    for ex in exclude:
        r = np.zeros(nv)
        for nm in names:
            r[col[nm]] = 1 if nm in ex else -1
        rows.append(r), lo.append(-np.inf), hi.append(len(ex & set(names)) - 1.0)
    from scipy.optimize import Bounds, LinearConstraint, milp  # 0.7 s to import: only when the MILP runs

    res = milp(c, integrality=np.ones(nv), bounds=Bounds(0, 1),
               constraints=LinearConstraint(np.array(rows), np.array(lo), np.array(hi)))
    if res.status != 0 or res.x is None:
        return None
    return frozenset(nm for nm in names if res.x[col[nm]] > 0.5)
