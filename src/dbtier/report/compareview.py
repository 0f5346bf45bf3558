"""How a comparison reads: one row per configuration, the first one the baseline."""

from __future__ import annotations

from dbtier.report.html import Section, TableData
from dbtier.report.runview import _top_wait, pct
from dbtier.report.terminal import fmt
from dbtier.workloads.compare import headline, speedups


def device_names(results: list[dict]) -> list[str]:
    out: list[str] = []
    for r in results:
        for d in r["devices"]:
            if d["device"] not in out:
                out.append(d["device"])
    return out


def table_data(names: list[str], results: list[dict]) -> TableData:
    what = headline(results[0])[0]
    devices = device_names(results)
    rows = []
    for name, r, up in zip(names, results, speedups(results)):
        by = {d["device"]: d for d in r["devices"]}
        cells = []
        for dev in devices:
            d = by.get(dev)
            cells.append("-" if d is None else f"{d['profile']}: {fmt(d['iostat']['%util'])}% "
                                               f"{fmt(d['iostat']['r_await'])}/{fmt(d['iostat']['w_await'])} ms")
        rows.append([name, fmt(headline(r)[1]), f"{up:.2f}x", pct(r["server_cpu_s"], r["elapsed_s"]), _top_wait(r),
                     *cells])
    shown = results[0].get("shown_phase")
    return TableData(["configuration", what, f"speed-up vs {names[0]}", "server CPU", "top wait event",
                      *(f"{dev}: %util r/w_await" for dev in devices)], rows,
                     f"{results[0]['workload']} on {len(names)} layouts (the data loaded once, copied into each)"
                     + (f"; elapsed over every phase, devices and waits of the longest ({shown})" if shown else ""), 1)


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
                    tables=[table_data(names, results), dirs])]
