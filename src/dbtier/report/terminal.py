"""Terminal tables (rich)."""

from __future__ import annotations

import shutil

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dbtier.report.html import is_text



#: the width of a report written to a pipe or a log, unless COLUMNS says otherwise
PIPE_COLUMNS = 160
#: --wide: every column, whatever the terminal's width
WIDE_COLUMNS = 400


def console(stderr: bool = False, wide: bool = False) -> Console:
    """A terminal's own width; a pipe, a log or CI at least PIPE_COLUMNS (COLUMNS is no guide there:
    GNU readline exports 80 into every child of a program that loaded it); --wide, room for every
    column."""
    if wide:
        return Console(stderr=stderr, highlight=False, width=WIDE_COLUMNS)
    width = None if (Console(stderr=stderr).is_terminal) else max(PIPE_COLUMNS, shutil.get_terminal_size().columns)
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


#: words a label writes in capitals
_CAPITALS = {"mb": "MB", "cpu": "CPU", "nopm": "NOPM", "wal": "WAL"}


def label(key: str) -> str:
    """A result key as a reader reads it: lookups_per_s is "lookups/s", client_cpu_us_per_txn
    "client CPU us/txn" (the JSON's keys are letters, digits and underscores; the reports' labels
    are not)."""
    return "/".join(" ".join(_CAPITALS.get(w, w) for w in part.split("_")) for part in key.split("_per_"))


#: the room rich leaves between two columns: a space either side of a blank divider (box.SIMPLE_HEAD)
_GAP = 3


#: a text column is never narrower than its longest word up to this long (longer ones, such as
#: a catalog index's name, may be cut)
WHOLE_WORD = 24


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def fit(columns: list[str], rows: list[list[str]], text_columns: int | tuple[int, ...], width: int,
        drop: tuple[str, ...] = (), conclusion: tuple[int, ...] = ()) -> tuple[list[int], list[int]]:
    """Which columns a table of this width shows, and how wide each is. A number is never cut: a
    number column is as wide as its widest cell. A text column wraps at spaces, down to 13 characters
    or its longest word (a wait event's or a profile's name, up to WHOLE_WORD characters). When even
    that does not fit, columns are left out, those named in `drop` first, then from the right, the
    `conclusion` columns (those that carry the answer) last; the first column always stays. Returns
    (kept indexes, their widths)."""
    natural, least = [], []
    for i, col in enumerate(columns):
        cells = [r[i] for r in rows if i < len(r)]
        widest = max((len(c) for c in cells), default=0)
        natural.append(max(len(col), widest))
        head = _longest_word(col)
        if is_text(text_columns, i):
            word = min(WHOLE_WORD, max((_longest_word(c) for c in cells), default=0))
            least.append(min(natural[-1], max(13, head, word)))
        else:
            least.append(max(widest, head))
    kept = list(range(len(columns)))
    rest = [k for k in range(len(columns) - 1, 0, -1) if k not in conclusion]
    order = [columns.index(c) for c in drop if c in columns] + rest + \
        [k for k in range(len(columns) - 1, 0, -1) if k in conclusion]

    def need(ks):
        return sum(least[k] for k in ks) + _GAP * (len(ks) - 1)

    for k in order:
        if need(kept) <= width or len(kept) == 1:
            break
        if k in kept and k != 0:
            kept.remove(k)
    widths = {k: least[k] for k in kept}
    spare = width - need(kept)
    # the rest goes to the text columns first (their cells wrap), then to the headers that wrap
    for group in ([k for k in kept if is_text(text_columns, k)], kept):
        while spare > 0:
            k = max(group, key=lambda c: natural[c] - widths[c], default=None)
            if k is None or natural[k] <= widths[k]:
                break
            widths[k] += 1
            spare -= 1
    return kept, [widths[k] for k in kept]


#: `dbtier --csv DIR`: every table shown is also written there, whole, one CSV file each
CSV_DIR = None


def write_csv(data, folder) -> None:
    """A TableData as DIR/NN-its-caption.csv (numbered in the order shown; a header row, then its rows)."""
    import csv
    import re

    folder.mkdir(parents=True, exist_ok=True)
    number = len(list(folder.glob("[0-9][0-9]-*.csv"))) + 1
    slug = re.sub(r"[^a-z0-9]+", "-", (data.caption or "table").lower()).strip("-")[:60] or "table"
    with open(folder / f"{number:02d}-{slug}.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(data.columns)
        writer.writerows(data.rows)


def show(out: Console, data, drop: tuple[str, ...] = ()) -> None:
    """Prints a TableData as wide as the terminal allows (see fit), and names any column left out;
    with `dbtier --csv DIR`, writes it whole there too."""
    if CSV_DIR is not None:
        write_csv(data, CSV_DIR)
    kept, widths = fit(data.columns, data.rows, data.text_columns, out.width, drop, data.conclusion)
    # cells as Text: a statement's "[b]" or a path's "[/x]" is the user's text, not rich's markup
    table = Table(title=Text(data.caption) if data.caption else None, title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False, show_edge=False)
    for k, w in zip(kept, widths):
        text = data.is_text(k)
        table.add_column(Text(data.columns[k]), justify="left" if text else "right", width=w, overflow="fold")
    for row in data.rows:
        table.add_row(*(Text(row[k]) if k < len(row) else Text("") for k in kept))
    out.print(table)
    left_out = [c for i, c in enumerate(data.columns) if i not in kept]
    if left_out:
        out.print(f"(not shown at {out.width} columns: {', '.join(left_out)}; --wide shows every column)",
                  markup=False)
