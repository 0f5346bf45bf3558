"""How a reproduction reads: per article, the article's figures beside ours with the reasons, in
the terminal and as one HTML section per article."""

from __future__ import annotations

from rich import box
from rich.table import Table

from dbtier.report import charts
from dbtier.report.html import Section, TableData
from dbtier.report.terminal import fmt

COLUMNS = ["figure", "article", "ours", "agrees", "measured reason"]


def _agrees(f: dict) -> str:
    return {True: "yes", False: "no", None: "see text"}[f["agrees"]]


def figure_rows(art: dict) -> list[list[str]]:
    return [[f["claim"], f["article"], f["ours"], _agrees(f), f["reason"]] for f in art["figures"]]


def run_rows(art: dict) -> list[list[str]]:
    rows = []
    for r in art["runs"]:
        s = r["summary"]
        devices = ", ".join(f"{n}={p}" for n, p in r["devices"])
        if s is None:
            rows.append([r["label"], r["workload"], devices, "failed", "", "", art["failures"].get(r["key"], "")])
            continue
        rows.append([r["label"], r["workload"], devices + (f" ({r['places']})" if r["places"] else ""),
                     fmt(s["elapsed_s"]), fmt(100 * s["server_cpu_s"] / s["elapsed_s"]) if s["elapsed_s"] else "-",
                     fmt(s["io_wait_s"]), s["top_wait"] or "-"])
    return rows


RUN_COLUMNS = ["run", "workload", "devices (placement)", "elapsed s", "server CPU %", "I/O wait s", "top wait event"]


def steal_notes(art: dict) -> list[str]:
    """Runs whose timing the hypervisor disturbed even after the retries: say so beside the figures."""
    out = []
    for r in art["runs"]:
        s = r["summary"]
        if s and s["host_steal_s"] > 0.1 * s["elapsed_s"]:
            out.append(f"note: {r['label']} ran while the hypervisor took {s['host_steal_s']:.1f} s of CPU in "
                       f"{s['elapsed_s']:.1f} s (after {s['attempts']} attempts); its timing is partly the host's")
    return out


def cpu_line(art: dict) -> str:
    """The CPU scale the article's runs used, and where it came from."""
    cpu = art.get("cpu_scale") or {"k": 1.0, "source": ""}
    if "ours_us" not in cpu:
        return f"CPU: this machine's speed ({cpu['source']})" if cpu["source"] else "CPU: this machine's speed"
    return (f"CPU scale {cpu['k']:g}: the article's CPU took {cpu['article_us']:g} us per {cpu['unit']} "
            f"({cpu['source']}), this machine's server {cpu['ours_us']:.1f} us, measured on {cpu['units']:,} of "
            f"them{'; ' + cpu['note'] if cpu.get('note') else ''}")


def scale_line(art: dict) -> str:
    """The scale model the article's runs used, and where its factor came from."""
    scale = art.get("scale_model") or {"factor": 1.0, "source": ""}
    if scale["factor"] == 1.0:
        return f"scale: caches as given ({scale['source']})" if scale["source"] else "scale: caches as given"
    what = scale.get("what", "database")  # results from before the size could be of one table
    return (f"scale model 1/{scale['factor']:g}: the article's {scale['article_bytes'] / 1e9:.3g} GB {what} "
            f"({scale['source']}) stands as {scale['ours_bytes'] / 1e6:.0f} MB here, so every cache is divided "
            f"by {scale['factor']:g} and every disk's seeks are as long as over the article's data")


def terminal_tables(doc: dict) -> list[Table]:
    out = []
    for art in doc["articles"]:
        t = Table(title=f"seed {art['seed']}: {art['title']}", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False, show_lines=False)
        for col in COLUMNS:
            t.add_column(col, overflow="fold", max_width=70 if col == "measured reason" else 44)
        for row in figure_rows(art):
            t.add_row(*row)
        for key, why in art["failures"].items():
            t.add_row(f"{key} failed", "", "", "", why)
        t.caption = "\n".join(([f"the article: {art['source']}"] if art.get("source") else [])
                              + [cpu_line(art), scale_line(art)] + steal_notes(art))
        t.caption_justify = "left"
        out.append(t)
    return out


def sections(doc: dict) -> list[Section]:
    out = []
    for art in doc["articles"]:
        numeric = [f for f in art["figures"] if f.get("article_value") and f.get("our_value")]
        chart = []
        if numeric:
            chart = [charts.ratio_bars([f["claim"] for f in numeric], [f["our_value"] / f["article_value"] for f in numeric],
                                       "ours / the article's (1x: the same figure)",
                                       "each figure of ours against the article's")]
        text = (([f"The article: {art['source']}."] if art.get("source") else [])
                + [f"Hardware: {art['hardware']}.", cpu_line(art) + ".", scale_line(art) + "."]
                + [f"{k} failed: {v}" for k, v in art["failures"].items()] + steal_notes(art))
        out.append(Section(f"seed {art['seed']}: {art['title']}", text=text, charts=chart,
                           tables=[TableData(COLUMNS, figure_rows(art), "figures", 5),
                                   TableData(RUN_COLUMNS, run_rows(art), "runs", 3)]))
    return out
