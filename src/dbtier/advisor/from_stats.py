"""`dbtier advise --from-stats DELTA`: where fast storage should go, estimated from production's
statistics alone, without a lab run (as Canim et al.'s Object Placement Advisor did from a
workload's profile): each object's reads and writes per second over the delta, how many of them
random as far as the statistics tell, times what each kind of I/O saves on the fast device against
the slow one (the device models' expected 8 KiB service times at queue depth 1), and the objects
whose saving is largest chosen under the budget by the advisor's knapsack (search._knapsack).

It is an estimate, and says so with its assumptions (ASSUMPTIONS); the command it prints checks it
in the lab."""

from __future__ import annotations

from dataclasses import dataclass

from dbtier.advisor import budget as budget_mod
from dbtier.advisor.advice import _device
from dbtier.advisor.search import _knapsack
from dbtier.errors import UserError
from dbtier.units import fmt_bytes

#: the slow device when --slow is not given
DEFAULT_SLOW = "hdd-sata-7200"

ASSUMPTIONS = (
    "every block read past shared_buffers reached the device (some were kernel-cache hits: only pg_stat_kcache "
    "tells them apart), so the reads, and the saving, are an upper bound",
    "an index's reads are random; a table's are random in proportion to its blocks fetched through indexes "
    "(idx_tup_fetch, one block each at most) against the blocks its sequential scans read (seq_scan times its "
    "size), and a TOAST relation's are random",
    "production counts no blocks written per object: the buffer writes pg_stat_io counts for relations are shared "
    "out by tuples written (a table's inserts, updates and deletes; its indexes' inserts and non-HOT updates), "
    "and every write is random",
    "each I/O takes the device model's expected time at queue depth 1 (8 KiB): queueing, a disk's write cache and "
    "one object's I/O slowing another's on a shared disk are not modelled",
    "sizes are each object's at the second snapshot",
)


@dataclass
class Latencies:
    """A profile's expected 8 KiB service times at queue depth 1, in seconds."""
    profile: str
    random_read: float
    random_write: float
    sequential_read: float
    sequential_write: float

    @classmethod
    def of(cls, name: str) -> "Latencies":
        from dbtier.devices import patterns, profile

        p = profile.load(name)
        if p.kind == "real":
            raise UserError(f"{name}: a real folder has no model to estimate with; give an emulated profile")
        figs = [patterns.expected(p, pt).mean_us / 1e6 for pt in patterns.STANDARD]
        return cls(p.name, *figs)

    def to_dict(self) -> dict:
        return {"profile": self.profile, **{f"{k}_us": getattr(self, k) * 1e6 for k in
                                            ("random_read", "random_write", "sequential_read", "sequential_write")}}


def _slow(text: str | None) -> tuple[str, str]:
    """--slow NAME=PROFILE, or PROFILE (named "slow")."""
    if text is None:
        return "slow", DEFAULT_SLOW
    if "=" in text:
        return _device(text, "--slow")
    return "slow", text.strip()


def _write_weights(objects: list[dict]) -> dict[str, float]:
    tables = {o["name"]: o for o in objects if o["kind"] == "table"}
    out = {}
    for o in objects:
        if o["kind"] == "table":
            out[o["name"]] = float(o.get("tuples_written", 0))
        elif o["kind"] == "index" and o.get("table") in tables:
            t = tables[o["table"]]
            out[o["name"]] = float(t.get("n_tup_ins", 0) + t.get("n_tup_upd", 0) - t.get("n_tup_hot_upd", 0))
    return out


def rates(delta: dict) -> list[dict]:
    """Each object's reads and writes per second, and the random share of its reads."""
    span, block = delta["span_s"], delta.get("block_bytes") or 8192
    relation_writes = sum((r.get("writes") or 0) for r in delta["io"] if r.get("object") == "relation")
    weights = _write_weights(delta["objects"])
    total_weight = sum(weights.values())
    out = []
    for o in delta["objects"]:
        if o["kind"] == "table":
            fetched = float(o.get("idx_tup_fetch", 0))
            scanned = float(o.get("seq_scan", 0)) * max(1.0, o["bytes"] / block)
            random = fetched / (fetched + scanned) if fetched + scanned else 1.0
        else:
            random = 1.0
        writes = relation_writes * weights.get(o["name"], 0.0) / total_weight if total_weight else 0.0
        out.append({"name": o["name"], "kind": o["kind"], "bytes": int(o["bytes"]),
                    "reads_per_s": o["blocks_read"] / span, "random_share": random, "writes_per_s": writes / span})
    return out


def estimate(delta: dict, fast: str, slow: str | None, budget: str | None, cost: str | None = None,
             max_cost: float | None = None) -> dict:
    fast_name, fast_profile = _device(fast, "--fast")
    slow_name, slow_profile = _slow(slow)
    if slow_name == fast_name:
        raise UserError(f"--fast {fast!r}: the fast device needs a name of its own; {slow_name} is the slow one")
    f, s = Latencies.of(fast_profile), Latencies.of(slow_profile)
    objects = rates(delta)
    total = sum(o["bytes"] for o in objects)
    b = budget_mod.parse(budget, cost, max_cost, total)
    for o in objects:
        random_read = o["reads_per_s"] * o["random_share"]
        o["saved_s_per_s"] = (random_read * (s.random_read - f.random_read)
                              + (o["reads_per_s"] - random_read) * (s.sequential_read - f.sequential_read)
                              + o["writes_per_s"] * (s.random_write - f.random_write))
        o["device_s_per_s_slow"] = (random_read * s.random_read + (o["reads_per_s"] - random_read) * s.sequential_read
                                    + o["writes_per_s"] * s.random_write)
    useful = [o for o in objects if o["saved_s_per_s"] > 0 and o["bytes"] <= b.fast_bytes]
    if not any(o["reads_per_s"] or o["writes_per_s"] for o in objects):
        raise UserError("the delta shows no object read past shared_buffers or written: production's data was all in "
                        "its cache over that time, and faster storage would not change it")
    if not useful:
        smallest = min((o for o in objects if o["saved_s_per_s"] > 0), key=lambda o: o["bytes"], default=None)
        if smallest is None:
            raise UserError(f"{fast_profile} saves no time over {slow_profile} on any object's I/O; give a faster --fast")
        raise UserError(f"--budget: room for {fmt_bytes(b.fast_bytes)}, and the smallest object whose I/O the fast "
                        f"device would speed up ({smallest['name']}) takes {fmt_bytes(smallest['bytes'])}; give at least that")
    names = [o["name"] for o in useful]
    gain = {o["name"]: o["saved_s_per_s"] for o in useful}
    chosen = _knapsack(names, gain, {}, {o["name"]: o["bytes"] for o in useful}, b.fast_bytes, []) or frozenset()
    for o in objects:
        o["recommended"] = o["name"] in chosen
    objects.sort(key=lambda o: -o["saved_s_per_s"])
    fast_bytes = sum(o["bytes"] for o in objects if o["recommended"])
    place = ",".join([f"data={slow_name}"] + [f"{n}={fast_name}" for n in sorted(chosen)])
    saved = sum(o["saved_s_per_s"] for o in objects if o["recommended"])
    busy = sum(o["device_s_per_s_slow"] for o in objects)
    devices = f"{slow_name}={s.profile},{fast_name}={f.profile}"
    check = (f"dbtier compare replay WORKLOAD_DIR --restore DUMP --config now:{slow_name}={s.profile} "
             f"--config advised:{devices}:{place}")
    return {
        "kind": "stats-estimate", "estimate": True,
        "delta": {"first": delta["first"]["taken_at"], "second": delta["second"]["taken_at"], "span_s": delta["span_s"],
                  "database": delta["server"]["database"]},
        "devices": {"slow": {"name": slow_name, **s.to_dict()}, "fast": {"name": fast_name, **f.to_dict()}},
        "budget": {**b.to_dict(), "described": b.describe()},
        "recommended": {"place": place, "fast": sorted(chosen), "fast_bytes": fast_bytes,
                        "saved_device_s_per_s": saved, "slow_device_s_per_s": busy},
        "objects": objects, "assumptions": list(ASSUMPTIONS), "check": check,
        "notes": ([] if slow is not None else
                  [f"the slow device is {DEFAULT_SLOW} (the default); give --slow the profile of production's storage"]),
    }
