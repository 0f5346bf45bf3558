"""How advice reads: the placement to use and what it gains first, then the alternatives, the speed-up
against fast-storage curve, the objects that matter and why, and the verifying runs."""

from __future__ import annotations

from dbtier.units import fmt_bytes
from dbtier.report.html import Section, TableData
from dbtier.report.terminal import fmt

#: a curve point is shown when it gains at least this much over the last one shown
CURVE_STEP = 0.05


#: per engine, the roles advice names, in a DBA's words (a table's name is its own)
ROLE_WORDS = {"postgres": {"wal": "the WAL", "temp": "temp files"},
              "mariadb": {"log": "the redo log", "undo": "the undo tablespaces", "temp": "temp files",
                          "binlog": "the binary log", "system": "the system tablespace"}}


def _objects_text(names: list[str], engine: str = "postgres") -> str:
    words = ROLE_WORDS.get(engine, {})
    named = [words.get(n, n) for n in names]
    if len(named) <= 6:
        return ", ".join(named)
    return ", ".join(named[:5]) + f" and {len(named) - 5} more"


def verdict(doc: dict) -> list[str]:
    rec, fast, slow = doc["recommended"], doc["devices"]["fast"], doc["devices"]["slow"]
    metric = doc["metric"]
    base = f"with everything on {slow['name']} ({slow['profile']})"
    if doc["higher_is_better"]:
        gain = (f"predicted {rec['speedup']:.2f}x the {metric}: {fmt(rec['value'])} against {fmt(doc['baseline_value'])} "
                f"{base}")
    else:
        gain = (f"predicted {rec['speedup']:.2f}x faster: {fmt(rec['value'])} s against {fmt(doc['baseline_value'])} s "
                f"{base}")
    put = _objects_text(rec['fast'], doc.get("engine", "postgres"))
    lines = [f"Put {put} on {fast['name']} ({fast['profile']}), {fmt_bytes(rec['fast_bytes'])} "
             f"of {doc['budget']['described']}: {gain}."]
    every = doc.get("everything_fast")
    if every and every["speedup"] > 0:
        lines.append(f"Everything with I/O on {fast['name']} ({fmt_bytes(every['fast_bytes'])}) would give "
                     f"{every['speedup']:.2f}x: this budget gets {_share(rec['speedup'], every['speedup'])} of that gain.")
    lines.append(f"Use it: --place {rec['place']}")
    best = doc.get("verified_best")
    if best is not None:
        if best["label"] == "advised":
            lines.append(f"Verified: run live, the advice measured {fmt(best['measured'])} {metric}, the best of the "
                         f"{len(doc['verify'])} placements run.")
        else:
            lines.append(f"Verified: run live, {best['label']} measured {best['over_advice']:.2f}x the advice "
                         f"({fmt(best['measured'])} {metric}); use it instead: --place {best['place']}")
    return lines


def _share(got: float, most: float) -> str:
    if most <= 1.0 + 1e-9:
        return "all"
    return f"{max(0.0, (got - 1) / (most - 1)):.0%}"


def _difference(option: dict, advised: dict) -> str:
    """An alternative as what it changes in the advice: + what it adds to the fast device, - what it leaves off."""
    added = [n for n in option["fast"] if n not in advised["fast"]]
    left = [n for n in advised["fast"] if n not in option["fast"]]
    return " ".join([f"+{n}" for n in added] + [f"-{n}" for n in left]) or "the same"


def alternatives_data(doc: dict) -> TableData:
    rows = []
    with_cost = doc["budget"]["max_cost"] is not None
    advised = doc["recommended"]
    for i, o in enumerate([advised, *doc["alternatives"]]):
        what = _objects_text(o["fast"], doc.get("engine", "postgres")) if i == 0 else _difference(o, advised)
        rows.append([("advised" if i == 0 else f"#{i + 1}"), what, f"{o['speedup']:.2f}x", fmt(o["value"]),
                     fmt_bytes(o["fast_bytes"]), *([f"${o['cost']:,.2f}"] if with_cost else [])])
    return TableData(["", f"on {doc['devices']['fast']['name']} (alternatives: against the advice)", "speed-up",
                      doc["metric"], "fast bytes", *(["cost"] if with_cost else [])], rows,
                     "the best placements predicted within the budget", 2)


def curve_points(doc: dict) -> list[dict]:
    """The curve's points worth a row: each that gains CURVE_STEP over the last shown, the advice and
    the last."""
    pts = doc["curve"]
    out = []
    for i, p in enumerate(pts):
        last = i == len(pts) - 1
        if not out or last or p["place"] == doc["recommended"]["place"] or p["speedup"] >= out[-1]["speedup"] * (1 + CURVE_STEP):
            out.append(p)
    return out


def curve_data(doc: dict) -> TableData:
    rows = []
    budget = doc["budget"]["fast_bytes"]
    prev = None
    for p in curve_points(doc):
        step = "-" if prev is None else (f"+{p['speedup'] - prev['speedup']:.2f}x for "
                                         f"{fmt_bytes(p['fast_bytes'] - prev['fast_bytes'])} more")
        rows.append([fmt_bytes(p["fast_bytes"]) + (" (over budget)" if p["fast_bytes"] > budget else ""),
                     f"{p['speedup']:.2f}x", step, _objects_text(p["fast"], doc.get("engine", "postgres")) or "-"])
        prev = p
    return TableData(["fast storage", "speed-up", "the step", "on the fast device"], rows,
                     "the best speed-up predicted at each amount of fast storage (where the next gigabyte stops paying)",
                     1)


def objects_data(doc: dict, limit: int = 15) -> TableData:
    rows = []
    for o in sorted(doc["objects"], key=lambda o: (-o["device_s"], o["name"]))[:limit]:
        alone = o["alone_speedup"]
        rows.append([o["name"] + (" *" if o["recommended"] else ""), o["kind"], fmt_bytes(o["bytes"]),
                     "-" if alone is None else f"{alone:.2f}x", o["reason"]])
    cpu = doc.get("server_cpu_share")
    caption = "the objects by device time in the recorded run (* advised for the fast device)"
    if cpu is not None:
        caption += f"; the server's CPU was {cpu:.0%} of the elapsed time, which no device shortens"
    return TableData(["object", "kind", "size", "alone on fast", "measured"], rows, caption, 2)


def verify_data(doc: dict) -> TableData | None:
    rows = []
    for v in doc.get("verify") or []:
        err = (v["predicted"] - v["measured"]) / v["measured"] if v["measured"] else float("nan")
        rows.append([v["label"], v["place"].split(",", 1)[1] if "," in v["place"] else "-", fmt(v["predicted"]),
                     fmt(v["measured"]), f"{err:+.1%}", v["run_dir"]])
    if not rows:
        return None
    return TableData(["", "placement", f"{doc['metric']} predicted", "measured", "error", "run directory"], rows,
                     "the advice run live on the emulated devices", 2, conclusion=(2, 3, 4))


def sections(doc: dict) -> list[Section]:
    from dbtier.report import charts  # matplotlib: only when a report is drawn

    pts = doc["curve"]
    rec = doc["recommended"]
    chart = charts.budget_curve([p["fast_bytes"] / 2**20 for p in pts], [p["speedup"] for p in pts],
                                doc["budget"]["fast_bytes"] / 2**20, (rec["fast_bytes"] / 2**20, rec["speedup"]),
                                f"{doc['workload']}: speed-up against fast storage "
                                f"({doc['devices']['fast']['profile']} over {doc['devices']['slow']['profile']})")
    tables = [alternatives_data(doc), curve_data(doc), objects_data(doc)]
    v = verify_data(doc)
    if v:
        tables.append(v)
    s = doc["search"]
    text = verdict(doc) + [f"Search: {s['method']}; {s['predictions']:,} predictions in {s['seconds']:.1f} s."] \
        + doc.get("notes", [])
    return [Section(f"Where the fast storage should go: {doc['workload']}", text=text, charts=[chart], tables=tables)]


def show(console, doc: dict) -> None:
    _print(console, verdict(doc), [alternatives_data(doc), curve_data(doc), objects_data(doc), verify_data(doc)], doc)


def _print(console, lines: list[str], tables: list, doc: dict) -> None:
    """The verdict (its first line bold), the tables, then how the search went and the notes."""
    from dbtier.report.terminal import show as show_table

    for i, line in enumerate(lines):
        console.print(line, style="bold" if i == 0 else None, soft_wrap=True, markup=False, highlight=False)
    console.print()
    for data in tables:
        if data is not None:
            show_table(console, data)
    s = doc["search"]
    console.print(f"search: {s['method']}; {s['predictions']:,} predictions in {s['seconds']:.1f} s", markup=False,
                  soft_wrap=True)
    for note in doc.get("notes", []):
        console.print(f"note: {note}", markup=False, soft_wrap=True)

# -- which volumes to buy (advise --catalog) --------------------------------------------------------


def _fig(doc: dict, value) -> str:
    if value is None:
        return "-"
    t = doc.get("target")
    unit = {"elapsed": " s", "tps": " tps", "tpm": " tpm", "p99": " ms"}.get(t["figure"], "") if t else \
        {"elapsed s": " s"}.get(doc.get("metric"), f" {doc.get('metric', '')}")
    return f"{fmt(value)}{unit}"


def volume_verdict(doc: dict) -> list[str]:
    rec = doc["recommended"]
    lines = [doc["finding"] + "."]
    lines.append("Buy: " + "; ".join(f"{v['name']} ({', '.join(v['parts'])}): {v['provisioned']}, "
                                     f"${v['monthly']:,.2f} a month" for v in rec["volumes"]) +
                 f". In all ${rec['cost']:,.2f} a month, predicted {_fig(doc, rec['value'])}.")
    lines.append(f"Run it: {rec['devices']} --place {rec['place']}")
    runs = doc.get("verify") or []
    if runs:
        v = runs[0]
        met = "" if v["met"] is None else (", meeting the target" if v["met"] else ", missing the target")
        lines.append(f"Verified: run live, the advice measured {_fig(doc, v['measured'])} against "
                     f"{_fig(doc, v['predicted'])} predicted{met}.")
    return lines


def volume_verify_data(doc: dict) -> TableData | None:
    rows = []
    for v in doc.get("verify") or []:
        err = (v["predicted"] - v["measured"]) / v["measured"] if v["measured"] and v["predicted"] else None
        rows.append([v["label"], f"${v['cost']:,.2f}", _fig(doc, v["predicted"]), _likely(doc, v), _fig(doc, v["measured"]),
                     "-" if err is None else f"{err:+.1%}",
                     "yes" if v["met"] else "no" if v["met"] is False else "-", v["run_dir"]])
    if not rows:
        return None
    return TableData(["", "a month", "predicted", "likely live", "measured", "error", "meets", "run directory"], rows,
                     "the answers run live on the emulated volumes", (0, 7), conclusion=(2, 4, 6))


def _likely(doc: dict, a: dict) -> str:
    lo_hi = a.get("interval")
    return "-" if not lo_hi else f"{_fig(doc, lo_hi[0])} to {_fig(doc, lo_hi[1])}"


def volume_answers_data(doc: dict) -> TableData:
    target = doc.get("target")
    rows = []
    for i, a in enumerate([doc["recommended"], *doc["alternatives"]]):
        vols = "; ".join(f"{v['name']}: {v['provisioned']}" for v in a["volumes"])
        saving = "-" if a["saving"] is None else f"{'-' if a['saving'] < 0 else ''}${abs(a['saving']):,.2f}"
        row = ["advised" if i == 0 else f"#{i + 1}", vols, f"${a['cost']:,.2f}", saving, _fig(doc, a["value"]),
               _likely(doc, a)]
        if target:
            row += ["yes" if a["met"] else "no" if a["met"] is False else "-",
                    "-" if a.get("risk") is None else f"{a['risk']:.0%}"]
        rows.append(row)
    cur = doc["current"]
    row = ["recorded", "; ".join(f"{d['name']}: {d['profile']}" for d in cur["devices"]),
           "-" if cur["cost"] is None else f"${cur['cost']:,.2f}", "-", _fig(doc, cur["value"]), "-"]
    if target:
        row += ["yes" if cur["met"] else "no" if cur["met"] is False else "-", "-"]
    rows.append(row)
    head = ["", "volumes (provisioned)", "a month", "saving", "predicted", "likely live"]
    if target:
        head += [f"meets {target['text']}", "risk of missing"]
    return TableData(head, rows, f"the answers predicted whole, from catalogue {doc['catalog']['name']} "
                                 f"({doc['catalog']['region']}, prices read {doc['catalog']['read']})", 2,
                     conclusion=(2, 4, 6, 7) if target else (2, 4))


def volume_curve_data(doc: dict) -> TableData:
    rows = [[f"${p['cost']:,.2f}", _fig(doc, p["value"]), p["volumes"]] for p in doc["curve"]]
    return TableData(["a month", "predicted", "volumes (provisioned)"], rows,
                     "the best figure predicted at each price: what the next dollar buys", (2,))


def volume_chart(doc: dict) -> str:
    from dbtier.report import charts  # matplotlib: only when a report is drawn

    rec, target = doc["recommended"], doc.get("target")
    unit = {"elapsed": "elapsed, s", "tps": "tps", "tpm": "tpm", "p99": "p99, ms"}
    ylabel = unit.get(target["figure"], target["figure"]) if target else doc["metric"]
    answers = [(a["cost"], a["value"], a["met"]) for a in doc["search"].get("answers", []) if a["value"] is not None]
    return charts.cost_curve(answers, [(p["cost"], p["value"]) for p in doc["curve"]], (rec["cost"], rec["value"]),
                             target["value"] if target else None, ylabel,
                             f"{doc['workload']}: what each monthly price buys (catalogue {doc['catalog']['name']})")


def volume_sections(doc: dict) -> list[Section]:
    s = doc["search"]
    text = volume_verdict(doc) + [f"Search: {s['method']}; {s['predictions']:,} predictions in {s['seconds']:.1f} s."] \
        + doc.get("notes", [])
    return [Section(f"Which volumes to buy: {doc['workload']}", text=text, charts=[volume_chart(doc)],
                    tables=[t for t in (volume_answers_data(doc), volume_curve_data(doc), volume_verify_data(doc)) if t])]


def show_volumes(console, doc: dict) -> None:
    _print(console, volume_verdict(doc), [volume_answers_data(doc), volume_curve_data(doc), volume_verify_data(doc)],
           doc)
