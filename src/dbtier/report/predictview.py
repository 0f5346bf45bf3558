"""`dbtier predict`'s terminal report: the answer first, then each phase's figures beside the
recorded run's, per device and per object."""

from __future__ import annotations

from rich import box
from rich.table import Table

from dbtier.devices import credits as burst_credits
from dbtier.report.terminal import console, fmt, label


def _speed(recorded: float, predicted: float) -> str:
    if predicted <= 0 or recorded <= 0:
        return "-"
    r = recorded / predicted
    return f"{r:.2f}x faster" if r >= 1 else f"{1 / r:.2f}x slower"


def show(doc: dict) -> None:
    out = console()
    sc = doc["scenario"]
    devices = ", ".join(f"{d['name']}={d['profile']}" for d in sc["devices"])
    placement = sc["placement"]
    where = "placement as recorded" if placement == "as recorded" else "placed " + ",".join(
        [f"{k}={v}" for k, v in placement.items() if k not in ("objects", "dump")]
        + [f"{k}={v}" for k, v in placement["objects"].items()])
    if sc.get("credits", 1.0) != 1.0 and any(d["kind"] == "cloud" for d in sc["devices"]):
        where += f"; burst credits {burst_credits.text(sc['credits'])} at the start"
    total_rec = sum(p["recorded"]["elapsed_s"] for p in doc["phases"])
    total_pred = sum(p["predicted"]["elapsed_s"] for p in doc["phases"])
    out.print(f"[bold]Predicted:[/bold] {doc['workload']} would take {fmt(total_pred)} s on {devices} ({where}), "
              f"against {fmt(total_rec)} s recorded: {_speed(total_rec, total_pred)}.", soft_wrap=True)
    if doc.get("not_crash_safe"):
        out.print("Not crash-safe: " + "; ".join(doc["not_crash_safe"]) + " ('dbtier crash' measures it).",
                  soft_wrap=True)
    spreads = [p["spread"] for p in doc["phases"] if p.get("spread")]
    if spreads and len(spreads) == len(doc["phases"]):
        lo, mid, hi = (sum(sp["elapsed_s"][k] for sp in spreads) for k in ("min", "median", "max"))
        out.print(f"Over {spreads[0]['replays']} replays with each call reaching its device's model earlier or later "
                  f"by one of this host's recorded delays: {fmt(lo)} to {fmt(hi)} s, median {fmt(mid)} s.", soft_wrap=True)
    for ph in doc["phases"]:
        rec, pred = ph["recorded"], ph["predicted"]
        t = Table(title=f"phase {ph['phase']}", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("figure", "recorded", "predicted", "change"):
            t.add_column(col, justify="left" if col == "figure" else "right")
        t.add_row("elapsed s", fmt(rec["elapsed_s"]), fmt(pred["elapsed_s"]), _speed(rec["elapsed_s"], pred["elapsed_s"]))
        if ph.get("spread"):
            e = ph["spread"]["elapsed_s"]
            t.add_row(f"  over {ph['spread']['replays']} replays", "", f"{fmt(e['min'])}-{fmt(e['max'])}",
                      f"median {fmt(e['median'])}")
        t.add_row("I/O wait s (all processes)", fmt(rec["io_wait_s"]), fmt(pred["io_wait_s"]), "")
        t.add_row("server CPU s", fmt(rec["server_cpu_s"]), fmt(pred["server_cpu_s"]), "")
        for key, value in pred["rates"].items():
            t.add_row(label(key), fmt(rec["rates"].get(key, float("nan"))), fmt(value), "")
        out.print(t)
        d = Table(title="devices (iostat)", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("device", "profile", "r/s rec/pred", "w/s rec/pred", "r_await ms", "w_await ms", "%util"):
            d.add_column(col, justify="left" if col in ("device", "profile") else "right")
        recorded = {r["device"]: r for r in rec["devices"]}
        for row in pred["devices"]:
            io, before = row["iostat"], recorded.get(row["device"], {}).get("iostat", {})

            def pair(key):
                return f"{fmt(before[key]) if key in before else '-'} / {fmt(io[key])}"
            d.add_row(row["device"], row["profile"], pair("r/s"), pair("w/s"), pair("r_await"), pair("w_await"),
                      pair("%util"))
        out.print(d)
        o = Table(title="objects by predicted device time", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
        for col in ("object", "device", "reads", "writes", "device s rec/pred"):
            o.add_column(col, justify="left" if col in ("object", "device") else "right")
        before = {}
        for r in rec["object_io"]:
            before[r["object"]] = before.get(r["object"], 0.0) + r["device_s"]
        for r in pred["object_io"][:8]:
            o.add_row(r["object"], r["device"], f"{r['reads']:,}", f"{r['writes']:,}",
                      f"{fmt(before.get(r['object'], float('nan')))} / {fmt(r['device_s'])}")
        out.print(o)
        if ph.get("latency"):
            lt = Table(title="transaction latency ms (each one the client timed, replayed on its backend)",
                       title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
            for col in ("script", "count", "p50 rec/pred", "p90 rec/pred", "p99 rec/pred"):
                lt.add_column(col, justify="left" if col == "script" else "right")
            for name, both in ph["latency"].items():
                r, p = both["recorded"], both["predicted"]

                def q(key):
                    return f"{fmt(r[key])} / {fmt(p[key])}" if key in r and key in p else "-"
                lt.add_row(name, f"{r['count']:,}", q("p50_ms"), q("p90_ms"), q("p99_ms"))
            out.print(lt)
    rp = doc["replay"]
    rate = (f" (the replay itself {rp['engine_seconds']:.3f} s, {rp['engine_calls_per_s'] / 1e6:.1f} M calls/s)"
            if rp["engine_calls_per_s"] else "")
    out.print(f"replayed {rp['calls']:,} calls ({rp['events']:,} events) in {rp['seconds']:.2f} s{rate}",
              soft_wrap=True)
    for note in doc["notes"]:
        out.print(f"note: {note}", soft_wrap=True)
