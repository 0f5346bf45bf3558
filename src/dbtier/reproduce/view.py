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


def title(engine: str) -> str:
    from dbtier import engines

    return engines.get(engine).title


def by_seed(doc: dict) -> list[list[dict]]:
    """The articles' documents grouped by seed, in order: one per engine the reproduction ran."""
    groups: dict[str, list[dict]] = {}
    for art in doc["articles"]:
        groups.setdefault(art["seed"], []).append(art)
    return list(groups.values())


def engine_columns(arts: list[dict]) -> list[str]:
    """A seed's figure table's columns with an engine's figures each, beside the article's."""
    return ["figure", "article", *(title(a.get("engine", "postgres")) for a in arts), "measured reason"]


def engine_rows(arts: list[dict]) -> list[list[str]]:
    """A seed's figures with a column per engine (each "ours (agrees?)"), the reasons one after the other."""
    rows = []
    for figs in zip(*(a["figures"] for a in arts)):
        rows.append([figs[0]["claim"], figs[0]["article"],
                     *(f"{f['ours']} ({_agrees(f)})" if f["ours"] != "-" else "-" for f in figs),
                     "\n".join(f"{title(a.get('engine', 'postgres'))}: {f['reason']}" for a, f in zip(arts, figs))])
    return rows


def run_rows(art: dict) -> list[list[str]]:
    rows = []
    for r in art["runs"]:
        s = r["summary"]
        devices = ", ".join(f"{n}={p}" for n, p in r["devices"])
        if s is None:
            why = art.get("not_run", {}).get(r["key"])
            rows.append([r["label"], r["workload"], devices, "not run" if why else "failed", "", "",
                         why or art["failures"].get(r["key"], "")])
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


def heading(arts: list[dict]) -> str:
    """A seed's heading: its title, and the engine when one other than PostgreSQL ran it alone."""
    art = arts[0]
    alone = len(arts) == 1 and art.get("engine", "postgres") != "postgres"
    return f"seed {art['seed']}: {art['title']}" + (f" (on {title(art['engine'])})" if alone else "")


def table_of(arts: list[dict]) -> tuple[list[str], list[list[str]]]:
    """A seed's figure table: as COLUMNS for one engine, a column per engine for several."""
    return (COLUMNS, figure_rows(arts[0])) if len(arts) == 1 else (engine_columns(arts), engine_rows(arts))


def notes(arts: list[dict]) -> list[str]:
    """What each engine's runs of a seed ran at, and what failed."""
    several = len(arts) > 1
    out = []
    for art in arts:
        who = f"{title(art.get('engine', 'postgres'))}: " if several else ""
        out += [who + cpu_line(art), who + scale_line(art)] + [who + n for n in steal_notes(art)]
        out += [f"{who}{key} failed: {why}" for key, why in art["failures"].items()]
    return out


def terminal_tables(doc: dict) -> list[Table]:
    out = []
    for arts in by_seed(doc):
        t = Table(title=heading(arts), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_lines=False)
        columns, rows = table_of(arts)
        for col in columns:
            t.add_column(col, overflow="fold", max_width=70 if col == "measured reason" else 44)
        for row in rows:
            t.add_row(*row)
        art = arts[0]
        t.caption = "\n".join(([f"the article: {art['source']}"] if art.get("source") else []) + notes(arts))
        t.caption_justify = "left"
        out.append(t)
    return out


def sections(doc: dict) -> list[Section]:
    out = []
    for arts in by_seed(doc):
        several = len(arts) > 1
        chart = []
        for art in arts:
            numeric = [f for f in art["figures"] if f.get("article_value") and f.get("our_value")]
            if numeric:
                who = f" ({title(art.get('engine', 'postgres'))})" if several else ""
                chart.append(charts.ratio_bars([f["claim"] for f in numeric],
                                               [f["our_value"] / f["article_value"] for f in numeric],
                                               "ours / the article's (1x: the same figure)",
                                               f"each figure of ours against the article's{who}"))
        art = arts[0]
        text = (([f"The article: {art['source']}."] if art.get("source") else [])
                + [f"Hardware: {art['hardware']}."] + [n + "." for n in notes(arts)])
        columns, rows = table_of(arts)
        runs = [TableData(RUN_COLUMNS, run_rows(a), f"runs on {title(a.get('engine', 'postgres'))}" if several
                          else "runs", 3) for a in arts]
        out.append(Section(heading(arts), text=text, charts=chart,
                           tables=[TableData(columns, rows, "figures", len(columns)), *runs]))
    return out
