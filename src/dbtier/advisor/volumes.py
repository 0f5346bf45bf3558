"""Which volumes to buy: for a recorded run, the offers of a priced catalogue, their provisioning
and the layout of the database's parts on them (data, indexes, the WAL, temp, on up to --volumes
volumes) that meet a performance target at the least monthly cost, or perform best under a cost.

The search (every answer it names is then predicted whole, never added up):
1. each part of the database a volume could hold on its own (and each set of parts), on each offer,
   climbed from the offer's least provisioning (its free baseline, its smallest size) one step at a
   time in IOPS, throughput or size, while a step predicts better: each prediction puts that volume
   on the offer and every other part on a reference device that holds nothing back (a RAM SAN), so
   it measures what that volume alone costs the run;
2. for every layout of the parts on at most --volumes volumes, every combination of each volume's
   best-value choices is estimated (each volume's cost to the run added to the reference's: a
   shortcut used only to order the search) and priced;
3. in price order (target) or estimated performance (--max-cost), combinations are predicted whole
   until one meets the target; the answers are those predicted whole;
4. with a target, the cheapest answer's provisioning is bisected down between its ladder's steps
   (which double), each value predicted whole, while it still meets the target."""

from __future__ import annotations

import itertools
import math
import re
import time
from dataclasses import dataclass

from dbtier import engines
from dbtier.advisor.candidates import Candidate, role_parts
from dbtier.advisor.catalog import Catalog, Offer
from dbtier.advisor.search import headline
from dbtier.devices import profile as profiles
from dbtier.devices.profile import Profile
from dbtier.errors import UserError
from dbtier.prediction import error as prediction_error
from dbtier.prediction.replay import Predictor
from dbtier.prediction.scenario import Scenario

#: the parts of a PostgreSQL database a volume holds, as --place names their roles (parts_for: any engine's)
PARTS = ("data", "indexes", "wal", "temp")


#: a catalogue's offers say what they may hold in PostgreSQL's words (data, indexes, wal, temp); InnoDB's
#: parts in those words: its logs are written as a WAL is, its undo tablespaces as data
CATALOG_ROLE = {"log": "wal", "binlog": "wal", "undo": "data"}


def parts_for(engine) -> tuple[str, ...]:
    """The parts a volume holds on this engine: data, the indexes where they have a role of their own
    (PostgreSQL's), and every other role a candidate names (the WAL or the redo log, undo, temp...)."""
    return ("data",) + ((engine.index_role,) if engine.index_role else ()) + role_parts(engine)


def _placement(engine, where: dict[str, str]):
    """Each role on its part's volume (a role no part names goes with data)."""
    return engine.make_placement({r: where.get(r, where["data"]) for r in engine.roles}, {})
#: a volume is sized this much above what its objects take at the end of the run: room to grow
HEADROOM = 1.25
#: a provisioning step is taken while it predicts at least this much better
STEP_GAIN = 0.02
MAX_STEPS = 8
#: combinations predicted whole, at most, before the search says what it reached
WHOLE_MAX = 12
#: the device every other part sits on while one volume is judged alone: memory that holds nothing back
REFERENCE = "ram-san{latency_us=1,interface_mb_s=100000,capacity_gb=100000}"
#: answers listed beside the advice
TOP = 5
#: figures this close are a tie (the replay's own spread is larger)
TIE = 0.01
#: a combination estimated this close to the target is predicted whole as if it met it
ESTIMATE_MARGIN = 0.05
#: --risk: the largest share of the predictor's measured errors under which an answer may miss the target
RISK = 0.10
#: the cheapest answer's provisioning is then bisected this many times per dimension, each step predicted
#: whole: the ladders double, so a step can overshoot by up to 2x; 4 halvings leave at most 1/16 of a step
REFINE_STEPS = 4


# -- the question -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """--target: elapsed<=SECONDS, tps>=N, tpm>=N, p99<=MS (p99[NAME]<=MS for one transaction type,
    script, or a replay's statement class: 'class 12')."""
    figure: str            # elapsed, tps, tpm, p99
    value: float           # seconds, per second, per minute, milliseconds
    script: str | None = None
    text: str = ""

    @property
    def higher(self) -> bool:
        return self.figure in ("tps", "tpm")

    def met(self, value: float | None) -> bool:
        if value is None:
            return False
        return value >= self.value if self.higher else value <= self.value * (1 + 1e-9)

    def describe(self, value: float) -> str:
        name = "p99" + (f" of {self.script}" if self.script else "") if self.figure == "p99" else \
            "elapsed" if self.figure == "elapsed" else ""
        return f"{name} {self.amount(value)}" if name else self.amount(value)

    def amount(self, value: float) -> str:
        """The figure with its unit, without its name (a range's ends, once the name is said)."""
        unit = {"elapsed": " s", "tps": " tps", "tpm": " tpm", "p99": " ms"}[self.figure]
        return f"{_digits(value, 3 if self.figure in ('elapsed', 'p99') else 4)}{unit}"


def _digits(value: float, significant: int) -> str:
    """A figure to a few significant digits, never in exponent form, trailing zeros kept so that its
    last digit says how exact it is (34,130 tps, 0.0736 s, 1.30 s)."""
    if abs(value) >= 10 ** (significant - 1):
        return f"{value:,.0f}"
    return f"{value:#,.{significant}g}".rstrip(".")  # 99.95 rounds to "100.": no point


_TARGET = re.compile(r"^\s*(?P<fig>elapsed|tps|tpm|p99)(?:\[(?P<script>[^\]]+)\])?\s*(?P<op><=|>=)\s*"
                     r"(?P<num>[0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*(?P<unit>ms|s|min|h)?\s*$", re.I)


def parse_target(text: str) -> Target:
    m = _TARGET.match(text or "")
    example = "elapsed<=120s, tps>=500, tpm>=20000, p99<=20ms or p99[payment]<=20ms"
    if not m:
        raise UserError(f"--target {text!r}: give a figure and a bound, for example {example}")
    fig, op, unit = m.group("fig").lower(), m.group("op"), (m.group("unit") or "").lower()
    value = float(m.group("num"))
    if (fig in ("tps", "tpm")) != (op == ">="):
        raise UserError(f"--target {text!r}: {fig} is " + ("a rate: ask for at least (>=)" if fig in ("tps", "tpm")
                                                            else "a time: ask for at most (<=)"))
    if fig == "elapsed":
        value *= {"": 1, "s": 1, "min": 60, "h": 3600}.get(unit, 0) or math.nan
    elif fig == "p99":
        value *= {"": 1, "ms": 1, "s": 1000}.get(unit, 0) or math.nan
    elif unit:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise UserError(f"--target {text!r}: the bound is a positive number in its figure's unit ({example})")
    if m.group("script") and fig != "p99":
        raise UserError(f"--target {text!r}: only p99 is per script (p99[payment]<=20ms)")
    return Target(fig, value, m.group("script"), text.strip())


def parse_duration(text: str | None) -> float | None:
    """--duration 24h, 90min, 3600s, 2d: seconds."""
    if text is None:
        return None
    m = re.match(r"^\s*([0-9]*\.?[0-9]+)\s*(s|min|h|d)?\s*$", text)
    if not m or not float(m.group(1)) > 0:
        raise UserError(f"--duration {text!r}: a length of time such as 24h, 90min or 2d")
    return float(m.group(1)) * {"s": 1, "min": 60, "h": 3600, "d": 86400}[m.group(2) or "s"]


def figure(target: Target | None, phases: list[dict], side: str = "predicted") -> float | None:
    """The target's figure of a prediction (or of the recorded run); with no target, the headline's."""
    if target is None or target.figure in ("elapsed", "tps", "tpm"):
        key, value, _higher = headline(phases, side)
        if target is None or target.figure == "elapsed":
            return value if target is None or key == "elapsed s" else sum(p[side]["elapsed_s"] for p in phases)
        return value if key == target.figure else None
    worst = None
    for ph in phases:
        for script, lat in (ph.get("latency") or {}).items():
            if target.script is None or script == target.script:
                v = lat[side].get("p99_ms")
                if v is not None:
                    worst = v if worst is None else max(worst, v)
    return worst


def current_scenario(rec, credits: float | None = None) -> Scenario:
    """The recorded layout, its devices given again as devices of their own (cur_NAME): predicted as
    every answer is, with no device keeping what the live run's own timing added to it."""
    devices = list(rec.lab.devices) + [(f"cur_{n}", p) for n, p in rec.lab.devices]
    placed = rec.lab.placement
    engine = engines.get(rec.lab.engine)
    roles = {r: f"cur_{placed.get(r, placed['data'])}" for r in engine.roles}
    objects = {o: f"cur_{d}" for o, d in (placed.get("objects") or {}).items()}
    return Scenario(devices, engine.make_placement(roles, objects), credits=credits)


def measured_figure(target: Target | None, run: dict) -> float | None:
    """The target's figure of a live run (advise --verify): its headline, or the p99 of its scripts."""
    if target is None or target.figure != "p99":
        if target is not None and target.figure == "elapsed":
            return run["elapsed_s"]
        return run["measured"] if target is None or run["metric"] == target.figure else None
    p99 = [v.get("p99_ms") for name, v in (run.get("scripts") or {}).items()
           if target.script is None or name == target.script]
    p99 = [v for v in p99 if isinstance(v, (int, float))]
    return max(p99) if p99 else None


def check_target(target: Target | None, predictor: Predictor, rec, credits: float | None = None) -> float:
    """The figure the advice is judged by, predicted for the recorded layout (what the saving is
    measured against); a target on a figure the run does not have is refused."""
    pred = predictor.predict(current_scenario(rec, credits), figures=False,
                             latency=target is not None and target.figure == "p99")
    value = figure(target, pred.phases)
    if value is None:
        if target.figure == "p99":
            scripts = sorted({s for ph in pred.phases for s in (ph.get("latency") or {})})
            what = (f"no transaction named {target.script} (it has {', '.join(scripts)})" if target.script and scripts
                    else "no transactions whose latency was recorded (oltp and pgbench runs have them)")
            raise UserError(f"--target {target.text}: the run has {what}")
        raise UserError(f"--target {target.text}: the run has no {target.figure} (a one-phase oltp or pgbench run "
                        "does); ask for elapsed<=SECONDS")
    return value


# -- what is bought -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Choice:
    """One volume: an offer provisioned."""
    offer: Offer
    vendor: tuple[tuple[str, float], ...]   # provision key -> value, vendor units (or the model's GB)
    cost: float                             # a month

    @property
    def spec(self) -> str:
        base = self.offer.ref or self.offer.profile.name
        if self.offer.fixed:
            return base
        return base + "{" + ",".join(f"{k}={_num(v)}" for k, v in self.vendor) + "}"

    def profile(self) -> Profile:
        return profiles.load(self.spec)

    def describe(self) -> str:
        if self.offer.fixed:
            return self.offer.name
        units = {k: e.unit for k, e in self.offer.provisionable.items()}
        return f"{self.offer.name} " + ", ".join(f"{_num(v)} {units.get(k, 'GB')}" for k, v in self.vendor)


def _num(v: float) -> str:
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:g}"


def _ladder(lo: float, hi: float) -> list[float]:
    out, v = [], lo
    while v < hi:
        out.append(v)
        v *= 2
    return out + [hi]


class Volume:
    """What one offer can be bought as for a volume holding `need` bytes: its provisioning steps."""

    def __init__(self, offer: Offer, need_bytes: int):
        self.offer = offer
        entries = offer.provisionable
        if offer.fixed:
            self.dims: dict[str, list[float]] = {}
            self.base: dict[str, float] = {}
            return
        if not entries:  # priced by its size in the model's GB (a drive bought outright)
            self.dims, self.base = {}, {"capacity_gb": math.ceil(need_bytes / 1e9)}
            return
        size = entries["capacity_gb"]
        gib = max(math.ceil(need_bytes / (size.factor * 1e9)), size.min or 1)
        derived = {t for e in entries.values() for t in e.derive}
        self.base = {k: e.vendor(offer.profile.params[k]) if k != "capacity_gb" else gib for k, e in entries.items()}
        for k, e in entries.items():  # the least provisioning: the free baseline, or the offer's least
            if k != "capacity_gb" and e.min is not None:
                self.base[k] = max(e.min, next(iter([p.free for kk, p in offer.prices.items() if kk == k]), 0.0))
        self.dims = {k: _ladder(self.base[k], e.max) for k, e in entries.items()
                     if k != "capacity_gb" and k not in derived and e.max is not None}
        if any(e.derive for e in entries.values()) and "capacity_gb" in entries and not self.dims:
            self.dims = {"capacity_gb": _ladder(gib, size.max)}  # gp2, st1, pd-ssd: speed grows with size

    def fits(self, need_bytes: int) -> bool:
        if self.offer.fixed:
            return self.offer.profile.params["capacity_gb"] * 1e9 >= need_bytes
        return True

    def choice(self, levels: dict[str, int]) -> Choice | None:
        """The offer at these steps of its ladders, raised where a ratio needs it; None past a limit."""
        want = dict(self.base)
        for k, i in levels.items():
            if i >= len(self.dims[k]):
                return None
            want[k] = self.dims[k][i]
        return self.choice_at(want)

    def choice_at(self, want: dict[str, float]) -> Choice | None:
        """The offer provisioned so (vendor units), raised where a ratio needs it; None past a limit."""
        want = dict(want)
        entries = self.offer.provisionable
        for _ in range(3):  # what a ratio needs: more IOPS for the throughput, more GiB for the IOPS
            for k, e in entries.items():
                for other, ratio in e.max_per.items():
                    if want[k] > max(e.ratio_floor, ratio * want[other]):
                        want[other] = math.ceil(want[k] / ratio)
        for k, e in entries.items():
            if e.max is not None and want[k] > e.max:
                return None
        vendor = tuple((k, float(want[k])) for k in (entries or want))
        try:
            cost = self.offer.monthly(dict(vendor))
        except KeyError:
            return None
        return Choice(self.offer, vendor if not self.offer.fixed else (), cost)


# -- the search ---------------------------------------------------------------------------------------

def parts_of(cands: list[Candidate], engine=None) -> dict[str, dict]:
    """Each part's bytes and whether the run's I/O reached it: a part the run never touched goes with data."""
    engine = engine or engines.get("postgres")
    parts, roles = parts_for(engine), role_parts(engine)
    out = {p: {"bytes": 0, "active": False, "device_s": 0.0} for p in parts}
    for c in cands:
        part = out[engine.index_role if c.kind == "index" else c.name if c.name in roles else "data"]
        part["bytes"] += c.bytes
        part["active"] |= c.active
        part["device_s"] += c.device_s
    for p in parts[1:]:
        if not out[p]["active"]:
            out["data"]["bytes"] += out[p]["bytes"]
            del out[p]
    return out


def layouts(parts: list[str], most: int) -> list[tuple[frozenset, ...]]:
    """Every way to put the parts on at most `most` volumes (set partitions), data's volume first."""
    out: list[list[set]] = [[]]
    for p in parts:
        nxt = []
        for blocks in out:
            for i in range(len(blocks)):
                nxt.append([b | {p} if j == i else b for j, b in enumerate(blocks)])
            if len(blocks) < most:
                nxt.append(blocks + [{p}])
        out = nxt
    return [tuple(frozenset(b) for b in sorted(blocks, key=lambda b: "data" not in b)) for blocks in out]


def volume_name(block: frozenset, taken: frozenset = frozenset(), parts: tuple[str, ...] = PARTS) -> str:
    """A volume named by the parts it holds (data_wal), never as a device of the recorded run is: a
    migration moves from one to the other."""
    name = "_".join(p for p in parts if p in block)
    return f"new_{name}" if name in taken else name


@dataclass
class Answer:
    layout: tuple[frozenset, ...]
    choices: tuple[Choice, ...]
    cost: float
    estimate: float | None = None
    value: float | None = None      # predicted whole
    met: bool | None = None         # the prediction meets the target
    taken: frozenset = frozenset()  # the recorded run's device names
    interval: tuple[float, float] | None = None  # the live figure it likely stands for (the measured error)
    risk: float | None = None       # the share of the measured errors under which it misses the target
    max_risk: float = RISK
    engine: object = None           # the run's (PostgreSQL's if None)

    @property
    def parts(self) -> tuple[str, ...]:
        return parts_for(self.engine or engines.get("postgres"))

    @property
    def safe(self) -> bool:
        """Predicted to meet the target, and missing it under few enough of the measured errors."""
        return bool(self.met) and self.risk is not None and self.risk <= self.max_risk

    def name(self, block: frozenset) -> str:
        return volume_name(block, self.taken, self.parts)

    def devices(self) -> list[tuple[str, str]]:
        return [(self.name(b), c.spec) for b, c in zip(self.layout, self.choices)]

    def volumes(self) -> list[tuple[str, Choice]]:
        return [(self.name(b), c) for b, c in zip(self.layout, self.choices)]

    def placement(self):
        return _placement(self.engine or engines.get("postgres"), {p: self.name(b) for b in self.layout for p in b})

    def place_text(self) -> str:
        """--place, as short as it can be said: data's volume, then each part elsewhere."""
        where = {p: self.name(b) for b in self.layout for p in b}
        data = where["data"]
        return ",".join([f"data={data}"] + [f"{p}={where[p]}" for p in self.parts[1:] if where.get(p, data) != data])

    def device_args(self) -> str:
        return " ".join(f"-d '{n}={s}'" if "{" in s else f"-d {n}={s}" for n, s in self.devices())


class VolumeSearch:
    def __init__(self, predictor: Predictor, rec, catalog: Catalog, target: Target | None, max_cost: float | None,
                 most: int, credits: float | None, progress=lambda _n, _what: None, max_risk: float = RISK):
        self.predictor, self.rec, self.catalog = predictor, rec, catalog
        self.engine = engines.get(rec.lab.engine)
        self.parts = parts_for(self.engine)
        self.max_risk = max_risk
        self.target, self.max_cost, self.most, self.credits = target, max_cost, most, credits
        self.progress = progress
        self.predictions = 0
        self.alone: dict[tuple[frozenset, str], list[tuple[Choice, float]]] = {}
        self.whole: list[Answer] = []
        self.recorded = [(n, p) for n, p in rec.lab.devices]
        self.taken = frozenset(n for n, _p in self.recorded)
        metric, _value, higher = headline([{"recorded": p} for p in rec.phases], "recorded")
        self.higher = target.higher if target else higher  # a p99 target on a tps run: lower is better
        self.errors = prediction_error.for_figure(target.figure if target else metric.split()[0])

    # one prediction
    def predict(self, volumes: list[tuple[str, Profile]], where: dict[str, str]) -> float | None:
        names = [n for n, _ in self.recorded]
        devices = list(self.recorded) + [(n, p) for n, p in volumes if n not in names]
        devices = [(n, dict(volumes).get(n, p)) for n, p in devices]
        scenario = Scenario(devices, _placement(self.engine, where), credits=self.credits)
        latency = self.target is not None and self.target.figure == "p99"
        pred = self.predictor.predict(scenario, figures=False, latency=latency)
        self.predictions += 1
        return figure(self.target, pred.phases)

    def _worse(self, a: float | None, b: float | None) -> bool:
        """a is worse than b (None: no figure, worst)."""
        if a is None:
            return True
        if b is None:
            return False
        return a < b if self.higher else a > b

    def _gain(self, new: float, old: float) -> float:
        return (new - old) / old if self.higher else (old - new) / old

    def judge_alone(self, block: frozenset, need: int) -> list[tuple[Choice, float]]:
        """This volume on each offer, climbed step by step, every other part on the reference."""
        key = (block, "")
        if key in self.alone:
            return self.alone[key]
        ref = profiles.load(REFERENCE)
        name = volume_name(block, self.taken, self.parts)
        where = {p: (name if p in block else "dbtier_ref") for p in self.parts}
        out = []
        for offer in self.catalog.priced():
            if offer.roles and not {CATALOG_ROLE.get(p, p) for p in block} <= set(offer.roles):
                continue
            vol = Volume(offer, need)
            if not vol.fits(need):
                continue
            levels = {k: 0 for k in vol.dims}
            current = vol.choice(levels)
            if current is None:
                continue

            def judged(c: Choice) -> float | None:  # the volume on this choice, the rest on the reference
                v = self.predict([(name, c.profile()), ("dbtier_ref", ref)], where)
                out.append((c, v))
                self.progress(self.predictions, f"{name} on {c.describe()}")
                return v

            value = judged(current)
            for _ in range(MAX_STEPS):
                best = None
                for k in vol.dims:
                    step = {**levels, k: levels[k] + 1}
                    c = vol.choice(step)
                    if c is None:
                        continue
                    v = judged(c)
                    if v is not None and value is not None and self._gain(v, value) >= STEP_GAIN and (
                            best is None or self._gain(v, value) / max(c.cost - current.cost, 1e-6)
                            > self._gain(best[2], value) / max(best[1].cost - current.cost, 1e-6)):
                        best = (step, c, v)
                if best is None:
                    break
                levels, current, value = best
        self.alone[key] = _pareto(out, self.higher)
        return self.alone[key]

    def run(self, parts: dict[str, dict]) -> dict:
        started = time.perf_counter()
        ref = profiles.load(REFERENCE)
        names = list(parts)
        self.reference = self.predict([("dbtier_ref", ref)], {p: "dbtier_ref" for p in self.parts})
        candidates: list[Answer] = []
        for layout in layouts(names, self.most):
            options = []
            for block in layout:
                need = int(sum(parts[p]["bytes"] for p in block) * HEADROOM)
                options.append(self.judge_alone(block, need))
            if any(not o for o in options):
                continue
            for combo in itertools.product(*options):
                cost = sum(c.cost for c, _v in combo)
                if self.max_cost is not None and cost > self.max_cost:
                    continue
                candidates.append(Answer(layout, tuple(c for c, _v in combo), cost, self._estimate([v for _c, v in combo]),
                                         taken=self.taken, engine=self.engine))
        if not candidates:
            return {"seconds": time.perf_counter() - started}
        sign = -1 if self.higher else 1
        if self.target is not None:  # those estimated to meet it (or nearly) cheapest first, then the closest to it
            order = sorted(candidates, key=lambda a: (
                (0, a.cost, len(a.layout)) if self._near(a.estimate) else (1, sign * (a.estimate or 0), a.cost)))
        else:
            order = sorted(candidates, key=lambda a: (sign * (a.estimate or 0), a.cost))
        seen = set()
        for a in order:
            if len(self.whole) >= WHOLE_MAX:
                break
            key = (a.layout, tuple(c.spec for c in a.choices))
            if key in seen:
                continue
            seen.add(key)
            self._whole(a)
            if self.target is not None and sum(1 for w in self.whole if w.safe) >= TOP:
                break
        if self.target is not None:
            self.refine(parts)
        return {"seconds": time.perf_counter() - started, "combinations": len(candidates)}

    def _whole(self, a: Answer) -> Answer:
        """The answer predicted whole, judged against the target, and kept."""
        a.value = self.predict([(a.name(b), c.profile()) for b, c in zip(a.layout, a.choices)],
                               {p: a.name(b) for b in a.layout for p in b})
        a.met = self.target.met(a.value) if self.target else None
        if a.value is not None:
            a.interval = self.errors.interval(a.value)
            if self.target is not None:
                a.risk = self.errors.misses(a.value, self.target.met) / self.errors.cases
                a.max_risk = self.max_risk
        self.whole.append(a)
        self.progress(self.predictions, a.place_text())
        return a

    def refine(self, parts: dict[str, dict]) -> None:
        """The cheapest safe answer's provisioning bisected down, dimension by dimension: its ladder's
        doubling steps can overshoot the least that meets the target by up to twice. Each lower value
        is predicted whole and kept while it still meets the target within the risk."""
        safe = [a for a in self.whole if a.safe]
        if not safe:
            return
        best = min(safe, key=lambda a: a.cost)
        for i, block in enumerate(best.layout):
            need = int(sum(parts[p]["bytes"] for p in block) * HEADROOM)
            vol = Volume(best.choices[i].offer, need)
            for k in vol.dims:
                hi = dict(best.choices[i].vendor)[k]
                lo = vol.base[k]
                for _ in range(REFINE_STEPS):
                    mid = math.ceil((lo + hi) / 2)
                    if not lo < mid < hi:
                        break
                    c = vol.choice_at({**dict(best.choices[i].vendor), k: mid})
                    if c is None or c.cost >= best.choices[i].cost:
                        lo = mid
                        continue
                    choices = best.choices[:i] + (c,) + best.choices[i + 1:]
                    a = self._whole(Answer(best.layout, choices, sum(x.cost for x in choices), taken=self.taken,
                                           engine=self.engine))
                    if a.safe:
                        best, hi = a, mid
                    else:
                        lo = mid

    def _near(self, estimate: float | None) -> bool:
        """Estimated to meet the target, or within ESTIMATE_MARGIN of it: the estimate only orders the
        search, and adding each volume's cost up is off by a few % (the whole prediction decides)."""
        if estimate is None:
            return False
        t = self.target
        return estimate >= t.value * (1 - ESTIMATE_MARGIN) if t.higher else estimate <= t.value * (1 + ESTIMATE_MARGIN)

    def _estimate(self, values: list[float | None]) -> float | None:
        """The reference's figure plus what each volume alone cost it (in time per unit of work)."""
        if self.reference is None or any(v is None for v in values):
            return None
        if self.higher:
            per = 1 / self.reference + sum(1 / v - 1 / self.reference for v in values)
            return 1 / per if per > 0 else None
        return self.reference + sum(v - self.reference for v in values)

    def ranked(self) -> list[Answer]:
        """The answers predicted whole: those meeting the target within the risk cheapest first, then
        those meeting it at a greater risk (least risk first), then the rest, best first; with
        --max-cost, the best performance first."""
        if self.target is not None:
            sign = -1 if self.higher else 1
            return sorted(self.whole, key=lambda a: (0, a.cost) if a.safe else (1, a.risk, a.cost) if a.met
                          else (2, sign * (a.value or 0)))
        sign = -1 if self.higher else 1
        return sorted(self.whole, key=lambda a: (a.value is None, sign * (a.value or 0), a.cost))


def _pareto(options: list[tuple[Choice, float | None]], higher: bool) -> list[tuple[Choice, float | None]]:
    """The choices no other beats on both price and figure (ties: the cheaper)."""
    seen, out = set(), []
    ranked = sorted((o for o in options if o[1] is not None), key=lambda o: (o[0].cost, -o[1] if higher else o[1]))
    best = None
    for c, v in ranked:
        if c.spec in seen:
            continue
        seen.add(c.spec)
        if best is None or (v > best if higher else v < best):
            out.append((c, v))
            best = v
    return out


# -- the current layout's price -----------------------------------------------------------------------

def price_of(profile: Profile, catalog: Catalog) -> Choice | None:
    """The recorded device priced from the catalogue, when it is one of its offers' profiles."""
    base = profile.name.split("{")[0]
    for offer in catalog.priced():
        if offer.profile.name != base and offer.ref != base:
            continue
        entries = offer.provisionable
        if offer.fixed:
            return Choice(offer, (), offer.monthly({}))
        if not entries:
            vendor = (("capacity_gb", float(math.ceil(profile.params["capacity_gb"]))),)
        else:
            vendor = tuple((k, round(e.vendor(profile.params[k]))) for k, e in entries.items())
        try:
            return Choice(offer, vendor, offer.monthly(dict(vendor)))
        except KeyError:
            return None
    return None



def _answer_doc(a: Answer, current_cost: float | None, parts: dict) -> dict:
    return {"volumes": [{"name": a.name(b), "parts": [p for p in a.parts if p in b],
                         "bytes": sum(parts[p]["bytes"] for p in b if p in parts),
                         "offer": c.offer.name, "spec": c.spec, "provisioned": c.describe(), "monthly": c.cost}
                        for b, c in zip(a.layout, a.choices)],
            "cost": a.cost, "saving": current_cost - a.cost if current_cost is not None else None,
            "value": a.value, "estimate": a.estimate, "met": a.met, "place": a.place_text(),
            "interval": list(a.interval) if a.interval else None, "risk": a.risk,
            "devices": a.device_args()}


def _bursts(a: Answer) -> list[tuple[str, Choice, dict]]:
    out = []
    for b, c in zip(a.layout, a.choices):
        p = c.profile().params
        if p.get("burst_iops") or p.get("burst_mb_s"):
            out.append((a.name(b), c, p))
    return out


def sustained(search: VolumeSearch, a: Answer, duration_s: float) -> list[str]:
    """Whether each bursting volume's credits last `duration_s` at the run's demand, and what the run
    does once they are spent: two predictions of the answer, with its buckets full and empty."""
    bursting = _bursts(a)
    if not bursting:
        return []
    volumes = [(a.name(b), c.profile()) for b, c in zip(a.layout, a.choices)]
    where = {p: a.name(b) for b in a.layout for p in b}
    names = [n for n, _ in search.recorded]
    devices = list(search.recorded) + [(n, p) for n, p in volumes if n not in names]
    devices = [(n, dict(volumes).get(n, p)) for n, p in devices]
    full = search.predictor.predict(Scenario(devices, _placement(search.engine, where), credits=1.0))
    search.predictions += 1
    value_empty = a.value  # the search judged it with the credits spent
    value_full = figure(search.target, full.phases)
    out = []
    elapsed = sum(ph["predicted"]["elapsed_s"] for ph in full.phases)
    fig = search.target.describe if search.target else (lambda v: _digits(v, 4))

    def demand(name: str, keys: tuple[str, str]) -> float:  # the run's average on this volume, per second
        done = sum((d["iostat"][keys[0]] + d["iostat"][keys[1]]) * ph["predicted"]["elapsed_s"]
                   for ph in full.phases for d in ph["predicted"]["devices"] if d["device"] == name)
        return done / elapsed if elapsed > 0 else 0.0

    for name, c, p in bursting:
        what = f"{name} ({c.describe()})"
        # (the baseline, the burst, the bucket, the run's demand, the unit): I/O credits, then throughput's
        buckets = [(p["iops"], p.get("burst_iops") or 0, p.get("burst_credits") or 0, demand(name, ("r/s", "w/s")),
                    "IOPS", "credits"),
                   (p["mb_s"], p.get("burst_mb_s") or 0, p.get("burst_mb") or 0, demand(name, ("rMB/s", "wMB/s")),
                    "MB/s", "throughput credits")]
        for base, burst, bucket, need, unit, credits in buckets:
            if not burst or not bucket:
                continue
            if need <= base:
                out.append(f"{what}: at this run's {need:,.0f} {unit} it stays within its {base:,.0f}-{unit} baseline; "
                           f"its {credits} are never spent")
                continue
            lasts = bucket / (min(need, burst) - base)
            if lasts >= duration_s:
                out.append(f"{what}: its burst {credits} last {_span(lasts)} at this run's {need:,.0f} {unit}, past "
                           f"the {_span(duration_s)} asked")
                continue
            out.append(f"{what}: {min(need, burst):,.0f} {unit} for {_span(lasts)}, then {base:,.0f}: "
                       f"{fig(value_full)} becomes {fig(value_empty)} with its {credits} spent")
    return out


def _span(seconds: float) -> str:
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:,.1f} hours"
    if seconds >= 120:
        return f"{seconds / 60:,.0f} minutes"
    return f"{seconds:,.0f} s"


def advise(rec, catalog: Catalog, target: Target | None, max_cost: float | None, most: int = 3,
           duration_s: float | None = None, workspace=None, progress=lambda _n, _what: None,
           max_risk: float = RISK) -> tuple[dict, list]:
    """The advice as a result document, and its answers (Answer) best first."""
    from dbtier.advisor.candidates import candidates as find_candidates

    started = time.perf_counter()
    if target is None and max_cost is None:
        raise UserError("--catalog: give --target (the performance to reach at least cost) or --max-cost (the most "
                        "to spend a month)")
    if max_cost is not None and not (max_cost > 0 and math.isfinite(max_cost)):
        raise UserError(f"--max-cost {max_cost:g}: give the most to spend a month, above 0")
    if not 0 <= max_risk < 1:
        raise UserError(f"--risk {max_risk:g}: the share of the predictor's measured errors an answer may miss "
                        "the target under, from 0 to below 1 (0.1: one in ten)")
    parts_named = parts_for(engines.get(rec.lab.engine))
    if not 1 <= most <= len(parts_named):
        raise UserError(f"--volumes {most}: from 1 to {len(parts_named)} ({', '.join(parts_named)} each on its own)")
    if not catalog.priced():
        raise UserError(f"catalogue {catalog.name}: no offer has a price; give prices in a catalogue of your own")
    predictor = Predictor(rec, workspace)
    elapsed = sum(p["elapsed_s"] for p in rec.phases)
    sustained_run = duration_s is not None and duration_s > elapsed
    current_value = check_target(target, predictor, rec, 0.0 if sustained_run else None)
    search = VolumeSearch(predictor, rec, catalog, target, max_cost, most, 0.0 if sustained_run else None, progress,
                          max_risk)
    parts = parts_of(find_candidates(rec), engines.get(rec.lab.engine))
    info = search.run(parts)
    ranked = search.ranked()
    current = [(n, p, price_of(p, catalog)) for n, p in rec.lab.devices]
    current_cost = sum(c.cost for _n, _p, c in current) if all(c for _n, _p, c in current) else None
    meeting = [a for a in ranked if a.safe] if target is not None else ranked
    risky = not meeting and target is not None and any(a.met for a in ranked)
    if risky:  # predicted to meet it, each at a greater risk than asked: the least risky, said so
        meeting = [a for a in ranked if a.met]
    if not meeting:
        sign = -1 if search.higher else 1
        best = min((a for a in ranked if a.value is not None), key=lambda a: (sign * a.value, a.cost), default=None)
        reach = (f"the best predicted: {target.describe(best.value)} for ${best.cost:,.2f} a month ({best.place_text()})"
                 if best and best.value is not None else "no layout could be predicted")
        if max_cost is not None and not ranked:
            raise UserError(f"--max-cost {max_cost:g}: nothing in catalogue {catalog.name} fits the run's "
                            f"{_gib(sum(p['bytes'] for p in parts.values()))} for that")
        raise UserError(f"--target {target.text}: no layout of catalogue {catalog.name} meets it at any price searched; "
                        f"{reach}")
    rec_answer = meeting[0]
    metric = headline([{"recorded": p} for p in rec.phases], "recorded")[0]
    fig = target.describe if target else (lambda v: f"{_digits(v, 4)} {metric}")
    if target is not None:
        if current_cost is not None and target.met(current_value) and rec_answer.cost < current_cost:
            finding = (f"Over-provisioned: {fig(rec_answer.value)} (the target: {target.text}) for "
                       f"${current_cost - rec_answer.cost:,.2f} less a month than the recorded layout's "
                       f"${current_cost:,.2f}")
        elif not target.met(current_value):
            diff = rec_answer.cost - current_cost if current_cost is not None else None
            finding = (f"The recorded layout misses {target.text} ({fig(current_value)}); this meets it for "
                       f"${rec_answer.cost:,.2f} a month" + (
                           "" if diff is None else f", ${abs(diff):,.2f} {'more' if diff > 0 else 'less'} than the "
                                                   f"recorded layout's ${current_cost:,.2f}"))
        else:
            finding = f"The least that meets {target.text}: ${rec_answer.cost:,.2f} a month, {fig(rec_answer.value)}"
    else:
        finding = f"The best at or under ${max_cost:,.2f} a month: {fig(rec_answer.value)} for ${rec_answer.cost:,.2f}"
    if rec_answer.interval:
        lo, hi = rec_answer.interval
        amount = target.amount if target else fig
        finding += f" (live, likely {amount(lo)} to {amount(hi)}"
        finding += (")" if target is None else
                    "; it meets the target under every one of the predictor's measured errors)" if not rec_answer.risk
                    else f"; it misses the target under {rec_answer.risk:.0%} of the predictor's measured errors)")
    if risky:
        finding += (f". Every answer predicted to meet {target.text} misses it under more than {max_risk:.0%} of the "
                    f"predictor's measured errors: give --risk {rec_answer.risk:.2f} to accept this one, or a looser target")
    notes = [f"each volume is sized {HEADROOM - 1:.0%} above what its parts took at the end of the run, for growth",
             f"'likely live' is the range a prediction stood for under the predictor's measured error ({search.errors.about}), "
             f"its {prediction_error.TAIL:.0%} extremes left out each side"
             + (f"; an answer is taken when fewer than {max_risk:.0%} of those errors would make it miss the target"
                if target is not None else ""),
             "prices are the catalogue's, read " + catalog.read + f" ({catalog.region}); 'dbtier catalog "
             + catalog.name + "' gives each one's source"]
    if not sustained_run and any(_bursts(a) for a in [rec_answer, *meeting[1:TOP + 1]]):
        notes.append(f"a volume that bursts on credits is judged over this run's {elapsed:,.0f} s, with them full "
                     "at its start: give --duration (24h) for the load production sustains")
    if sustained_run:
        notes.append(f"--duration {_span(duration_s)} is longer than the run ({elapsed:,.0f} s): every volume that "
                     "bursts was judged with its burst credits spent")
        notes += sustained(search, rec_answer, duration_s)
    curve, best_value = [], None
    for a in sorted((a for a in ranked if a.value is not None), key=lambda a: a.cost):
        if best_value is None or search._gain(a.value, best_value) > TIE:
            curve.append({"cost": a.cost, "value": a.value, "place": a.place_text(), "devices": a.device_args(),
                          "volumes": "; ".join(f"{a.name(b)}: {c.describe()}" for b, c in zip(a.layout, a.choices))})
            best_value = a.value
    doc = {
        "kind": "volume-advice", "run_dir": str(rec.run_dir), "workload": rec.result.get("workload"),
        "catalog": {"name": catalog.name, "title": catalog.title, "region": catalog.region, "read": catalog.read,
                    "currency": catalog.currency},
        "target": {"text": target.text, "figure": target.figure, "value": target.value, "script": target.script}
        if target else None,
        "max_cost": max_cost, "volumes_most": most, "duration_s": duration_s, "max_risk": max_risk,
        "error": {"about": search.errors.about, "cases": search.errors.cases, "figure": search.errors.figure},
        "higher_is_better": search.higher,
        "metric": headline([{"recorded": p} for p in rec.phases], "recorded")[0] if target is None else target.figure,
        "current": {"devices": [{"name": n, "profile": p.name, "monthly": c.cost if c else None} for n, p, c in current],
                    "cost": current_cost, "value": current_value,
                    "met": target.met(current_value) if target else None},
        "finding": finding,
        "recommended": _answer_doc(rec_answer, current_cost, parts),
        "alternatives": [_answer_doc(a, current_cost, parts) for a in (meeting[1:TOP + 1])],
        "curve": curve,
        "parts": parts,
        "search": {"predictions": search.predictions, "seconds": time.perf_counter() - started,
                   "combinations": info.get("combinations", 0), "predicted_whole": len(search.whole),
                   "answers": [{"cost": a.cost, "value": a.value, "met": a.met, "risk": a.risk, "place": a.place_text()}
                               for a in ranked],
                   "method": "each part's volume judged alone on each offer, climbed step by step in IOPS, "
                             "throughput or size; every layout on at most "
                             f"{most} volumes combined from those choices, estimated, priced; the best "
                             f"{len(search.whole)} predicted whole"},
        "notes": notes,
    }
    return doc, meeting


def _gib(n: float) -> str:
    return f"{n / (1 << 30):,.1f} GiB"
