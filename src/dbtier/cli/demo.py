"""`dbtier demo`: the device layer at work, in under a minute.

Seed 000's two shapes of I/O at the device level, over an 8 GiB table file: 8 KiB reads in random
order (index lookups), and 128 KiB reads in sequence (a table scan: PostgreSQL 18's read streams
combine scans into 128 KiB reads; ASE's prefetch used 64 KiB), each on an emulated 7200 rpm SATA disk
and an emulated SATA MLC SSD.
The PostgreSQL version of the experiment arrives with the lab (issue 3) and replaces this."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import click
from rich.table import Table

from dbtier.devices import hostfs
from dbtier.devices.profile import load
from dbtier.devices.session import run_on_device
from dbtier.measure import iostat, lateness
from dbtier.report import jsonout
from dbtier.report.terminal import console, fmt

DEVICES = ("hdd-sata-7200", "ssd-sata-mlc")
SCENARIOS = (  # name, ioload arguments; the same requests on every device
    ("random 8 KiB reads (index lookups)", ["--random", "--count", "500"]),
    ("sequential 128 KiB reads (table scan)", ["--block", "131072", "--count", "1500"]),
)
SPAN = 8 << 30  # sparse: only what is read is ever touched


def scratch_dir() -> Path:
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="dbtier-demo-", dir=shm if shm.is_dir() and hostfs.is_ram(shm) else None))


def run_one(profile_name: str, work: Path, args: list[str]) -> dict:
    data_dir = work / profile_name
    data_dir.mkdir(exist_ok=True)
    data = data_dir / "table"
    with open(data, "wb") as f:
        f.truncate(SPAN)
    cmd = [sys.executable, "-m", "dbtier.devices.ioload", str(data), "--span", str(SPAN), *args]
    out, dev = run_on_device(load(profile_name), data_dir, cmd, name=profile_name)
    elapsed = json.loads(out)["elapsed_ns"] / 1e9  # the I/O loop, not interpreter start-up
    return {"profile": profile_name, "elapsed_s": elapsed, "iostat": iostat.figures(dev, elapsed),
            "lateness": lateness.summary(dev), "reads": dev["reads"]}


@click.command()
@click.option("--output", "-o", type=click.Path(path_type=Path), default=Path("results"), show_default=True,
              help="where the run directory is written")
def demo(output: Path) -> None:
    """Random 8 KiB and sequential 128 KiB reads on an emulated HDD and SSD: elapsed, SSD speed-up,
    r_await / svctm / %util, and emulation lateness. Writes OUTPUT/demo-<time>/result.json."""
    out = console()
    work = scratch_dir()
    results = []
    try:
        for name, args in SCENARIOS:
            runs = {}
            for prof in DEVICES:
                with out.status(f"{name} on {prof}"):
                    runs[prof] = run_one(prof, work, args)
            hdd, ssd = runs[DEVICES[0]], runs[DEVICES[1]]
            results.append({"workload": name, "runs": list(runs.values()),
                            "speedup": hdd["elapsed_s"] / ssd["elapsed_s"]})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table = Table(title="dbtier demo: the device layer (seed 000's access shapes)", title_justify="left")
    for col in ("workload", "device", "reads", "elapsed s", "SSD speed-up", "r_await ms", "svctm ms", "%util",
                "late p50/p99 us"):
        table.add_column(col, justify="left" if col in ("workload", "device") else "right")
    for r in results:
        for i, run in enumerate(r["runs"]):
            io, late = run["iostat"], run["lateness"]
            table.add_row(r["workload"] if i == 0 else "", run["profile"], f"{run['reads']:,}", fmt(run["elapsed_s"]),
                          f"{r['speedup']:.1f}x" if i == 1 else "", fmt(io["r_await"]), fmt(io["svctm"]),
                          fmt(io["%util"]), f"{fmt(late['p50_us'])}/{fmt(late['p99_us'])}")
    out.print(table)
    run_dir = output / time.strftime("demo-%Y%m%d-%H%M%S")
    jsonout.write(run_dir / "result.json", {"kind": "demo", "workloads": results})
    out.print(f"Seed 000 measured 21x for random lookups and 2.17x for scans on ASE; the PostgreSQL run "
              f"of that experiment comes with the lab. Results: {run_dir / 'result.json'}")

