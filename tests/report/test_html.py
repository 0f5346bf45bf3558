"""The HTML page: the verdict before anything else, a contents list, sections that fold, and nothing
fetched from elsewhere (one self-contained file)."""

import re

from dbtier.report import charts, html


def page() -> str:
    chart = charts.grouped_bars(["random-index", "table-scan"], {"hdd": [16.4, 6.6], "ssd": [0.8, 2.2]},
                                "elapsed, s", "elapsed per device")
    sections = [html.Section("first", text=["a note"], charts=[chart],
                             tables=[html.TableData(["device", "r/s"], [["hdd", "187"]], "devices", 1)]),
                html.Section("second", text=["more"])]
    return html.render("dbtier run", "now", sections, ["random-index took 1.63 s and was storage-bound."])


def test_the_verdict_comes_first_then_contents_then_folding_sections():
    text = page()
    assert text.index('class="verdict"') < text.index("<nav>") < text.index("<details")
    assert "random-index took 1.63 s and was storage-bound." in text.split("<nav>")[0]
    assert text.count("<details open") == 2 and 'href="#s2"' in text


def test_nothing_is_fetched_from_elsewhere():
    text = page()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", text)
    assert "<script" not in text and "<link" not in text and "@import" not in text


def test_charts_read_plainly():
    """Linear axes (no log ticks such as 2x10^1); a ratio axis says 1x and writes its ticks as ratios."""
    bars = charts.grouped_bars(["a", "b"], {"s": [21.0, 3.6]}, "elapsed, s", "t")
    assert ">21<" in bars or ">21.0<" in bars  # the value labels, as text
    assert "10^" not in bars and "\\mathdefault" not in bars
    ratios = charts.ratio_bars(["x", "y"], [0.3, 9.4], "ours / the article's", "t")
    for tick in ("1x", "2x", "1/2x", "8x"):
        assert f">{tick}<" in ratios, tick
    assert ">0.3x<" in ratios and ">9.4x<" in ratios  # each bar says its ratio
    assert charts.time_split(["one run"], [1.0], [2.0], [3.0], "t") is None  # a single run: no chart


def test_a_long_table_never_runs_off_the_page_and_folds_its_rest():
    """A run of 754 statements: the terminal shows the 40 slowest; the page keeps all, slowest first,
    the rest folded. Every table sits in a box of the page's width whose long cells break (a path, a
    device spec) and whose numbers do not."""
    from dbtier.report import runview

    times = [{"where": f"run.sql:{i}", "statement": f"SELECT {i}", "elapsed_s": (i % 97) / 100, "rows": i}
             for i in range(754)]
    result = {"metrics": {"statement_times": times}}
    shown = runview.statements_data(result)
    assert len(shown.rows) == 40 and shown.fold_after is None
    folded = runview.statements_data(result, fold=True)
    assert len(folded.rows) == 754 and folded.fold_after == 40 and "the 40 slowest of 754" in folded.caption
    elapsed = [float(r[3]) for r in folded.rows]
    assert elapsed == sorted(elapsed, reverse=True)
    text = html.render("dbtier run", "now", [html.Section("run", tables=[folded])], [])
    assert "714 more rows" in text and text.count('<div class="table"><table>') == 2
    assert "overflow-wrap: anywhere" in text and "td.num { text-align: right; white-space: nowrap; }" in text


def test_a_long_placement_is_one_short_line():
    from dbtier.report import runview

    objects = {f"t{i}": "ssd" for i in range(75)}
    result = {"lab": {"placement": {"data": "hdd", "indexes": "hdd", "wal": "ssd", "temp": "hdd", "dump": "hdd",
                                    "objects": objects}}}
    text = runview.placement_text(result)
    assert text.startswith("data=hdd,indexes=hdd,wal=ssd,temp=hdd,dump=hdd,t0=ssd,t1=ssd,t2=ssd,t3=ssd and 71 more")
    assert len(text) < 160
