"""How a comparison is printed: the verdict, the layouts, each phase and transaction type, the
devices, and its --json copy. `compare` and `run --repeat` print theirs so."""

from __future__ import annotations

from pathlib import Path

from dbtier.report import jsonout
from dbtier.report.terminal import show


def print_comparison(out, done, json_path: Path | None, beside: str) -> Path:
    from dbtier.report import compareview, verdict

    doc = done.doc
    for line in verdict.compare(done.names, done.results, doc["speedups"], doc["headline"], doc["largest_difference"],
                                doc.get("spread")):
        out.print(line, markup=False)
    for note in doc.get("notes", []):
        out.print(note, markup=False)
    show(out, compareview.table_data(done.names, done.results, doc.get("earlier", False), doc.get("spread")))
    parts = {"phases": doc["phases"], "scripts": doc["scripts"]}
    for table in (compareview.phase_data(done.names, parts), compareview.script_data(done.names, parts)):
        if table is not None:
            show(out, table)
    show(out, compareview.device_data(done.names, done.results))
    if doc.get("nodes"):
        from dbtier.report.nodesview import nodes_table

        show(out, nodes_table(doc["nodes"]))
    out.print(f"comparison: {done.run_dir} (result.json, report.html); {beside}", markup=False)
    if json_path:
        jsonout.write(json_path, {**doc, "run_dir": str(done.run_dir)})
    done.check()
    return done.run_dir
