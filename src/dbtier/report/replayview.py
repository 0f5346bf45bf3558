"""How a replay's own figures read (`run replay`: metrics.classes and metrics.replay): the statement
classes, slowest first, and one line of the replay's faithfulness, with the first new failures and
the stalls it reported."""

from __future__ import annotations

from dbtier.report.html import TableData
from dbtier.report.terminal import fmt

#: classes shown before the rest are summed (terminal) or folded (HTML)
SHOWN = 20
_COLUMNS = ["class", "statement", "count", "errors", "mean ms", "p50 ms", "p95 ms", "p99 ms", "production mean ms"]


def _num(v) -> str:
    return "-" if v is None else fmt(v)


def _row(c: dict, width: int) -> list[str]:
    text = " ".join(c["normalized"].split())
    return [str(c["class_id"]), text if len(text) <= width else text[:width - 3] + "...", f"{c['count']:,}",
            f"{c['errors']:,}", _num(c["mean_ms"]), _num(c["p50_ms"]), _num(c["p95_ms"]), _num(c["p99_ms"]),
            _num(c.get("production_mean_ms"))]


def classes_data(result: dict, fold: bool = False) -> TableData | None:
    """Per statement class: count, errors and latency, slowest first. Beyond SHOWN classes, the terminal
    (fold False) sums the rest in a line; HTML (fold True) keeps them, folded."""
    metrics = result.get("metrics") or {}
    classes = metrics.get("classes")
    if not classes:
        return None
    rows = [_row(c, 200 if fold else 70) for c in classes]
    if not fold and len(classes) > SHOWN:
        rest = classes[SHOWN:]
        rows = rows[:SHOWN] + [[f"{len(rest)} more", "", f"{sum(c['count'] for c in rest):,}",
                                f"{sum(c['errors'] for c in rest):,}", "", "", "", "", ""]]
    return TableData(_COLUMNS, rows, f"statement classes, slowest first ({len(classes):,} classes, "
                                     f"{metrics['statements']:,} statements)", 2, fold_after=SHOWN if fold else None)


def faithfulness_line(result: dict) -> str | None:
    r = (result.get("metrics") or {}).get("replay")
    if not r:
        return None
    speed = "max speed" if r["speed"] == "max" else f"speed {r['speed']:g}"
    lag = ("lag not measured at max speed" if r["lag_p50_ms"] is None else
           f"started late against the schedule: p50 {fmt(r['lag_p50_ms'])} ms, p99 {fmt(r['lag_p99_ms'])} ms, max "
           f"{fmt(r['lag_max_ms'])} ms ({r['late_statements']:,} over {r['late_threshold_ms']:g} ms)")
    if r.get("held_p50_ms") is not None:  # the replayer's own share (results before it have none)
        lag += (f"; held by the replayer itself: p50 {fmt(r['held_p50_ms'])} ms, p99 {fmt(r['held_p99_ms'])} ms, max "
                f"{fmt(r['held_max_ms'])} ms")
    missing = r["not_replayed"]
    return (f"replay ({r['mode']} mode, {speed}{', a synthetic capture' if r['synthetic'] else ''}): "
            f"{fmt(r['elapsed_s'])} s against production's {fmt(r['production_span_s'])} s; {lag}; "
            f"{r['new_failures']:,} new failures ({r['expected_failures']:,} expected as in production); "
            f"{r['stalled_sessions']:,} sessions stalled; not replayed: {missing['copy_from_stdin']:,} COPY FROM "
            f"STDIN, {missing['fastpath']:,} fast-path calls")


def detail_lines(result: dict) -> list[str]:
    """The first new failures and every stall reported, one line each."""
    r = (result.get("metrics") or {}).get("replay") or {}
    out = [f"new failure: class {f['class_id']}, session {f['session']} statement {f['seq']}: {f['message']} "
           f"[{f['sqlstate']}] ({f['statement']})" for f in r.get("first_new_failures", [])]
    late = r.get("latest")
    if late:
        line = (f"latest start: session {late['session']} statement {late['seq']} (class {late['class_id']}: "
                f"{late['statement']}) went {fmt(late['lag_ms'])} ms late")
        if late["before"]:
            prod = late["production_s"]
            line += (f"; since its statement {late['since_seq']}, its last on time, its {late['before']:,} statements "
                     f"took {fmt(late['took_s'])} s" + (f" against production's {fmt(prod)} s" if prod is not None else ""))
            w = late.get("slowest")
            if w:
                line += (f"; most longer: statement {w['seq']} (class {w['class_id']}: {w['statement']}), "
                         f"{fmt(w['ms'])} ms against {fmt(w['production_ms'])} ms")
        else:
            line += ": its session's first, after connecting"
        out.append(line)
    for s in r.get("stalls", []):
        holders = "; ".join(f"session {b['session'] if b['session'] is not None else 'pid ' + str(b['pid'])} "
                            f"({b['state']}: {b['statement']})" for b in s["blocked_by"])
        out.append(f"stall: session {s['session']} statement {s['seq']} ({s['statement']}) waited {fmt(s['waited_s'])} s "
                   f"on a lock held by {holders or 'a session gone since'}; cancelled")
    return out
