"""Charts as inline SVG (matplotlib), so an HTML report is one self-contained file."""

from __future__ import annotations

import functools
import io
import textwrap

@functools.cache
def pyplot():
    """matplotlib, loaded when the first chart is drawn: a command refused before it draws answers
    without its 0.4 s import."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot

    # Text stays text in the SVG (the page's own font, searchable, a fraction of the size), not glyph paths.
    matplotlib.rcParams["svg.fonttype"] = "none"
    return matplotlib.pyplot


COLORS = ("#c0504d", "#4f81bd", "#9bbb59", "#8064a2", "#f79646", "#4bacc6")


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    pyplot().close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prologue: the SVG sits inside HTML


def _wrap(label: str, width: int = 28) -> str:
    return "\n".join(textwrap.wrap(label, width)) or label


def grouped_bars(groups: list[str], series: dict[str, list[float]], xlabel: str, title: str,
                 labels: dict[str, list[str]] | None = None) -> str:
    """Horizontal bars on a linear axis from 0: one cluster per group (its name in full on the left,
    wrapped, never rotated or cut), one bar per series, each labelled with its value."""
    n = max(1, len(series))
    height = 0.8 / n
    fig, ax = pyplot().subplots(figsize=(7.5, 0.9 + 0.32 * n * len(groups) + 0.25 * len(groups)))
    for i, (name, values) in enumerate(series.items()):
        ys = [g + (i - (n - 1) / 2) * height for g in range(len(groups))]
        bars = ax.barh(ys, values, height, label=name, color=COLORS[i % len(COLORS)])
        ax.bar_label(bars, labels=(labels or {}).get(name) or [f"{v:.3g}" for v in values], fontsize=8, padding=2)
    ax.set_yticks(range(len(groups)), [_wrap(g) for g in groups], fontsize=9)
    ax.invert_yaxis()  # the first group on top, as in the tables
    ax.set_xlim(left=0, right=max((max(v, default=0) for v in series.values()), default=1) * 1.18 or 1)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=11)
    if len(series) > 1:  # beside the plot, where no bar or label can be under it
        ax.legend(frameon=False, fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def time_split(runs: list[str], cpu: list[float], wait: list[float], elapsed: list[float], title: str) -> str | None:
    """Per run, where its time went, as average active processes (Oracle's AAS): the server's CPU
    time and its time waiting for I/O, each summed over its processes and divided by the elapsed
    time, so 2.8 is "on average 2.8 processes waiting". None for a single run: its figures say it."""
    if len(runs) < 2:
        return None
    per = lambda xs: [x / e if e > 0 else 0.0 for x, e in zip(xs, elapsed)]  # noqa: E731
    on_cpu, waiting = per(cpu), per(wait)
    return grouped_bars(runs, {"on the CPU": on_cpu, "waiting for I/O": waiting},
                        "average active server processes (time summed over processes / elapsed)", title,
                        labels={"on the CPU": [f"{v:.2f}" for v in on_cpu],
                                "waiting for I/O": [f"{v:.2f}" for v in waiting]})


def over_time(per_s: list[float], ylabel: str, title: str) -> str:
    """A figure per second over a run: a line on linear axes from 0."""
    fig, ax = pyplot().subplots(figsize=(7.5, 2.8))
    ax.plot(range(len(per_s)), per_s, color=COLORS[1], linewidth=1.2)
    ax.set_xlim(0, max(1, len(per_s) - 1))
    ax.set_ylim(bottom=0, top=max(per_s, default=1) * 1.1 or 1)
    ax.set_xlabel("seconds into the measured run")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def ratio_bars(names: list[str], ratios: list[float], xlabel: str, title: str, band: float = 2.0) -> str:
    """One bar per figure on a ratio axis: 1x marked, ticks written as ratios (1/4x, 1/2x, 1x, 2x, 4x),
    the band within `band` of 1x shaded. Bars grow from 1x, so below 1x and above it read alike."""
    import math

    fig, ax = pyplot().subplots(figsize=(7.5, 0.9 + 0.34 * len(names)))
    ax.set_xscale("log", base=2)
    finite = [r for r in ratios if r and r > 0 and math.isfinite(r)]
    lo = min(finite + [1 / band]) / 1.5
    hi = max(finite + [band]) * 1.5
    ax.set_xlim(lo, hi)
    ax.axvspan(1 / band, band, color="#e8f0e8", zorder=0, label=f"within {band:g}x")
    ax.axvline(1.0, color="#555555", linewidth=1)
    for i, r in enumerate(ratios):
        if not (r and r > 0 and math.isfinite(r)):
            continue
        inside = 1 / band <= r <= band
        ax.barh(i, r - 1 if r >= 1 else 1 - r, left=1 if r >= 1 else r, height=0.6,
                color=COLORS[1] if inside else COLORS[0])
        ax.annotate(f"{r:.2g}x", (r, i), xytext=(3 if r >= 1 else -3, 0), textcoords="offset points",
                    ha="left" if r >= 1 else "right", va="center", fontsize=8)
    ticks = [2.0 ** k for k in range(math.floor(math.log2(lo)), math.ceil(math.log2(hi)) + 1)]
    ax.set_xticks(ticks, [f"{t:g}x" if t >= 1 else f"1/{1 / t:g}x" for t in ticks])
    ax.minorticks_off()
    ax.set_yticks(range(len(names)), [_wrap(n, 40) for n in names], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=11)
    ax.legend(frameon=False, fontsize=8, loc="lower right")
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def budget_curve(fast_mb: list[float], speedup: list[float], budget_mb: float, chosen: tuple[float, float],
                 title: str) -> str:
    """The best speed-up found at each amount of fast storage, a step that holds until the next point
    (linear axes, 1x marked), the budget as a line and the recommendation as a dot."""
    fig, ax = pyplot().subplots(figsize=(7.5, 3.6))
    ax.step(fast_mb, speedup, where="post", color=COLORS[1], label="best predicted placement")
    ax.plot(fast_mb, speedup, "o", color=COLORS[1], markersize=3)
    ax.axhline(1.0, color="#888888", linewidth=0.8)
    ax.annotate("1x: everything on the slow device", (1.0, 1.0), xycoords=("axes fraction", "data"), xytext=(0, -3),
                textcoords="offset points", fontsize=8, color="#666666", ha="right", va="top")
    ax.axvline(budget_mb, color=COLORS[0], linestyle="--", linewidth=1, label="the budget")
    ax.plot([chosen[0]], [chosen[1]], "o", color=COLORS[0], markersize=7, label="the advice")
    ax.set_xlabel("fast storage used, MB")
    ax.set_ylabel("speed-up (x)")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=11)
    ax.legend(frameon=False, fontsize=9, loc="upper left")
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def cost_curve(answers: list[tuple[float, float, bool | None]], curve: list[tuple[float, float]],
               chosen: tuple[float, float], target: float | None, ylabel: str, title: str) -> str:
    """advise --catalog: every answer predicted whole as a dot at its monthly price (filled when it
    meets the target), the best figure at each price as a step, the target as a line and the advice
    as a larger dot; linear axes from 0 so a price twice as high looks it."""
    from matplotlib.ticker import FuncFormatter

    fig, ax = pyplot().subplots(figsize=(7.5, 3.6))
    if curve:  # held on to the dearest answer's price: what more money did not buy
        xs, ys = zip(*sorted(curve))
        end = max([xs[-1], *(c for c, _v, _m in answers)])
        ax.step([*xs, end], [*ys, ys[-1]], where="post", color=COLORS[1], label="the best predicted at each price")
    met = [(c, v) for c, v, m in answers if m is not False]
    missed = [(c, v) for c, v, m in answers if m is False]
    if met:
        ax.plot(*zip(*met), "o", color=COLORS[1], markersize=4, label="answers predicted whole")
    if missed:
        ax.plot(*zip(*missed), "o", markerfacecolor="none", color=COLORS[1], markersize=4,
                label="predicted whole, missing the target")
    if target is not None:
        ax.axhline(target, color=COLORS[2], linestyle="--", linewidth=1, label="the target")
    ax.plot([chosen[0]], [chosen[1]], "o", color=COLORS[0], markersize=8, label="the advice")
    ax.set_xlabel("monthly price")
    ax.set_ylabel(ylabel)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"${v:,.2f}" if v < 10 else f"${v:,.0f}"))
    ax.set_title(title, fontsize=11)
    ax.legend(frameon=False, fontsize=8, loc="best")
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def crash_cuts(cuts: list[tuple[float, int, str]], title: str) -> str:
    """Each power cut where it fell in the run (ms) at the count of commits acknowledged by then, joined
    by a line: held, lost commits, or damage, each its own colour and marker."""
    fig, ax = pyplot().subplots(figsize=(7.5, 3.0))
    line = sorted((t, n) for t, n, _o in cuts)
    ax.plot([t for t, _ in line], [n for _, n in line], color="#999999", linewidth=1.0, label="acknowledged by then")
    styles = {"held": (COLORS[2], "o"), "lost commits": (COLORS[0], "v"), "damage": (COLORS[3], "X")}
    for outcome, (color, marker) in styles.items():
        pts = [(t, n) for t, n, o in cuts if o == outcome]
        if pts:
            ax.scatter([t for t, _ in pts], [n for _, n in pts], color=color, marker=marker, s=28, zorder=3,
                       label=f"cut: {outcome} ({len(pts)})")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("ms into the run")
    ax.set_ylabel("commits acknowledged")
    ax.set_title(title, fontsize=11)
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)
