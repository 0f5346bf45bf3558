"""How one run's result reads: terminal tables and HTML sections, from the result document."""

from __future__ import annotations

from rich import box
from rich.table import Table

from dbtier.devices import credits as burst_credits
from dbtier.measure.iostat import COLUMNS
from dbtier.report import charts, replayview
from dbtier.report.html import Section, TableData
from dbtier.report.terminal import fmt, label, show


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole > 0 else "-"


#: objects placed apart named in a placement's one line; the rest are counted (the objects table lists all)
PLACED_SHOWN = 4


def placement_text(result: dict) -> str:
    """The placement in a line that stays short: the roles, and at most PLACED_SHOWN objects placed
    apart (a title or a verdict is never pushed off the screen by 75 of them)."""
    p = result["lab"]["placement"]
    parts = [f"{k}={v}" for k, v in p.items() if k != "objects"]  # the engine's roles, in its order
    objects = list(p["objects"].items())
    parts += [f"{k}={v}" for k, v in objects[:PLACED_SHOWN]]
    more = len(objects) - PLACED_SHOWN
    return ",".join(parts) + (f" and {more} more objects placed apart (where the objects are: below)" if more > 0 else "")


def scale_text(model: dict) -> str:
    """The scale model in a line: the factor, and the sizes a floor kept above their share."""
    floors = [f"{s['what']} ({s['floor']})" for s in model["sizes"] if s.get("floor")]
    return (f"data at 1/{model['factor']:g} of the system described: its caches divided as much, its disks' seeks as long as at full size"
            + (f"; kept larger: {', '.join(floors)}" if floors else ""))


def _per(part: float, whole: float) -> float:
    return part / whole if whole > 0 else float("nan")


def time_rows(result: dict) -> list[tuple[str, str]]:
    el = result["elapsed_s"]
    rows = [
        ("elapsed", f"{fmt(el)} s"),
        ("server CPU", f"{fmt(result['server_cpu_s'])} s summed over the server's processes: "
                       f"{fmt(_per(result['server_cpu_s'], el))} on the CPU on average"),
        ("I/O wait", f"{fmt(result['io_wait_s'])} s summed over the server's processes: "
                     f"{fmt(_per(result['io_wait_s'], el))} waiting on average"),
        ("emulation spin", f"{fmt(result['emulation_spin_s'])} s: CPU the emulator spent spinning out the last "
                           "microseconds of its waits, which a sleep cannot time (not counted in server CPU)"),
        *([("CPU scale", f"{result['lab']['cpu_scale']:g}x slower server CPU: {fmt(result['cpu_dilation_s'])} s of the "
                         "server CPU above is the dilation")]
          if result.get("cpu_dilation_s") is not None and "lab" in result else []),
        *([("burst credits", f"{burst_credits.text(result['lab']['credits'])} when the measured part began (--credits): "
                             "a capped volume ran at its baseline once they were spent")]
          if (result.get("lab") or {}).get("credits", 1.0) != 1.0 else []),
        *([("scale model", scale_text(result["lab"]["scale_model"]))]
          if "lab" in result and result["lab"].get("scale_model") else []),
        ("client CPU", f"{fmt(result['client_cpu_s'])} s (dbtier's own driver)"),
        ("host CPU steal", f"{fmt(result.get('host_steal_s', 0.0))} s (taken by the hypervisor; wakes sleepers late)"),
    ]
    direct = (result.get("lab") or {}).get("io_mode") == "direct"
    for d in result["devices"]:
        pc = d.get("page_cache")
        if pc and pc["hit_pages"] + pc["miss_pages"] + pc["writeback_mb"] > 0:
            rows.append((f"page cache, {d['device']}",
                         ("files other than the data and WAL, which direct I/O sends past it: " if direct else "")
                         + f"{pc['hit_pct']:.1f}% of {pc['hit_pages'] + pc['miss_pages']:,} pages hit; read ahead "
                         f"{fmt(pc['readahead_mb'])} MB; written back {fmt(pc['writeback_mb'])} MB"))
    rows += [(label(k), fmt(v)) for k, v in result["rates"].items()]
    return rows


def summary_table(result: dict) -> Table:
    lab = result["lab"]
    title = (f"{result['workload']} ({', '.join(f'{k}={v}' for k, v in result['params'].items())}) "
             f"placed {placement_text(result)}; {lab['io_mode']} I/O, database cache "
             f"{lab['cache_bytes'] >> 20} MB, page cache {lab['page_cache']['bytes'] >> 20} MB")
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_header=False, pad_edge=False)
    table.add_column("figure")
    table.add_column("value")
    for k, v in time_rows(result):
        table.add_row(k, v)
    return table


def objects_data(result: dict) -> TableData:
    rows = [[o["object"], o["kind"], str(o["device"]), o["tablespace"], o["path"], fmt(o["bytes"] / 1048576)]
            for o in result["objects"]]
    source = "InnoDB's tablespaces" if result["lab"].get("engine") == "mariadb" else "pg_relation_filepath"
    return TableData(["object", "kind", "device", "tablespace", "path", "MiB"], rows,
                     f"where the objects are ({source})", 5)


def events_data(result: dict) -> TableData:
    """Top timed events, as STATSPACK printed them; their time summed over the server's processes,
    so also as average active processes (the time over the elapsed), which may pass 1."""
    rows = [[e["event"], ", ".join(e.get("processes", [])), "" if e.get("waits") is None else f"{e['waits']:,}",
             fmt(e["time_s"]), fmt(e["elapsed_pct"] / 100)] for e in result.get("top_events", [])]
    interval = result.get("wait_events", {}).get("interval_s", 0.0)
    how = ("waits timed by performance_schema" if result["lab"].get("engine") == "mariadb" else
           f"waits sampled every {1e3 * interval:.0f} ms; I/O waits counted by pg_stat_io")
    return TableData(["event", "processes", "waits", "time s", "avg active"], rows,
                     f"top timed events: time summed over the server's processes; avg active = that time / elapsed, "
                     f"the processes in it on average (CPU measured; {how})", 2)


OBJECT_IO_COLUMNS = ["object", "kind", "device", "reads", "read MiB", "writes", "write MiB", "flushes", "cached reads",
                     "seq %", "device s"]


def object_io_rows(result: dict, limit: int = 12) -> list[list[str]]:
    """The objects with the most device time; the rest summed in one line."""
    rows = result.get("object_io", [])
    shown, rest = rows[:limit], rows[limit:]

    def line(r):
        return [r["object"], r["kind"], r["device"], f"{r['reads']:,}", fmt(r["read_bytes"] / 1048576),
                f"{r['writes']:,}", fmt(r["write_bytes"] / 1048576), f"{r['flushes']:,}", f"{r['cached_reads']:,}",
                fmt(r["sequential_pct"]), fmt(r["device_s"])]
    out = [line(r) for r in shown]
    if rest:
        total = {k: sum(r[k] for r in rest) for k in ("reads", "read_bytes", "writes", "write_bytes", "flushes",
                                                         "cached_reads", "device_s")}
        out.append(line({**total, "object": f"{len(rest)} more objects", "kind": "", "device": "",
                         "sequential_pct": float("nan")}))
    return out


def object_io_data(result: dict) -> TableData:
    return TableData(OBJECT_IO_COLUMNS, object_io_rows(result),
                     "I/O by object (from the trace; names from the catalog)", 3)


STAT_IO_COLUMNS = ("reads", "read_time", "writes", "write_time", "extends", "hits", "evictions", "fsyncs")


def stat_io_data(result: dict) -> TableData:
    rows = [[r["backend_type"], r["object"], r["context"],
             *("-" if r[c] is None else fmt(r[c]) for c in STAT_IO_COLUMNS)] for r in result.get("pg_stat_io", [])]
    wal = result.get("pg_stat_wal", {})
    caption = "pg_stat_io over the run (times in ms)"
    if wal:
        caption += (f"; pg_stat_wal: {wal['wal_records']:,.0f} records, {wal['wal_fpi']:,.0f} full-page images, "
                    f"{wal['wal_bytes'] / 1048576:.2f} MiB, {wal['wal_buffers_full']:,.0f} times the WAL buffers were full")
    return TableData(["backend", "object", "context", *STAT_IO_COLUMNS], rows, caption, 3)


def fidelity_notes(result: dict) -> list[str]:
    """Where the emulation fell measurably behind its model, say so (lateness is in every result)."""
    notes = []
    for d in result["devices"]:
        late, n = d["lateness"], d["lateness"]["count"]
        io = d["counters"]
        mean_lat_us = (io["read_ns"] + io["write_ns"] + io["flush_ns"]) / 1e3 / n if n else 0.0
        if n and late["mean_us"] > 0.02 * mean_lat_us and late["mean_us"] > 2:
            # I/Os the model took no time over (all in the emulated page cache) can still be late
            share = f"{100 * late['mean_us'] / mean_lat_us:.1f}% of " if mean_lat_us else ""
            notes.append(f"on {d['device']}, I/Os completed {late['mean_us']:.0f} us late on average "
                         f"({share}the modelled {mean_lat_us:.0f} us; p99 "
                         f"{late['p99_us']:.0f} us); the host's CPU steal over the run was "
                         f"{result.get('host_steal_s', 0.0):.2f} s")
    return notes


def with_diskstats(devices: list[dict]) -> list[dict]:
    """The device rows, each real device followed by the kernel's figures for its block device."""
    out = []
    for d in devices:
        out.append(d)
        if "diskstats" in d:
            ds = d["diskstats"]
            out.append({"device": f"  {ds['block_device']}", "profile": "/proc/diskstats", "iostat": ds,
                        "lateness": {"p50_us": float("nan"), "p99_us": float("nan")}})
    return out


def phase_views(result: dict) -> list[dict]:
    """A phased result as one result per phase (the lab, placement and params shared)."""
    shared = {k: v for k, v in result.items() if k != "phases"}
    return [{**shared, **ph, "workload": f"{result['workload']}: {ph['phase']}"} for ph in result.get("phases", [])]


def _top_wait(r: dict) -> str:
    waits_ = [e for e in r.get("top_events", []) if not e["event"].startswith("CPU")]
    return f"{waits_[0]['event']} {fmt(waits_[0]['elapsed_pct'])}%" if waits_ else "-"


def phases_data(result: dict) -> TableData:
    rows = []
    for ph in result["phases"]:
        el = ph["elapsed_s"]
        rows.append([ph["phase"], fmt(el), fmt(ph["server_cpu_s"]), pct(ph["server_cpu_s"], el), fmt(ph["io_wait_s"]),
                     _top_wait(ph), "; ".join(f"{label(k)} {fmt(v)}" for k, v in ph["rates"].items())])
    total = [fmt(sum(ph[k] for ph in result["phases"])) for k in ("elapsed_s", "server_cpu_s")]
    rows.append(["all phases", total[0], total[1], pct(result["server_cpu_s"], result["elapsed_s"]),
                 fmt(result["io_wait_s"]), "", ""])
    return TableData(["phase", "elapsed s", "server CPU s", "CPU %", "I/O wait s", "top wait event", "rates"], rows,
                     f"{result['workload']}: each phase measured on its own", 1)


def statements_data(result: dict, limit: int = 40, fold: bool = False) -> TableData | None:
    """Each measured statement of a user's SQL: where it is, its elapsed time and rows (the slowest first
    when there are more than `limit`: the terminal shows those; a page (fold) keeps the rest folded)."""
    runs = result.get("phases") or [{**result, "phase": result.get("phase", "run")}]
    rows = [(ph["phase"], s) for ph in runs for s in (ph.get("metrics") or {}).get("statement_times", [])]
    if not rows:
        return None
    caption = "statements (elapsed on the client, rows returned or changed)"
    many = len(rows) > limit
    if many:
        rows = sorted(rows, key=lambda r: -r[1]["elapsed_s"])
        caption += f"; the {limit} slowest" + (f" of {len(rows):,}, the rest folded" if fold else "")
        rows = rows if fold else rows[:limit]
    return TableData(["phase", "where", "statement", "elapsed s", "rows"],
                     [[ph, s["where"], s["statement"], fmt(s["elapsed_s"]), f"{s['rows']:,}"] for ph, s in rows],
                     caption, 3, fold_after=limit if fold and many else None)


def scripts_data(result: dict) -> TableData | None:
    """pgbench's scripts: transactions, and latency percentiles from its per-transaction log."""
    scripts = (result.get("metrics") or {}).get("scripts")
    if not scripts:
        return None
    cols = ["script", "weight", "transactions", "mean ms", "p50 ms", "p90 ms", "p95 ms", "p99 ms", "p99.9 ms",
            "skipped", "failed", "late"]
    rows = [[name, str(s["weight"]), f"{s['count']:,}", fmt(s["mean_ms"]),
             *(fmt(s.get(f"{q}_ms", float("nan"))) for q in ("p50", "p90", "p95", "p99", "p999")),
             f"{s['skipped']:,}", f"{s['failed']:,}", f"{s['late']:,}"] for name, s in scripts.items()]
    return TableData(cols, rows, f"pgbench: {fmt(result['metrics']['tps'])} tps; latency per script (pgbench's "
                                 "per-transaction log)", 1)


#: iostat's columns a narrow terminal leaves out first
IOSTAT_DROP = ("svctm", "f/s", "f_await", "aqu-sz", "wMB/s", "rMB/s", "late p50/p99 us", "profile")


def latency_data(result: dict) -> TableData | None:
    """An OLTP run's transactions by type: how many, their share, and their latency percentiles."""
    m = result.get("metrics") or {}
    per_type = m.get("latency")
    if not per_type:
        return None
    rows = [[t, f"{v['count']:,}", fmt((m.get("mix_pct") or {}).get(t, float("nan"))), fmt(v.get("mean_ms", float("nan"))),
             *(fmt(v.get(f"{q}_ms", float("nan"))) for q in ("p50", "p90", "p95", "p99"))] for t, v in per_type.items()]
    return TableData(["transaction", "committed", "mix %", "mean ms", "p50 ms", "p90 ms", "p95 ms", "p99 ms"], rows,
                     f"transactions: {fmt(m.get('tpm', float('nan')))} tpm, {fmt(m.get('nopm', float('nan')))} "
                     "New-Orders per minute; latency per type", 1)


SPARKS = "▁▂▃▄▅▆▇█"


def throughput_line(result: dict, width: int = 60) -> str | None:
    """Transactions per second over the run, as a line of blocks (each block up to a few seconds)."""
    per_s = (result.get("metrics") or {}).get("transactions_per_s") or []
    if len(per_s) < 2:
        return None
    step = -(-len(per_s) // width)
    bins = [sum(per_s[i:i + step]) / len(per_s[i:i + step]) for i in range(0, len(per_s), step)]
    top = max(bins) or 1.0
    line = "".join(SPARKS[min(len(SPARKS) - 1, int(b / top * len(SPARKS)))] for b in bins)
    return (f"transactions per second over {len(per_s)} s (each block {step} s): {line} "
            f"min {fmt(min(per_s))}, max {fmt(max(per_s))}")


def settings_data(result: dict) -> TableData | None:
    """The settings the run used where they differ from the engine's defaults or production's."""
    lab = result.get("lab") or {}
    rows = lab.get("settings_compared") or []
    if not rows:
        return None
    prod = lab.get("production")
    engine = "MariaDB" if lab.get("engine") == "mariadb" else "PostgreSQL"
    caption = (f"settings: this run's where they differ from {engine}'s defaults"
               + (f" or production's ({prod['file']}, {engine} {prod['server'].get('version')})" if prod else
                  " (--settings-from adds production's)"))
    columns = ["setting", "this run", f"{engine}'s default", *(["production"] if prod else []), "from"]
    return TableData(columns, [[r["setting"], str(r["run"]), "-" if r["default"] is None else str(r["default"]),
                                *([str(r["production"]) if r["production"] is not None else "-"] if prod else []),
                                r["from"]] for r in rows], caption, len(columns))


def write_page(path, title: str, result: dict) -> None:
    """A run's report.html: its verdict first, then its sections (for run, and for each layout a
    comparison or an advice's verification ran)."""
    from dbtier.report import html, verdict

    html.write(path, title, result["started"], run_sections(result), verdict.run(result))


def print_run(console, result: dict) -> None:
    from dbtier.report import verdict

    for line in verdict.run(result):
        console.print(line, markup=False)
    for note in result.get("notes", []):
        console.print(f"note: {note}", markup=False)
    statements = statements_data(result)
    settings_table = settings_data(result)
    if result.get("phases"):
        show(console, phases_data(result))
        if statements:
            show(console, statements)
        for view in phase_views(result):
            show(console, iostat_data(view["devices"], f"{view['workload']}: devices (iostat -x)"), IOSTAT_DROP)
            for extra in (latency_data(view), scripts_data(view)):
                if extra:
                    show(console, extra)
        show(console, objects_data(result))
        for view in phase_views(result):
            for note in fidelity_notes(view):
                console.print(f"note: {view['workload']}: {note}", markup=False)
        _print_production(console, result)
        if settings_table:
            show(console, settings_table)
        return
    console.print(summary_table(result))
    show(console, iostat_data(result["devices"], "devices over the measured interval (iostat -x)"), IOSTAT_DROP)
    if result.get("top_events"):
        show(console, events_data(result))
    if result.get("object_io"):
        show(console, object_io_data(result))
    if statements:
        show(console, statements)
    for extra in (scripts_data(result), latency_data(result), replayview.classes_data(result)):
        if extra:
            show(console, extra)
    for line in [replayview.faithfulness_line(result), *replayview.detail_lines(result)]:
        if line:
            console.print(line, markup=False)
    tps = throughput_line(result, max(10, console.width - 60))
    if tps:
        console.print(tps, markup=False)
    show(console, objects_data(result))
    if settings_table:
        show(console, settings_table)
    for note in fidelity_notes(result):
        console.print(f"note: {note}", markup=False)
    _print_production(console, result)


def _print_production(console, result: dict) -> None:
    """The run beside production (run --production DELTA)."""
    if result.get("production"):
        from dbtier.report import productionview

        productionview.show_comparison(console, result["production"])


def iostat_data(devices: list[dict], caption: str = "devices (iostat -x)") -> TableData:
    devices = with_diskstats(devices)
    rows = [[d["device"], d["profile"], *(fmt(d["iostat"][c]) for c in COLUMNS),
             f"{fmt(d['lateness']['p50_us'])}/{fmt(d['lateness']['p99_us'])}"] for d in devices]
    return TableData(["device", "profile", *COLUMNS, "late p50/p99 us"], rows,
                     f"{caption}: await = queue and service time per I/O, svctm = busy time per I/O, late = how far past "
                     "the model's completion the emulation returned an I/O (its fidelity)", 2)


def _seconds(s: float) -> str:
    return f"{s * 1e3:.3g} ms" if s < 0.1 else f"{fmt(s)} s"


def object_time_chart(result: dict, limit: int = 10) -> str | None:
    """Where the device time went: the objects that took most of it (seconds, linear), with the device
    each is on."""
    rows = sorted((r for r in result.get("object_io") or [] if r.get("device_s")), key=lambda r: -r["device_s"])[:limit]
    if not rows:
        return None
    return charts.grouped_bars([f"{r['object']} ({r['kind']}, on {r['device']})" for r in rows],
                               {"device time": [r["device_s"] for r in rows]}, "device time, s (summed over its I/Os)",
                               "where the device time went, by object",
                               labels={"device time": [_seconds(r["device_s"]) for r in rows]})


def run_sections(result: dict) -> list[Section]:
    if result.get("production"):
        from dbtier.report import productionview

        return run_sections({k: v for k, v in result.items() if k != "production"}) + [
            productionview.section(result["production"])]
    if result.get("phases"):
        views = phase_views(result)
        names = [ph["phase"] for ph in result["phases"]]
        # seconds first: a long phase drawn long; the processes' average activity after it
        seconds = charts.grouped_bars(names, {"elapsed": [v["elapsed_s"] for v in views]}, "elapsed, s",
                                      "where the elapsed went, per phase",
                                      labels={"elapsed": [_seconds(v["elapsed_s"]) for v in views]})
        chart = charts.time_split(names, [v["server_cpu_s"] for v in views],
                                  [v["io_wait_s"] for v in views], [v["elapsed_s"] for v in views],
                                  "what the server's processes did, per phase (average active processes)")
        statements = statements_data(result, fold=True)
        settings_table = settings_data(result)
        top = Section(f"{result['workload']} placed {placement_text(result)}", charts=[c for c in [seconds, chart] if c],
                      tables=[phases_data(result), *([statements] if statements else []),
                              *([settings_table] if settings_table else [])])
        return [top] + [section for view in views for section in run_sections(view)]
    objects = TableData(["object", "kind", "device", "tablespace", "MiB", "path"],
                        [[o["object"], o["kind"], str(o["device"]), o["tablespace"], fmt(o["bytes"] / 1048576),
                          o["path"]] for o in result["objects"]], "objects", 4)
    times = TableData(["figure", "value"], [list(r) for r in time_rows(result)], "", 2)
    extra = [t for t in (statements_data(result, fold=True), scripts_data(result), latency_data(result),
                         replayview.classes_data(result, fold=True)) if t]
    replay_text = [line for line in [replayview.faithfulness_line(result), *replayview.detail_lines(result)] if line]
    settings_table = settings_data(result)
    per_s = (result.get("metrics") or {}).get("transactions_per_s") or []
    tps_chart = charts.over_time(per_s, "transactions per second", "throughput over the run") if len(per_s) > 1 else None
    return [Section(f"{result['workload']} placed {placement_text(result)}", text=replay_text + fidelity_notes(result),
                    charts=[c for c in [object_time_chart(result), tps_chart] if c],
                    tables=[times, *extra, events_data(result), iostat_data(result["devices"]), object_io_data(result),
                            stat_io_data(result), objects, *([settings_table] if settings_table else [])])]
