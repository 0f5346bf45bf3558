"""report.html of a crash run and of a crash matrix: the answer first, then each device's durability,
the cuts over the run, every finding with what was not on the media and the command that rebuilds it."""

from __future__ import annotations

from pathlib import Path

from dbtier.report import charts, html

#: findings listed in full; the rest folded
SHOWN = 20


def _outcome(state: dict) -> str:
    return "damage" if state["problems"] else "lost commits" if state["lost"] else "held"


def sections(result: dict, run_dir: Path | str) -> list[html.Section]:
    out = []
    devices = html.TableData(["device", "profile", "what a power cut loses"],
                             [[d["name"], d["profile"], d["durability"]] for d in result["devices"]], text_columns=3)
    run = result["run"]
    said = [f"The run: {run['transactions']:,} transactions acknowledged in {run['elapsed_s']:.1f} s"
            + (f" ({run['tps']:,.0f} tps)." if run.get("tps") else "."),
            "Settings: " + (", ".join(f"{k} = {v}" for k, v in result["settings"].items()) or "the defaults") + "."]
    fault = run.get("fsync_error")
    if fault:
        gone = fault.get("never_written_bytes")  # results made before it was measured have none
        said.append(f"After the run an fsync of {fault['file']} failed with EIO: "
                    + (f"the server logged {fault['server_said']!r}." if fault["server_said"] else "nothing logged.")
                    + " Every cut was made after it."
                    + ("" if gone is None else " At the end the media held all the server had written to it before the "
                       "failure." if not gone else f" At the end {gone / 1024:,.0f} KiB of what the server had written "
                       "to it before the failure were on no media: lost, whether or not a cut's checks find it."))
    out.append(html.Section("The run and its devices", said, tables=[devices]))
    states = result["states"]
    points = [(s["at_ms"], s["acknowledged"], _outcome(s)) for s in states]
    chart = charts.crash_cuts(points, f"{len(states):,} power cuts over the run") if points else None
    rec = [s["recovery_s"] for s in states if s["recovery_s"] is not None]
    last = max(points, default=(0.0, 0, ""))
    text = [f"Each mark is a cut: where it fell in the run, and how many commits had been acknowledged by then "
            f"({last[1]:,} by the last, {last[0]:,.0f} ms in)."]
    if rec:
        rec.sort()
        text.append(f"Recovery on the emulated devices took {rec[0]:.2f} s at the least, {rec[len(rec) // 2]:.2f} s "
                    f"at the median and {rec[-1]:.2f} s at the most.")
    out.append(html.Section("The cuts", text, charts=[chart] if chart else []))
    found = [s for s in states if s["problems"] or s["lost"]]
    if found:
        rows = [[str(s["index"]), s["kind"], f"{s['at_ms']:,.1f}", f"{s['acknowledged']:,}",
                 "-" if s["lost"] is None else f"{s['lost']:,}",
                 "" if not s["lost"] else f"{s['lost_span_ms']:,.0f}",
                 "; ".join(s["problems"]) or "lost commits",
                 f"dbtier crash --rebuild {run_dir} --cut {s['index']}"] for s in found]
        table = html.TableData(["cut", "kind", "at (ms)", "acknowledged", "lost", "lost over (ms)", "found",
                                "rebuild it"], rows, text_columns=(1, 6, 7), fold_after=SHOWN)
        first = found[0]
        notes = [f"At cut {first['index']}, not on the media: "
                 + ("; ".join(f"{p['file']} {p['where']} ({len(p['ranges']):,} write{'s' * (len(p['ranges']) != 1)})"
                             for p in first.get("pending", []))
                    or "nothing pending") + "."]
        notes += [f"{c['before_ms']:,.2f} ms before it: process {c['pid']} {c['call']} {c['file'] or '-'} at "
                  f"{c['offset']:,} ({c['bytes']:,} bytes)" for c in first.get("calls_before", [])[-5:]]
        notes += [f"The page cut {s['index']} names: {s['page']['text']}" for s in found if s.get("page")][:3]
        out.append(html.Section(f"What the cuts found ({len(found):,} of {len(states):,})", notes, tables=[table]))
    return out


def write(path: Path, result: dict, run_dir: Path | str) -> None:
    from dbtier.crash.run import verdict

    html.write(path, f"dbtier crash {result['workload']}", str(run_dir), sections(result, run_dir), [verdict(result)])


def matrix_table(doc: dict) -> html.TableData:
    """A crash matrix's table, a row per configuration: the terminal's and the page's."""
    rows = []
    for r in doc["cells"]:
        first = min((x for x in (r["first_loss"], r["first_damage"]) if x is not None), default=None)
        rec = r["recovery_s"]
        rows.append([r["cell"], r["expect"] or "-", "-" if r["held"] is None else "yes" if r["held"] else "NO",
                     f"{r['lost']:,} of {r['cuts']:,}", f"{r['damaged']:,}", "-" if first is None else f"cut {first}",
                     f"{r['longest_loss_ms']:,.0f}", f"{rec[0]:.2f}-{rec[1]:.2f}" if rec else "-",
                     f"{r['tps']:,.0f}" if r["tps"] else "-", r["folder"]])
    return html.TableData(["configuration", "expected", "held", "lost (cuts)", "damaged (cuts)", "first finding",
                           "longest loss (ms)", "recovery (s)", "tps", "its folder"], rows, text_columns=(0, 1, 2, 9),
                          caption="Each configuration", conclusion=(2,))


def write_matrix(path: Path, doc: dict, run_dir: Path | str) -> None:
    from dbtier.crash import matrix

    table = matrix_table(doc)
    notes = [f"{r['cell']}: {r['verdict']}" for r in doc["cells"]]
    html.write(path, "dbtier crash --matrix", str(run_dir),
               [html.Section("Each configuration", notes, tables=[table])], [matrix.verdict(doc)])
