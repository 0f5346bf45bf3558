"""Terminal tables: what the user wrote is printed as written."""

from rich.console import Console

from dbtier.report.html import TableData
from dbtier.report.terminal import fit, show


def test_a_cell_is_text_not_markup():
    """A statement or a path may hold "[b]" or "[/x]": printed as it is, never styled or refused."""
    out = Console(width=80, record=True)
    show(out, TableData(["statement", "calls"], [["SELECT '[b]x' || '[/x]'", "3"]], "from [/tmp]", 1))
    text = out.export_text()
    assert "SELECT '[b]x' || '[/x]'" in text and "from [/tmp]" in text


def test_a_narrow_table_keeps_its_numbers_whole():
    """fit: numbers never cut; columns left out, the named ones first, the first column never."""
    columns = ["device", "profile", "r/s", "svctm", "r_await", "late p50 / p99 us"]
    rows = [["hdd", "hdd-sata-7200", "12,345", "5.26", "5.31", "22.5 / 131"]]
    kept, widths = fit(columns, rows, 2, 200)
    assert kept == list(range(6)) and widths == [6, 13, 6, 5, 7, 17]  # room for every header
    kept, widths = fit(columns, rows, 2, 41, drop=("svctm",))
    assert [columns[k] for k in kept] == ["device", "profile", "r/s", "r_await"]
    assert sum(widths) + 3 * (len(widths) - 1) <= 41 and widths[2] >= len("12,345")
    kept, _ = fit(columns, rows, 2, 5)
    assert kept == [0]  # the first column stays, whatever the width


def test_the_columns_that_carry_the_answer_are_dropped_last():
    """Too narrow for every column: the others go from the right, the conclusion's last."""
    from dbtier.report.terminal import fit

    columns = ["transaction", "layout", "tps", "p50 ms", "p95 ms", "p99 ms", "speed-up vs hdd"]
    rows = [["simple-update", "ram", "2,460", "0.47", "0.78", "1.05", "56.54x"]]
    kept, _ = fit(columns, rows, 2, 50)
    assert 6 not in kept  # by default: from the right, the speed-up first
    kept, _ = fit(columns, rows, 2, 50, conclusion=(6, 5))
    assert {0, 6, 5} <= set(kept) and 4 not in kept
