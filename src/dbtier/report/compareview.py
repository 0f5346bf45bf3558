"""How a comparison reads: one row per configuration, the first one the baseline."""

from __future__ import annotations

from dbtier.report.html import Section, TableData
from dbtier.report.runview import _top_wait, pct
from dbtier.report.terminal import fmt
from dbtier.experiments.compare import headline, speedups


def table_data(names: list[str], results: list[dict]) -> TableData:
    what = headline(results[0])[0]
    rows = [[name, fmt(headline(r)[1]), f"{up:.2f}x", pct(r["server_cpu_s"], r["elapsed_s"]), _top_wait(r)]
            for name, r, up in zip(names, results, speedups(results))]
    shown = results[0].get("shown_phase")
    return TableData(["configuration", what, f"speed-up vs {names[0]}", "server CPU", "top wait event"], rows,
                     f"{results[0]['workload']} on {len(names)} layouts (the data loaded once, copied into each)"
                     + (f"; elapsed over every phase, devices and waits of the longest ({shown})" if shown else ""),
                     (0, 4))


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


def sections(names: list[str], results: list[dict], run_dirs: list[str]) -> list[Section]:
    from dbtier.report import charts  # matplotlib: only when a report is drawn

    what, _, higher = headline(results[0])
    values = [headline(r)[1] for r in results]
    top = charts.grouped_bars(names, {what: values}, what, f"{what} per layout ({'higher' if higher else 'lower'} "
                              "is better)", labels={what: [fmt(v) for v in values]})
    split = charts.time_split(names, [r["server_cpu_s"] for r in results], [r["io_wait_s"] for r in results],
                              [r["elapsed_s"] for r in results], "where the time went, per layout")
    dirs = TableData(["configuration", "run directory"], [[n, d] for n, d in zip(names, run_dirs)], "", 2)
    return [Section(f"{results[0]['workload']}: {len(names)} layouts side by side", charts=[c for c in (top, split) if c],
                    tables=[table_data(names, results), device_data(names, results), dirs])]
