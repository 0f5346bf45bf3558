"""The answer first: each report opens with one or two plain sentences and their numbers, drawn from
the result document alone (the tests check every number in them against it)."""

from __future__ import annotations

import math

from dbtier.crash import safety
from dbtier.measure import limits
from dbtier.report.terminal import fmt


def _busiest(devices: list[dict]) -> dict | None:
    """The device that was busy longest: the one the run waited on."""
    return max(devices, key=lambda d: d["iostat"].get("%util") or 0.0, default=None)


#: (operation, iostat rate, iostat latency): a device's time is rate x latency of each
_OPERATIONS = (("reads", "r/s", "r_await"), ("writes", "w/s", "w_await"), ("flushes", "f/s", "f_await"))


def _device_clause(dev: dict) -> str:
    """What the device did, by the operations that took its time: the one that took most, and any
    other that took at least a fifth of it (an OLTP log device is busy with its flushes, not its
    fast cached writes)."""
    io = dev["iostat"]
    spent = [(io.get(rate) or 0.0) * (io.get(lat) or 0.0) for _, rate, lat in _OPERATIONS]
    ops = sorted((i for i in range(len(_OPERATIONS)) if (io.get(_OPERATIONS[i][1]) or 0.0) > 0),
                 key=lambda i: -spent[i])
    ops = [i for i in ops if spent[i] >= 0.2 * spent[ops[0]]] if ops else []
    what = " and ".join(f"{fmt(io[rate])} {name}/s at {fmt(io[lat])} ms each"
                        for name, rate, lat in (_OPERATIONS[i] for i in ops)) or "no reads or writes"
    return f"{dev['device']} ({dev['profile']}) served {what}, busy {fmt(io['%util'])}% of the time"


#: a limit that held a device's requests for less than this share of the time is not worth a sentence
LIMIT_MENTION_PCT = 5.0


def _limit_clause(dev: dict) -> str | None:
    """The provisioned limit that held a volume longest, in a DBA's words; None when none held it for
    long (measure/limits.py)."""
    held = dev.get("limits") or []
    if not held or held[0]["held_pct"] < LIMIT_MENTION_PCT:
        return None
    top = held[0]
    rate = f"{fmt(top['rate'])}-{top['unit']}" if top["unit"] == "IOPS" else f"{fmt(top['rate'])} {top['unit']}"
    return (f"the volume {dev['device']} was limited by its {rate} {limits.RATES[top['limit']][3]} for {fmt(top['held_pct'])}% "
            f"of the time ({top['requests']:,} requests waited on it)")


def _throughput(result: dict) -> str:
    """An OLTP run's rate, as its users read it."""
    m = result.get("metrics") or {}
    if m.get("tpm") is not None:
        return f" at {fmt(m['tpm'])} transactions per minute"
    if m.get("tps") is not None:
        return f" at {fmt(m['tps'])} transactions per second"
    return ""


#: below this share of the elapsed, the server's CPU and I/O wait together (summed over its processes)
#: bound nothing: a fifth of one process busy
IDLE_SHARE = 0.2


def run(result: dict) -> list[str]:
    """A run: how long, where the time went (CPU or waiting for storage), the device it waited on."""
    el, cpu, wait = result["elapsed_s"], result["server_cpu_s"], result["io_wait_s"]
    if cpu + wait < IDLE_SHARE * el:
        bound = ("bound by neither storage nor the server's CPU: the server was mostly idle, waiting on its "
                 "clients or on locks")
    elif wait > 2 * cpu:
        bound = "storage-bound: faster storage would shorten it"
    elif cpu > 2 * wait:
        bound = "CPU-bound: faster storage can shorten it little"
    else:
        bound = "bound by both the CPU and storage"
    first = (f"{result['workload']} took {fmt(el)} s{_throughput(result)} and was {bound}: the server's processes "
             f"waited for I/O {fmt(wait)} s and used {fmt(cpu)} s of CPU (each summed over its processes).")
    phases = result.get("phases") or [result]
    longest = max(phases, key=lambda p: p.get("elapsed_s") or 0.0)
    dev = _busiest(longest.get("devices") or [])
    unsafe = safety.sentence(result.get("lab") or {})
    if dev is None:
        return [first] + ([unsafe] if unsafe else [])
    where = f" in its longest phase, {longest['phase']}," if result.get("phases") else ""
    out = [first, f"Its busiest device{where} {_device_clause(dev)}."]
    capped = "; ".join(w for d in longest.get("devices") or [] if (w := _limit_clause(d)))
    if capped:
        out.append(capped[0].upper() + capped[1:] + ".")
    return out + ([unsafe] if unsafe else [])


def compare(names: list[str], results: list[dict], speedups: list[float], headline: str,
            largest: dict | None = None, spread: list[dict] | None = None) -> list[str]:
    """A comparison: the fastest layout against the first, in the figure it is judged by; then the
    phase or transaction type where a layout differs most (experiments/breakdown.py). With repeated
    runs (spread), a layout whose range overlaps the first's is said to differ by nothing measured."""
    if spread:
        return _compare_repeated(names, speedups, headline, largest, spread) + _unsafe_layouts(names, results)
    best = max(range(len(names)), key=lambda i: speedups[i] if speedups[i] == speedups[i] else 0.0)
    if best == 0:
        out = [f"No layout beat {names[0]}, the baseline: "
               + "; ".join(f"{n} {fmt(s)}x" for n, s in zip(names[1:], speedups[1:])) + "."]
    else:
        out = [f"On {names[best]} this workload ran {fmt(speedups[best])}x faster than on {names[0]} "
               f"({headline}: {fmt(_headline_value(results[best], headline))} against "
               f"{fmt(_headline_value(results[0], headline))})."]
        others = [f"{n} {fmt(s)}x" for i, (n, s) in enumerate(zip(names, speedups)) if i not in (0, best)]
        if others:
            out.append("The others: " + "; ".join(others) + ".")
    if largest is not None:
        out.append(_largest_clause(largest, names[0]))
    return out + _unsafe_layouts(names, results)


def _unsafe_layouts(names: list[str], results: list[dict]) -> list[str]:
    """Beside the speed-up, what a layout that is not crash-safe risks for it."""
    return [s for n, r in zip(names, results) if (s := safety.sentence(r.get("lab") or {}, f"on {n}"))]


def _range(s: dict) -> str:
    return f"{fmt(s['median'])} ({fmt(s['min'])} to {fmt(s['max'])})"


def _compare_repeated(names, speedups, headline, largest, spread) -> list[str]:
    n = spread[0]["runs"]
    if len(names) == 1:  # run --repeat: one experiment, its spread
        s = spread[0]
        width = (s["max"] - s["min"]) / s["median"] if s["median"] else float("nan")
        return [f"Over {n} runs: {headline} {_range(s)}, a range of {width:.1%} of the median (each figure below is "
                "the median run's)."]
    differ = [i for i in range(1, len(names)) if not spread[i]["within_first"]]
    same = [i for i in range(1, len(names)) if spread[i]["within_first"]]
    out = []
    if differ:
        best = max(differ, key=lambda i: speedups[i])
        how = (f"{fmt(speedups[best])}x faster" if speedups[best] >= 1 else f"{fmt(1 / speedups[best])}x slower")
        out.append(f"On {names[best]} this workload ran {how} than on {names[0]}, beyond the spread of {n} runs each "
                   f"({headline}, median and range: {_range(spread[best])} against {_range(spread[0])}).")
        others = [f"{names[i]} {fmt(speedups[i])}x" for i in differ if i != best]
        if others:
            out.append("Beyond the spread too: " + "; ".join(others) + ".")
    for i in same:
        out.append(f"No difference measured between {names[i]} and {names[0]}: {headline} {_range(spread[i])} against "
                   f"{_range(spread[0])}, within the spread of {n} runs each.")
    if largest is not None:
        out.append(_largest_clause(largest, names[0]))
    return out


def _largest_clause(d: dict, first: str) -> str:
    s = d["speedup"]
    how = f"{fmt(s)}x faster" if s >= 1 else f"{fmt(1 / s)}x slower"
    where = (f"transaction {d['script']}" + (f" (phase {d['phase']})" if d["phase"] else "")
             if d["script"] else f"phase {d['phase']}")
    by = " (its mean latency)" if d["script"] else ""
    return f"Where the layouts differ most: {where}, {how} on {d['layout']} than on {first}{by}."


def _headline_value(result: dict, headline: str) -> float:
    return (result.get("metrics") or {}).get("tps") if headline == "tps" else result["elapsed_s"]


def reproduce(doc: dict) -> list[str]:
    """A reproduction: how many of the articles' figures agree, and how many of those with a number
    (a figure that failed to measure has none) are within a factor of 2; with several engines, per
    engine and on one of them."""
    def numeric(f):
        return f.get("article_value") and f.get("our_value") is not None and math.isfinite(f["our_value"])

    def within(f):
        return numeric(f) and 0.5 <= f["our_value"] / f["article_value"] <= 2

    lines = []
    engines = doc.get("engines") or ["postgres"]
    for engine in engines:
        arts = [a for a in doc["articles"] if a.get("engine", "postgres") == engine]
        figs = [f for a in arts for f in a["figures"]]
        agree = sum(1 for f in figs if f.get("agrees"))
        lines.append(f"{_engine_title(engine) + ': ' if len(engines) > 1 else ''}{agree} of {len(figs)} headline "
                     f"figures agree with their articles (within 1.35x, or inside the article's range); "
                     f"{sum(1 for f in figs if within(f))} of the {sum(1 for f in figs if numeric(f))} numeric ones "
                     "are within a factor of 2.")
    if len(engines) > 1:
        claims: dict[tuple[str, str], list[dict]] = {}
        for a in doc["articles"]:
            for f in a["figures"]:
                claims.setdefault((a["seed"], f["claim"]), []).append(f)
        with_number = [fs for fs in claims.values() if fs[0].get("article_value")]
        lines.append(f"On one engine or the other: {sum(1 for fs in with_number if any(within(f) for f in fs))} of the "
                     f"{len(with_number)} figures with a number are within a factor of 2.")
    return lines + ["The seed articles are the five published benchmarks dbtier reproduces (seed 000 to 004), each "
                    "named with its author below. Where a figure differs, its row gives the measured reason: the run's "
                    "own CPU, waits and device time."]


def _engine_title(name: str) -> str:
    from dbtier import engines

    return engines.get(name).title
