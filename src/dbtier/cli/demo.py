"""`dbtier demo`: seed 000 on PostgreSQL 18, an emulated 7200 rpm SATA disk against an emulated
SATA MLC SSD: random index lookups and full table scans, each run from a cold cache on a database
placed wholly on one device, as the article's DBHDD and DBSSD were."""

from __future__ import annotations

from pathlib import Path

import click

from dbtier import units

from dbtier.cli.progress import progress_for
from dbtier.devices.profile import load
from dbtier.pg import placement
from dbtier.experiments import preflight
from dbtier.pg.lab import LabOptions
from dbtier.devices.spec import DeviceSpec
from dbtier.report import html, jsonout, outputs, verdict
from dbtier.report.html import Section, TableData
from dbtier.report.rundir import run_dir
from dbtier.report.terminal import console, fmt, show
from dbtier.workloads import registry
from dbtier.experiments.runner import run_workload
from dbtier.workspace import Workspace

DEVICES = (("hdd", "hdd-sata-7200"), ("ssd", "ssd-sata-mlc"))
#: Seed 000's elapsed times (ms) on ASE 15.7, HDD and SSD, and the speed-ups the article states.
SEED = {
    "random-index": {"hdd_s": 4800.326, "ssd_s": 228.233, "article": "20x (80 min against 4 min)"},
    "table-scan": {"hdd_s": 5572.443, "ssd_s": 2573.803, "article": "2.17x (92 min against 43 min)"},
}


def summary_rows(results: list[dict]) -> list[list[str]]:
    rows = []
    for w in results:
        for i, r in enumerate(w["runs"]):
            dev = r["devices"][0]
            io, late = dev["iostat"], dev["lateness"]
            rows.append([w["workload"] if i == 0 else "", dev["profile"], fmt(r["elapsed_s"]),
                         f"{w['speedup']:.1f}x" if i == 1 else "", f"{w['seed_speedup']:.1f}x" if i == 1 else "",
                         fmt(io["r_await"]), fmt(io["svctm"]), fmt(io["%util"]),
                         fmt(r["server_cpu_s"]), fmt(r["io_wait_s"]),
                         f"{fmt(late['p50_us'])}/{fmt(late['p99_us'])}"])
    return rows


COLUMNS = ["workload", "device", "elapsed s", "SSD speed-up", "seed 000", "r_await ms", "svctm ms", "%util",
           "server CPU s", "I/O wait s", "late p50/p99 us"]


def report_sections(results: list[dict]) -> list[Section]:
    from dbtier.report import charts, runview  # matplotlib: loaded once there is something to chart

    names = [w["workload"] for w in results]
    series = {prof: [w["runs"][i]["elapsed_s"] for w in results] for i, (_, prof) in enumerate(DEVICES)}
    labels = {prof: [f"{v:.1f} s" for v in vals] for prof, vals in series.items()}
    elapsed = charts.grouped_bars(names, series, "elapsed, s", "elapsed per device", labels=labels)
    runs = [f"{w['workload']}\n{r['devices'][0]['device']}" for w in results for r in w["runs"]]
    split = charts.time_split(runs, [r["server_cpu_s"] for w in results for r in w["runs"]],
                              [r["io_wait_s"] for w in results for r in w["runs"]],
                              [r["elapsed_s"] for w in results for r in w["runs"]], "server CPU against I/O wait")
    top = Section("SSD against HDD", text=[
        "Each run: the database wholly on one emulated device, the data loaded, the server restarted "
        "(cold cache), then the workload measured. Seed 000 measured ASE 15.7 on an OCZ Vertex 3 and a "
        "7200 rpm SATA disk."], charts=[elapsed, split],
        tables=[TableData(COLUMNS, summary_rows(results), "", 2)])
    sections = [top]
    for w in results:
        for r in w["runs"]:
            sections += runview.run_sections(r)
    return sections


@click.command()
@click.option("--rows", default=16000, show_default=True, help="rows in seed 000's table t (one per 8 KiB page)")
@click.option("--scans", default=10, show_default=True, help="full scans in the table-scan scenario")
@click.option("--cache", default="32MB", show_default=True, help="the database cache (shared_buffers)")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=Path("results"), show_default=True,
              help="where the run directory is written")
@click.option("--pg-bin", type=click.Path(path_type=Path), help="another PostgreSQL 18 install's bin folder")
@click.option("--workspace", type=click.Path(path_type=Path),
              help="a folder in which dbtier makes its own for clusters (default: /dev/shm, in RAM)")
@click.option("--quiet", "-q", is_flag=True, help="print only the summary table")
@click.option("--wide", is_flag=True, help="print every column, however narrow the terminal")
def demo(rows: int, scans: int, cache: str, output: Path, pg_bin: Path | None, workspace: Path | None,
         quiet: bool, wide: bool) -> None:
    """Seed 000 on PostgreSQL: random index lookups and full table scans, on an emulated 7200 rpm SATA
    HDD and an emulated SATA MLC SSD (about 3 minutes).

    Prints, per scenario and device: elapsed, the SSD's speed-up (beside the article's), r_await,
    svctm and %util of the device, the server's CPU time against its I/O wait, and the emulation's
    lateness. Writes OUTPUT/demo-<time>/ with result.json, report.html (charts and tables) and the
    server logs."""
    out = console(wide=wide)
    say = (lambda _line: None) if quiet else (lambda line: out.print(line, markup=False))
    options = LabOptions(cache_bytes=units.parse_option_size(cache, "--cache"), pg_bin=pg_bin, workspace=workspace)
    params = {"random-index": {"rows": rows}, "table-scan": {"rows": rows, "scans": scans}}
    results = []
    # Every check before the first thing is made (each scenario runs on one device at a time).
    for name in ("random-index", "table-scan"):
        dev, prof = DEVICES[0]
        preflight.check_run(registry.get(name)(**params[name]), [DeviceSpec(dev, load(prof))],
                           placement.parse([], [dev]), options)
    outputs.check_dir(output, "--output")
    with run_dir(output, "demo", Workspace.open(workspace)) as folder:
        for name in ("random-index", "table-scan"):
            cls = registry.get(name)
            runs = []
            for dev, prof in DEVICES:
                artifacts = folder.path / f"{name}-{dev}"
                artifacts.mkdir()
                with progress_for(out, quiet, prefix=f"{name} on {prof}: ") as progress:
                    runs.append(run_workload(cls(**params[name]), [DeviceSpec(dev, load(prof))],
                                             placement.parse([], [dev]), options, progress, artifacts, say))
                if not quiet:
                    out.print(f"{name} on {prof}: {runs[-1]['elapsed_s']:.1f} s", markup=False)
            seed = SEED[name]
            results.append({"workload": name, "speedup": runs[0]["elapsed_s"] / runs[1]["elapsed_s"],
                            "seed_speedup": seed["hdd_s"] / seed["ssd_s"], "seed": seed, "runs": runs})
        jsonout.write(folder.path / "result.json", {"kind": "demo", "workloads": results})
        html.write(folder.path / "report.html", "dbtier demo: seed 000 on PostgreSQL 18",
                   "an emulated 7200 rpm SATA HDD against an emulated SATA MLC SSD", report_sections(results),
                   verdict.demo(results))
    for line in verdict.demo(results):
        out.print(line, markup=False)
    show(out, TableData(COLUMNS, summary_rows(results), "dbtier demo: seed 000 on PostgreSQL 18, emulated HDD against SSD",
                        2), ("svctm ms", "late p50/p99 us", "I/O wait s", "server CPU s", "seed 000"))
    from dbtier.report import runview

    for w in results:
        for r in w["runs"]:
            for note in runview.fidelity_notes(r):
                out.print(f"note: {w['workload']} {note}", markup=False)
    out.print(f"run directory: {folder.final} (result.json, report.html)", markup=False)
    folder.check()
