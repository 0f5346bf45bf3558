"""How a comparison reads: one row per configuration, the first one the baseline."""

from __future__ import annotations

from dbtier.report.html import Section, TableData
from dbtier.report.runview import _top_wait, pct
from dbtier.report.terminal import fmt
from dbtier.experiments.breakdown import breakdown
from dbtier.experiments.compare import headline, speedups


def table_data(names: list[str], results: list[dict], earlier: bool = False, spread: list[dict] | None = None) -> TableData:
    """earlier: run directories made before, each with its own data (not one load copied into each);
    spread: each layout's repeated runs (the results are their medians)."""
    what = headline(results[0])[0]
    rows = []
    for i, (name, r, up) in enumerate(zip(names, results, speedups(results))):
        value = fmt(headline(r)[1])
        x = f"{up:.2f}x"
        if spread:
            s = spread[i]
            value = f"{fmt(s['median'])} ({fmt(s['min'])} to {fmt(s['max'])})"
            x = "none measured" if s.get("within_first") else x
        rows.append([name, value, x, pct(r["server_cpu_s"], r["elapsed_s"]), _top_wait(r)])
    if spread:
        what = f"{what}, median (range) of {spread[0]['runs']} runs"
    shown = results[0].get("shown_phase")
    return TableData(["configuration", what, f"speed-up vs {names[0]}", "server CPU", "top wait event"], rows,
                     f"{results[0]['workload']} on {len(names)} layout{'' if len(names) == 1 else 's'} "
                     + ("(runs made earlier, each with its own data)" if earlier else "(the data loaded once, copied into each)")
                     + (f"; elapsed over every phase, devices and waits of the longest ({shown})" if shown else ""),
                     (0, 4), conclusion=(1, 2))


def device_data(names: list[str], results: list[dict]) -> TableData:
    """Each layout's devices, a row each: a column per figure, so a narrow terminal keeps them all
    (a column per device would leave the third out at 80 columns)."""
    rows = []
    for name, r in zip(names, results):
        for d in r["devices"]:
            io = d["iostat"]
            rows.append([name, d["device"], d["profile"], fmt(io["%util"]), fmt(io["r/s"]), fmt(io["r_await"]),
                         fmt(io["w/s"]), fmt(io["w_await"])])
    return TableData(["layout", "device", "profile", "%util", "r/s", "r_await", "w/s", "w_await"], rows,
                     "each layout's devices (iostat; awaits in ms)", 3)


def _x(speedup: float | None) -> str:
    return "-" if speedup is None else f"{speedup:.2f}x"


def phase_data(names: list[str], parts: dict) -> TableData | None:
    """Each phase a row, each layout's figure and speed-up against the first a column: where the
    elapsed went and what each layout changed there."""
    if len(parts["phases"]) < 2:
        return None
    rows = []
    for row in parts["phases"]:
        unit = " tps" if row["figure"] == "tps" else " s"
        rows.append([row["phase"], f"{100 * row['share']:.0f}%"]
                    + [("-" if lay["value"] is None else f"{fmt(lay['value'])}{unit}")
                       + ("" if lay.get("min") is None else f" [{fmt(lay['min'])} to {fmt(lay['max'])}]")
                       + ("" if i == 0 else " (none measured)" if lay.get("within_spread") else f" ({_x(lay['speedup'])})")
                       for i, lay in enumerate(row["layouts"])])
    ranged = any(lay.get("min") is not None for row in parts["phases"] for lay in row["layouts"])
    return TableData(["phase", f"share of {names[0]}", *names], rows,
                     f"each phase on each layout, the speed-up against {names[0]} in brackets"
                     + ("; each its median run's, the runs' range in square brackets" if ranged else ""), 1)


def script_data(names: list[str], parts: dict) -> TableData | None:
    """Each transaction type or script on each layout: its rate, latency percentiles and speed-up."""
    if not parts["scripts"]:
        return None
    several = len(parts["phases"]) > 1
    rows = []
    for row in parts["scripts"]:
        for i, lay in enumerate(row["layouts"]):
            name = (f"{row['script']} ({row['phase']})" if several else row["script"]) if i == 0 else ""
            rows.append([name, lay["name"], "-" if lay["tps"] is None else fmt(lay["tps"]),
                         *("-" if lay[k] is None else fmt(lay[k]) for k in ("p50_ms", "p95_ms", "p99_ms")),
                         "" if i == 0 else "none measured" if lay.get("within_spread") else _x(lay["speedup"])])
    return TableData(["transaction", "layout", "tps", "p50 ms", "p95 ms", "p99 ms", f"speed-up vs {names[0]}"], rows,
                     "each transaction type on each layout (speed-up: its mean latency against the first layout's)",
                     2, conclusion=(6, 5))


def sections(names: list[str], results: list[dict], run_dirs: list[str], parts: dict | None = None,
             notes: list[str] | None = None, spread: list[dict] | None = None) -> list[Section]:
    from dbtier.report import charts  # matplotlib: only when a report is drawn

    parts = parts or breakdown(names, results)
    what, _, higher = headline(results[0])
    values = [headline(r)[1] for r in results]
    shown = []
    if len(parts["phases"]) > 1:  # seconds first: where each layout's elapsed went, phase by phase
        shown.append(charts.grouped_bars([row["phase"] for row in parts["phases"]],
                                         {lay["name"]: [row["layouts"][i]["elapsed_s"] or 0.0 for row in parts["phases"]]
                                          for i, lay in enumerate(parts["phases"][0]["layouts"])},
                                         "elapsed, s", "each phase's elapsed time, per layout (shorter is better)"))
    shown.append(charts.grouped_bars(names, {what: values}, what, f"{what} per layout ({'higher' if higher else 'lower'} "
                                     "is better)", labels={what: [fmt(v) for v in values]}))
    shown.append(charts.time_split(names, [r["server_cpu_s"] for r in results], [r["io_wait_s"] for r in results],
                                   [r["elapsed_s"] for r in results], "where the time went, per layout"))
    dirs = TableData(["configuration", "run directory"], [[n, d] for n, d in zip(names, run_dirs)], "", 2)
    tables = [t for t in (table_data(names, results, notes is not None, spread), phase_data(names, parts),
                          script_data(names, parts),
                          device_data(names, results), dirs) if t]
    return [Section(f"{results[0]['workload']}: {len(names)} layouts side by side", text=notes or [],
                    charts=[c for c in shown if c], tables=tables)]
