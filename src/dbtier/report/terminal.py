"""Terminal tables (rich)."""

from __future__ import annotations

import shutil

from rich import box
from rich.console import Console
from rich.table import Table

from dbtier.measure.iostat import COLUMNS


def console(stderr: bool = False) -> Console:
    """Wide enough for iostat-like rows when the output is not a terminal (a pipe, a log, CI)."""
    width = None if (Console(stderr=stderr).is_terminal) else max(160, shutil.get_terminal_size().columns)
    return Console(stderr=stderr, highlight=False, width=width)


def fmt(value: float) -> str:
    if value != value:  # NaN
        return "-"
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def iostat_table(rows: list[dict], title: str) -> Table:
    """rows: {"device", "profile", "iostat": {...}, "lateness": {...}}"""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("device")
    table.add_column("profile")
    for col in COLUMNS:
        table.add_column(col, justify="right")
    table.add_column("late p50/p99 us", justify="right")
    for row in rows:
        io, late = row["iostat"], row["lateness"]
        table.add_row(
            row["device"], row["profile"], *(fmt(io[c]) for c in COLUMNS),
            f"{fmt(late['p50_us'])}/{fmt(late['p99_us'])}",
        )
    return table
