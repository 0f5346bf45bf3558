"""Charts as inline SVG (matplotlib), so an HTML report is one self-contained file."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = ("#c0504d", "#4f81bd", "#9bbb59", "#8064a2", "#f79646", "#4bacc6")


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prologue: the SVG sits inside HTML


def grouped_bars(groups: list[str], series: dict[str, list[float]], ylabel: str, title: str,
                 log: bool = False, labels: dict[str, list[str]] | None = None) -> str:
    """One cluster of bars per group, one bar per series; labels go above the bars."""
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    n = max(1, len(series))
    width = 0.8 / n
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        bars = ax.bar(xs, values, width, label=name, color=COLORS[i % len(COLORS)])
        if labels and name in labels:
            ax.bar_label(bars, labels=labels[name], fontsize=8, padding=2)
    if len(groups) > 4:  # long names side by side would overlap
        ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right", fontsize=8)
    else:
        ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    if log:
        ax.set_yscale("log")
    ax.legend(frameon=False, fontsize=9)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def time_split(runs: list[str], cpu: list[float], wait: list[float], elapsed: list[float], title: str) -> str:
    """Per run, as a share of its elapsed time: the server's CPU and its time waiting on devices
    (summed over its processes, so concurrent waits can pass 100%)."""
    share = lambda xs: [100 * x / e if e > 0 else 0.0 for x, e in zip(xs, elapsed)]  # noqa: E731
    cpu_pct, wait_pct = share(cpu), share(wait)
    return grouped_bars(runs, {"server CPU": cpu_pct, "I/O wait (sum over processes)": wait_pct},
                        "% of elapsed", title,
                        labels={"server CPU": [f"{v:.0f}%" for v in cpu_pct],
                                "I/O wait (sum over processes)": [f"{v:.0f}%" for v in wait_pct]})


def budget_curve(fast_mb: list[float], speedup: list[float], budget_mb: float, chosen: tuple[float, float],
                 title: str) -> str:
    """The best speed-up found at each amount of fast storage, a step that holds until the next point
    (linear axes, 1x marked), the budget as a line and the recommendation as a dot."""
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
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
