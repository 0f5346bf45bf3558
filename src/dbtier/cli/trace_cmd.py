"""`dbtier trace`: a recorded trace as Parquet, and a summary of it."""

from __future__ import annotations

from pathlib import Path

import click
import pyarrow as pa
import pyarrow.compute as pc
from rich.table import Table

from dbtier.errors import UserError
from dbtier.measure.trace import convert
from dbtier.report import outputs
from dbtier.report.terminal import console, fmt


@click.command()
@click.argument("trace_dir", type=click.Path(path_type=Path))
@click.option("--output", "-o", type=click.Path(path_type=Path),
              help="the Parquet file to write (default: TRACE_DIR/trace.parquet)")
@click.option("--quiet", "-q", is_flag=True, help="print only the Parquet file's path")
def trace(trace_dir: Path, output: Path | None, quiet: bool) -> None:
    """Convert a trace recorded with --trace into Parquet, and summarise it.

    TRACE_DIR is the folder given to 'dbtier exec --trace' (a run's own trace is in its run
    directory's trace.parquet already). One row per record: the program's calls (what it asked for, and its lateness and host time) and
    the device requests each caused (queue and modelled latency). Both carry time, device, op, offset,
    length, file path and its PostgreSQL class (relation, fsm, vm, wal, temp, other). The summary is of
    the device requests."""
    if not trace_dir.is_dir():
        raise UserError(f"{trace_dir} is not a directory; give the directory passed to --trace")
    output = outputs.check_file(output or trace_dir / "trace.parquet", "--output")
    table = convert(trace_dir, output)
    keys = ("device", "path_class", "op")
    is_request = pc.equal(table["record"].cast(pa.string()), "request")
    requests = table.filter(is_request)
    plain = pa.table({**{k: requests[k].cast(pa.string()) for k in keys},
                      **{k: requests[k] for k in ("len", "latency_us")}})
    summary = plain.group_by(list(keys)).aggregate([("len", "count"), ("len", "sum"), ("latency_us", "mean")])
    summary = summary.sort_by([("device", "ascending"), ("len_sum", "descending")])
    calls = table.num_rows - requests.num_rows
    view = Table(title=f"{calls:,} calls, {requests.num_rows:,} device requests", title_justify="left")
    for col in ("device", "class", "op", "requests", "MiB", "mean latency us"):
        view.add_column(col, justify="left" if col in ("device", "class", "op") else "right")
    for row in summary.to_pylist():
        view.add_row(str(row["device"]), str(row["path_class"]), str(row["op"]), f"{row['len_count']:,}",
                     fmt(row["len_sum"] / 1048576), fmt(row["latency_us_mean"]))
    if not quiet:
        console().print(view)
    console().print(f"written: {output}", soft_wrap=True)
