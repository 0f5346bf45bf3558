"""How production's statistics read: a delta's profile, and the lab beside production (terminal
tables and an HTML section, from the documents)."""

from __future__ import annotations

from dbtier.report.html import Section, TableData
from dbtier.report.terminal import fmt, show
from dbtier.units import fmt_bytes


def _share(x: float) -> str:
    return f"{100 * x:.1f}%"


def objects_data(delta: dict, limit: int = 20) -> TableData:
    rows = [[o["name"], o["kind"], fmt_bytes(o["bytes"]), f"{o['blocks_read']:,}", _share(o["read_share"]),
             f"{o['blocks_hit']:,}", "-" if o["hit_ratio"] is None else _share(o["hit_ratio"]),
             f"{o.get('seq_scan', 0):,}", f"{o.get('idx_scan', 0):,}", f"{o.get('tuples_written', 0):,}"]
            for o in [o for o in delta["objects"] if o["blocks_read"] or o["blocks_hit"] or o.get("tuples_written")][:limit]]
    return TableData(["object", "kind", "size", "blocks read", "read share", "blocks hit", "hit %", "seq scans",
                      "index scans", "tuples written"], rows,
                     f"production over {fmt(delta['span_s'])} s, per object; blocks read: {delta['labels']['blocks_read']}", 2)


def io_data(delta: dict, limit: int = 15) -> TableData:
    cols = ("reads", "writes", "extends", "hits", "evictions", "fsyncs")
    rows = [[r["backend_type"], r["object"], r["context"], *("-" if r[c] is None else f"{r[c]:,.0f}" for c in cols)]
            for r in delta["io"][:limit]]
    return TableData(["backend", "object", "context", *cols], rows, "pg_stat_io over the span: reads and writes are operations (PostgreSQL 18 "
                     "combines up to io_combine_limit blocks in one), reads past shared_buffers", 3)


def statements_data(delta: dict, limit: int = 15) -> TableData | None:
    s = delta["statements"]
    if not s.get("installed"):
        return None
    rows = [[c["query"][:80], f"{c['calls']:,}", fmt(c["total_exec_time"] or 0.0), f"{c['shared_blks_read'] or 0:,}",
             f"{c['shared_blks_hit'] or 0:,}"] for c in s["classes"][:limit]]
    return TableData(["statement class", "calls", "time ms", "blocks read", "blocks hit"], rows,
                     "statements by class (pg_stat_statements), most blocks read first", 1)


def show_delta(out, delta: dict) -> None:
    db = delta["database"]
    out.print(f"production ({delta['server']['database']}, {delta['server']['version'].split(',')[0]}) over "
              f"{fmt(delta['span_s'])} s: {db.get('xact_commit', 0):,} commits, {db.get('blks_read', 0):,} blocks "
              f"read and {db.get('blks_hit', 0):,} hit in shared_buffers "
              f"({fmt_bytes(delta['shared_buffers_bytes'] or 0)})", markup=False)
    show(out, objects_data(delta))
    show(out, io_data(delta))
    st = statements_data(delta)
    if st:
        show(out, st)
    for note in (delta["statements"].get("note"), delta["kcache"].get("note")):
        if note:
            out.print(f"note: {note}", markup=False)


def _touched(rows: list[dict]) -> list[dict]:
    """The objects either side read or wrote."""
    return [r for r in rows if r["production_blocks_read"] or r["lab_blocks_read"] or r["production_written_share"]
            or r["lab_blocks_written"]]


def comparison_data(doc: dict, limit: int = 15) -> TableData:
    rows = [[r["object"], r["kind"] or "", f"{r['production_blocks_read']:,}", _share(r["production_read_share"]),
             f"{r['lab_blocks_read']:,.0f}", _share(r["lab_read_share"]), _share(r["production_written_share"]),
             _share(r["lab_written_share"])] for r in _touched(doc["objects"])[:limit]]
    rho = doc["rank_correlation"]
    return TableData(["object", "kind", "prod. blocks read", "prod. read share", "lab blocks read", "lab read share",
                      "prod. written share", "lab written share"], rows,
                     f"production beside the lab: rank correlation of reads over production's top {doc['top']} objects "
                     f"{'undefined' if rho is None else f'{rho:.3f}'} (Spearman); production's blocks read: "
                     f"{doc['labels']['production_blocks_read']}; its written share: tuples written", 2)


def show_comparison(out, doc: dict) -> None:
    show(out, comparison_data(doc))
    for line in doc["differences"]:
        out.print(f"difference: {line}", markup=False)


def section(doc: dict) -> Section:
    return Section("production beside the lab", text=list(doc["differences"]), tables=[comparison_data(doc)])


def estimate_data(doc: dict, limit: int = 15) -> TableData:
    rows = [[o["name"], o["kind"], fmt_bytes(o["bytes"]), fmt(o["reads_per_s"]), _share(o["random_share"]),
             fmt(o["writes_per_s"]), fmt(o["saved_s_per_s"] * 1e3), "yes" if o["recommended"] else ""]
            for o in doc["objects"][:limit]]
    return TableData(["object", "kind", "size", "reads/s", "random", "writes/s", "saved ms/s", "fast"], rows,
                     "per object over production's span: reads past shared_buffers and writes per second, and the device "
                     "time the fast device would save each second (estimated)", 2)


def show_estimate(out, doc: dict) -> None:
    d, r = doc["devices"], doc["recommended"]
    out.print(f"ESTIMATE from production's statistics alone (database {doc['delta']['database']} over "
              f"{fmt(doc['delta']['span_s'])} s), "
              f"not a measurement: {d['slow']['name']} ({d['slow']['profile']}, random 8 KiB read "
              f"{fmt(d['slow']['random_read_us'])} us) against {d['fast']['name']} ({d['fast']['profile']}, "
              f"{fmt(d['fast']['random_read_us'])} us), {doc['budget']['described']}", markup=False)
    show(out, estimate_data(doc))
    out.print(f"On the fast device: {', '.join(r['fast']) or 'nothing'} ({fmt_bytes(r['fast_bytes'])}), saving an "
              f"estimated {fmt(r['saved_device_s_per_s'] * 1e3)} ms of the slow device's "
              f"{fmt(r['slow_device_s_per_s'] * 1e3)} ms of device time per second", markup=False)
    out.print(f"Use it: --place {r['place']}", markup=False, soft_wrap=True)
    for a in doc["assumptions"]:
        out.print(f"assumed: {a}", markup=False)
    for n in doc["notes"]:
        out.print(f"note: {n}", markup=False)
    out.print(f"Check it in the lab (both layouts run live on the emulated devices): {doc['check']}",
              markup=False, soft_wrap=True)
