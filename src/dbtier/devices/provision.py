"""Provisioned volumes: `-d data='ebs-gp3{iops=6000,mb_s=250,capacity_gb=400}'`.

A profile's `[provision]` table says what a buyer may set, in the units the vendor sells it (AWS:
GiB and MiB/s; the model's `capacity_gb` is 10^9 bytes and its `mb_s` 10^6 B/s), within the vendor's
limits and ratios (gp3: 3,000 to 80,000 IOPS, at most 500 per GiB; MiB/s at most a quarter of the
IOPS), and what follows from it (gp2's baseline is 3 IOPS per GiB). One entry per key:

    [provision.iops]
    unit = "IOPS"                   # as the vendor quotes it
    factor = 1                      # the model's unit per vendor unit (MiB/s -> 10^6 B/s: 1.048576)
    min = 3000
    max = 80000
    max_per = { capacity_gb = 500 } # at most 500 x the volume's GiB...
    ratio_floor = 3000              # ...or 3,000 at any size: the ratio binds above this
    derive = { mb_s = { per = 0.256, max = 4000, factor = 1.048576 } }  # sets another parameter
    source = "EBS"                  # the page the limits are from (the profile's [sources])

A derived parameter is `per` x the value, within `min`..`max`, or the `steps` ([[from, value], ...])
the value falls in, times its `factor`. A profile without a [provision] table takes any of its
kind's parameters in braces, in the model's own units (`hdd-sata-7200{write_cache=0}`); one sold as
it is says `provision = {}` (Azure's P20: choose another tier)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from dbtier.errors import UserError

#: NAME{key=value,...}: the braces close the spec (a folder follows a ':' after them)
BRACES = re.compile(r"^(?P<base>[^{}]+)\{(?P<body>[^{}]*)\}$")
ENTRY_KEYS = ("unit", "factor", "min", "max", "max_per", "ratio_floor", "derive", "source", "note")
DERIVE_KEYS = ("per", "min", "max", "steps", "factor")
QUOTE_HINT = ("quote it for the shell, which would split {a,b} in two: -d 'data=ebs-gp3{iops=6000,mb_s=250}'")


@dataclass(frozen=True)
class Entry:
    """What a buyer may set of one parameter."""
    key: str
    unit: str
    factor: float = 1.0
    min: float | None = None
    max: float | None = None
    max_per: dict[str, float] = field(default_factory=dict)
    ratio_floor: float = 0.0
    derive: dict[str, dict] = field(default_factory=dict)
    source: str = ""
    note: str = ""

    def vendor(self, model_value: float) -> float:
        """A model value in the vendor's unit (rounded to what a buyer would have typed)."""
        return round(model_value / self.factor, 6)

    def limits_text(self, units: dict[str, str] | None = None) -> str:
        """Its range and ratios; `units`: the other entries' units, to say "per GiB"."""
        lo = f"{self.min:,g}" if self.min is not None else ""
        hi = f"{self.max:,g}" if self.max is not None else ""
        span = f"{lo} to {hi} {self.unit}" if lo and hi else f"at least {lo} {self.unit}" if lo else \
            f"at most {hi} {self.unit}" if hi else self.unit
        floor = f" (or {self.ratio_floor:,g} at any size)" if self.ratio_floor else ""
        ratios = [f"at most {r:,g} per {(units or {}).get(other, other)}{floor}" for other, r in self.max_per.items()]
        return ", ".join([span, *ratios])


def split_list(text: str) -> list[str]:
    """A comma-separated list whose items may hold braces with commas of their own:
    'a=ebs-gp3{iops=6000,mb_s=250},b=nvme-gen4' -> ['a=ebs-gp3{iops=6000,mb_s=250}', 'b=nvme-gen4']."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "{") - (ch == "}")
        if ch == "," and depth <= 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [t.strip() for t in items if t.strip()]


def split(spec: str) -> tuple[str, dict[str, float] | None]:
    """'ebs-gp3{iops=6000,mb_s=250}' -> ('ebs-gp3', {'iops': 6000.0, 'mb_s': 250.0}); no braces: None."""
    if "{" not in spec and "}" not in spec:
        return spec, None
    m = BRACES.match(spec)
    if not m:
        raise UserError(f"device profile {spec!r}: write the settings as PROFILE{{key=value,...}}, for example "
                        "ebs-gp3{iops=6000,mb_s=250}")
    values: dict[str, float] = {}
    for item in filter(None, (t.strip() for t in m.group("body").split(","))):
        key, eq, text = item.partition("=")
        key = key.strip()
        if not eq or not key or not text.strip():
            raise UserError(f"device profile {spec!r}: {item!r} is not key=value (ebs-gp3{{iops=6000}})")
        try:
            number = float(text.replace("_", ""))
        except ValueError:
            raise UserError(f"device profile {spec!r}: {key}={text.strip()} is not a number") from None
        if not math.isfinite(number):
            raise UserError(f"device profile {spec!r}: {key}={text.strip()} is not a number")
        if key in values:
            raise UserError(f"device profile {spec!r}: {key} is set twice")
        values[key] = number
    if not values:
        raise UserError(f"device profile {spec!r}: nothing between the braces; give key=value, or no braces")
    return m.group("base").strip(), values


def table(doc, kind_params: set[str], source: str) -> dict[str, Entry] | None:
    """A profile's [provision] table, checked (`kind_params`: its kind's parameter names); None when it
    has none, {} when it says nothing may be set (a fixed tier: `provision = {}`)."""
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise UserError(f"{source}: [provision] must be a table of parameters")
    out = {}
    for key, raw in doc.items():
        where = f"{source}: [provision.{key}]"
        if key not in kind_params:
            raise UserError(f"{where}: not a parameter of this kind")
        if not isinstance(raw, dict):
            raise UserError(f"{where} must be a table (unit, min, max, ...)")
        stray = [k for k in raw if k not in ENTRY_KEYS]
        if stray:
            raise UserError(f"{where}: unknown key {stray[0]!r}; an entry has {', '.join(ENTRY_KEYS)}")
        unit, src, note = raw.get("unit", ""), raw.get("source", ""), raw.get("note", "")
        if not all(isinstance(t, str) and len(t) <= 300 for t in (unit, src, note)) or not unit:
            raise UserError(f"{where}: unit (required), source and note are short texts")
        factor = _positive(raw.get("factor", 1.0), f"{where} factor")
        lo = _number(raw.get("min"), f"{where} min") if "min" in raw else None
        hi = _number(raw.get("max"), f"{where} max") if "max" in raw else None
        if lo is not None and hi is not None and lo > hi:
            raise UserError(f"{where}: min {lo:g} is above max {hi:g}")
        max_per = raw.get("max_per", {})
        if not isinstance(max_per, dict) or not all(k in doc for k in max_per):
            raise UserError(f"{where}: max_per names other [provision] keys, each with a ratio")
        max_per = {k: _positive(v, f"{where} max_per.{k}") for k, v in max_per.items()}
        floor = _number(raw.get("ratio_floor", 0.0), f"{where} ratio_floor")
        derive = raw.get("derive", {})
        if not isinstance(derive, dict):
            raise UserError(f"{where}: derive is a table of parameters")
        for target, rule in derive.items():
            _check_rule(target, rule, kind_params, f"{where} derive.{target}")
        out[key] = Entry(key, unit, factor, lo, hi, max_per, floor, dict(derive), src, note)
    return out


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserError(f"{what} must be a number")
    return float(value)


def _positive(value, what: str) -> float:
    number = _number(value, what)
    if number <= 0:
        raise UserError(f"{what} must be above 0")
    return number


def _check_rule(target: str, rule, kind_params: set[str], where: str) -> None:
    if target not in kind_params:
        raise UserError(f"{where}: not a parameter of this kind")
    if not isinstance(rule, dict) or any(k not in DERIVE_KEYS for k in rule):
        raise UserError(f"{where}: a rule has {', '.join(DERIVE_KEYS)}")
    if ("per" in rule) == ("steps" in rule):
        raise UserError(f"{where}: give per (a ratio) or steps ([[from, value], ...]), one of them")
    for k in ("per", "min", "max", "factor"):
        if k in rule:
            _number(rule[k], f"{where} {k}")
    steps = rule.get("steps")
    if steps is not None:
        if not isinstance(steps, list) or not steps or not all(
                isinstance(s, list) and len(s) == 2 for s in steps):
            raise UserError(f"{where}: steps is a list of [from, value] pairs")
        froms = [_number(s[0], f"{where} steps") for s in steps]
        for s in steps:
            _number(s[1], f"{where} steps")
        if froms != sorted(froms):
            raise UserError(f"{where}: steps go from the smallest 'from' up")


def _derived(rule: dict, value: float) -> float:
    if "steps" in rule:
        out = next((v for at, v in reversed(rule["steps"]) if value >= at), rule["steps"][0][1])
    else:
        out = value * rule["per"]
        if "min" in rule:
            out = max(out, rule["min"])
        if "max" in rule:
            out = min(out, rule["max"])
    return out * rule.get("factor", 1.0)


def apply(name: str, kind: str, params: dict[str, float], entries: dict[str, Entry] | None, given: dict[str, float],
          spec: str) -> tuple[dict[str, float], str]:
    """The model's parameters with the buyer's settings applied and checked, and a summary of what was
    provisioned. Without entries (a profile with no [provision] table), `given` are model parameters."""
    out = dict(params)
    if entries is not None and not entries:
        raise UserError(f"device profile {spec!r}: {name} is sold as it is, nothing of it is provisioned; choose "
                        "another profile ('dbtier devices' lists them)")
    if entries is None:
        for key, value in given.items():
            if key not in params:
                raise UserError(f"device profile {spec!r}: {kind} devices have no parameter '{key}' "
                                f"('dbtier devices show {name}' lists them)")
            out[key] = value
        return out, ", ".join(f"{k}={v:g}" for k, v in given.items())
    stray = [k for k in given if k not in entries]
    if stray:
        raise UserError(f"device profile {spec!r}: {name} provisions {', '.join(entries)}, not {stray[0]} "
                        f"('dbtier devices show {name}' gives each one's unit and range)")
    vendor = {k: given.get(k, e.vendor(params[k])) for k, e in entries.items()}
    for key in given:
        e, v = entries[key], vendor[key]
        if (e.min is not None and v < e.min) or (e.max is not None and v > e.max):
            raise UserError(f"device profile {spec!r}: {key}={v:,g} is outside {name}'s "
                            f"{e.limits_text({k: x.unit for k, x in entries.items()})}")
    for key, e in entries.items():
        for other, ratio in e.max_per.items():
            if vendor[key] > max(e.ratio_floor, ratio * vendor[other]) * (1 + 1e-9):
                need = vendor[key] / ratio
                raise UserError(f"device profile {spec!r}: {key}={vendor[key]:,g} needs {other} of at least "
                                f"{math.ceil(need * 1000) / 1000:,g} {entries[other].unit} ({name}: at most {ratio:,g} "
                                f"{e.unit} per {entries[other].unit}); give {other}={math.ceil(need):g} or more")
    for key, e in entries.items():
        out[key] = vendor[key] * e.factor
    for key in entries:  # derived after every buyer's value is in: a derived one is never the buyer's
        for target, rule in entries[key].derive.items():
            if target not in given:
                out[target] = _derived(rule, vendor[key])
    if kind == "cloud":  # a burst no faster than the baseline is none (gp2 of 1,000 GiB and more)
        for burst, base, credits in (("burst_iops", "iops", "burst_credits"), ("burst_mb_s", "mb_s", "burst_mb")):
            if out.get(burst) and out[burst] <= out[base]:
                out[burst] = out[credits] = 0.0
    shown = ", ".join(f"{k}={vendor[k]:,g} {entries[k].unit}" for k in given)
    return out, shown
