"""How one run's result reads: terminal tables and HTML sections, from the result document."""

from __future__ import annotations

from rich import box
from rich.table import Table

from dbtier.measure.iostat import COLUMNS
from dbtier.report import charts
from dbtier.report.html import Section, TableData
from dbtier.report.terminal import fmt, iostat_table


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole > 0 else "-"


def placement_text(result: dict) -> str:
    p = result["lab"]["placement"]
    parts = [f"{k}={p[k]}" for k in ("data", "indexes", "wal", "temp")]
    parts += [f"{k}={v}" for k, v in p["objects"].items()]
    return ",".join(parts)


def time_rows(result: dict) -> list[tuple[str, str]]:
    el = result["elapsed_s"]
    rows = [
        ("elapsed", f"{fmt(el)} s"),
        ("server CPU", f"{fmt(result['server_cpu_s'])} s ({pct(result['server_cpu_s'], el)} of elapsed)"),
        ("I/O wait", f"{fmt(result['io_wait_s'])} s ({pct(result['io_wait_s'], el)} of elapsed; summed over the "
                     "server's processes)"),
        ("emulation spin", f"{fmt(result['emulation_spin_s'])} s (CPU the waits spun; not in server CPU)"),
        ("client CPU", f"{fmt(result['client_cpu_s'])} s (dbtier's own driver)"),
        ("host CPU steal", f"{fmt(result.get('host_steal_s', 0.0))} s (taken by the hypervisor; wakes sleepers late)"),
    ]
    for d in result["devices"]:
        pc = d.get("page_cache")
        if pc and pc["hit_pages"] + pc["miss_pages"] + pc["writeback_MB"] > 0:
            rows.append((f"page cache, {d['device']}",
                         f"{pc['hit%']:.1f}% of {pc['hit_pages'] + pc['miss_pages']:,} pages hit; read ahead "
                         f"{fmt(pc['readahead_MB'])} MB; written back {fmt(pc['writeback_MB'])} MB"))
    rows += [(k, fmt(v)) for k, v in result["rates"].items()]
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


def objects_table(result: dict) -> Table:
    table = Table(title="where the objects are (pg_relation_filepath)", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    for col in ("object", "kind", "device", "tablespace", "MiB", "path"):
        table.add_column(col, justify="right" if col == "MiB" else "left")
    for o in result["objects"]:
        table.add_row(o["object"], o["kind"], str(o["device"]), o["tablespace"], fmt(o["bytes"] / 1048576), o["path"])
    return table


def fidelity_notes(result: dict) -> list[str]:
    """Where the emulation fell measurably behind its model, say so (lateness is in every result)."""
    notes = []
    for d in result["devices"]:
        late, n = d["lateness"], d["lateness"]["count"]
        io = d["counters"]
        mean_lat_us = (io["read_ns"] + io["write_ns"] + io["flush_ns"]) / 1e3 / n if n else 0.0
        if n and late["mean_us"] > 0.02 * mean_lat_us and late["mean_us"] > 2:
            notes.append(f"on {d['device']}, I/Os completed {late['mean_us']:.0f} us late on average "
                         f"({100 * late['mean_us'] / mean_lat_us:.1f}% of the modelled {mean_lat_us:.0f} us; p99 "
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


def print_run(console, result: dict) -> None:
    console.print(summary_table(result))
    console.print(iostat_table(with_diskstats(result["devices"]), "devices over the measured interval (iostat -x)"))
    console.print(objects_table(result))
    for note in fidelity_notes(result):
        console.print(f"note: {note}", markup=False)


def _iostat_data(devices: list[dict]) -> TableData:
    devices = with_diskstats(devices)
    rows = [[d["device"], d["profile"], *(fmt(d["iostat"][c]) for c in COLUMNS),
             f"{fmt(d['lateness']['p50_us'])} / {fmt(d['lateness']['p99_us'])}"] for d in devices]
    return TableData(["device", "profile", *COLUMNS, "late p50 / p99 us"], rows, "devices (iostat -x)", 2)


def run_sections(result: dict) -> list[Section]:
    el = result["elapsed_s"]
    chart = charts.time_split([result["workload"]], [result["server_cpu_s"]], [result["io_wait_s"]], [el],
                              "where the time went")
    objects = TableData(["object", "kind", "device", "tablespace", "MiB", "path"],
                        [[o["object"], o["kind"], str(o["device"]), o["tablespace"], fmt(o["bytes"] / 1048576),
                          o["path"]] for o in result["objects"]], "objects", 4)
    times = TableData(["figure", "value"], [list(r) for r in time_rows(result)], "", 2)
    return [Section(f"{result['workload']} placed {placement_text(result)}", text=fidelity_notes(result), charts=[chart],
                    tables=[times, _iostat_data(result["devices"]), objects])]
