"""The lab beside production (`dbtier stats compare DELTA RUN_DIR`, `dbtier run ... --production
DELTA`): per object its share of the blocks read and written in production (a delta of its
statistics) and in a lab run (the run's per-object I/O from its trace), the Spearman rank correlation
of the reads over production's top objects, and in plain words where and why the lab differs.

What is compared is like for like as far as the two sides allow: production's blocks read are those
PostgreSQL asked the kernel for (past shared_buffers, some of them kernel-cache hits); the lab's are
the blocks its server read from its emulated devices plus the reads its emulated page cache served.
Production counts no blocks written per object, so its write shares are tuples written."""

from __future__ import annotations

import json
import math
from pathlib import Path

from dbtier.errors import UserError
from dbtier.production.delta import READ_LABEL, TOAST_SUFFIX, WRITE_LABEL, command
from dbtier.units import fmt_bytes

#: the rank correlation is over production's top objects by blocks read
TOP = 10
#: a share that differs by more than this between the two sides is named
SHARE_GAP = 0.10
_FORKS = (" [fsm]", " [vm]")


def load_run(run_dir: Path) -> dict:
    """A run directory's result.json (a run, not a comparison or an advice), checked where it is read."""
    from dbtier.report import jsonout

    path = Path(run_dir) / "result.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{run_dir}: no result.json; give the run directory 'dbtier run' printed") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: cannot be read ({exc}); give the run directory 'dbtier run' printed") from None
    if not isinstance(doc, dict):
        raise UserError(f"{path}: not a result document")
    jsonout.check_version(doc, path)
    if doc.get("kind") != "run":
        raise UserError(f"{path}: a {doc.get('kind')} document; give one run's directory (a comparison's layouts "
                        "each have theirs)")
    return doc


def lab_objects(result: dict) -> dict[str, dict]:
    """The run's per-object blocks read and written (over every phase and device), by name; forks
    count with their relation."""
    block = 8192
    rows = [r for ph in (result.get("phases") or [result]) for r in ph.get("object_io") or []]
    out: dict[str, dict] = {}
    tables = {r["object"] for r in rows if r.get("kind") == "table"}
    for r in rows:
        if r.get("kind") not in ("table", "index", "toast"):
            continue
        name = r["object"]
        for fork in _FORKS:
            name = name.removesuffix(fork)
        if r["kind"] == "toast" and name.removesuffix(TOAST_SUFFIX) not in tables:
            continue  # a system catalog's TOAST: production's statistics count user objects only
        o = out.setdefault(name, {"blocks_read": 0.0, "blocks_written": 0.0, "kind": r["kind"]})
        o["blocks_read"] += r.get("read_bytes", 0) / block + r.get("cached_reads", 0)
        o["blocks_written"] += r.get("write_bytes", 0) / block
    return out


def _lab_commands(result: dict) -> set[str] | None:
    """The statement commands the lab ran, where its result names its statements."""
    runs = result.get("phases") or [result]
    texts = [s.get("statement", "") for ph in runs for s in (ph.get("metrics") or {}).get("statement_times", [])]
    return {command(t) for t in texts} if texts else None


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's rank correlation (ties averaged); None where it is undefined (fewer than 3 objects,
    or one side all alike)."""
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return None
    from scipy.stats import spearmanr

    rho = float(spearmanr(x, y).statistic)
    return rho if math.isfinite(rho) else None


def compare(delta: dict, result: dict, top: int = TOP) -> dict:
    """The comparison document (result.json's `production` key)."""
    lab = lab_objects(result)
    prod = {o["name"]: o for o in delta["objects"]}
    lab_read = sum(o["blocks_read"] for o in lab.values())
    lab_written = sum(o["blocks_written"] for o in lab.values())
    names = sorted(set(prod) | {n for n, o in lab.items() if o["blocks_read"] or o["blocks_written"]})
    rows = []
    for n in names:
        p, lo = prod.get(n, {}), lab.get(n, {})
        rows.append({"object": n, "kind": p.get("kind") or lo.get("kind"),
                     "production_blocks_read": p.get("blocks_read", 0), "production_read_share": p.get("read_share", 0.0),
                     "production_written_share": p.get("written_share", 0.0),
                     "lab_blocks_read": round(lo.get("blocks_read", 0.0), 1),
                     "lab_read_share": lo.get("blocks_read", 0.0) / lab_read if lab_read else 0.0,
                     "lab_blocks_written": round(lo.get("blocks_written", 0.0), 1),
                     "lab_written_share": lo.get("blocks_written", 0.0) / lab_written if lab_written else 0.0,
                     "in_production": n in prod, "in_lab": n in lab})
    rows.sort(key=lambda r: (-r["production_blocks_read"], -r["lab_blocks_read"], r["object"]))
    ranked = [r for r in rows if r["production_blocks_read"] > 0][:top]
    rho = spearman([r["production_blocks_read"] for r in ranked], [r["lab_blocks_read"] for r in ranked])
    return {"delta": {"first": delta["first"]["taken_at"], "second": delta["second"]["taken_at"],
                      "span_s": delta["span_s"], "database": delta["server"]["database"]},
            "objects": rows, "top": len(ranked), "rank_correlation": rho,
            "labels": {"production_blocks_read": READ_LABEL, "production_written_share": WRITE_LABEL,
                       "lab_blocks_read": "blocks the lab's server read from its devices or its emulated page cache"},
            "differences": differences(delta, result, rows, ranked, rho)}


def differences(delta: dict, result: dict, rows: list[dict], ranked: list[dict], rho: float | None) -> list[str]:
    """Where and why the lab differs, one sentence each; the most telling first."""
    out = []
    if rho is None:
        out.append(f"the rank correlation is undefined over {len(ranked)} objects production read (at least 3, "
                   "with reads that differ, are needed)")
    for r in ranked:
        if r["lab_blocks_read"] == 0:
            why = ("the lab has no such object" if not r["in_lab"] else
                   "the lab's workload never read it past its cache")
            out.append(f"production read {r['object']} ({r['production_blocks_read']:,} blocks, "
                       f"{r['production_read_share']:.0%} of its reads); the lab never did: {why}")
    prod_names = {r["object"] for r in rows if r["in_production"]}
    for r in rows:
        if r["lab_blocks_read"] > 0 and r["production_blocks_read"] == 0:
            where = "production has no such object" if r["object"] not in prod_names else "production never read it"
            out.append(f"the lab read {r['object']} ({r['lab_read_share']:.0%} of its reads); {where}")
    for r in ranked:
        gap = r["lab_read_share"] - r["production_read_share"]
        if r["lab_blocks_read"] > 0 and abs(gap) > SHARE_GAP:
            out.append(f"{r['object']} takes {r['lab_read_share']:.0%} of the lab's reads against "
                       f"{r['production_read_share']:.0%} of production's")
    lab_desc = result.get("lab") or {}
    prod_cache, lab_cache = delta.get("shared_buffers_bytes"), lab_desc.get("cache_bytes")
    factor = float((lab_desc.get("scale_model") or {}).get("factor") or 1.0)
    if lab_cache and factor != 1.0:  # a scale model divided the cache as it divided the data: compare whole sizes
        lab_cache = int(lab_cache * factor)
    if prod_cache and lab_cache and abs(lab_cache - prod_cache) > 0.05 * prod_cache:
        size = "smaller" if lab_cache < prod_cache else "larger"
        effect = ("it reads past its cache blocks production found in its own" if lab_cache < prod_cache
                  else "it finds in its cache blocks production read")
        out.append(f"the lab's cache (shared_buffers {fmt_bytes(lab_cache)}) is {size} than production's "
                   f"({fmt_bytes(prod_cache)}): {effect}; give --cache {fmt_bytes(prod_cache).replace(' ', '')} "
                   "(or a scale model) to match")
    if (result.get("lab") or {}).get("io_mode") == "direct":
        out.append("the lab ran with direct I/O, where every block read past shared_buffers reaches the device; "
                   "production's may have been kernel-cache hits")
    stmts = delta.get("statements") or {}
    lab_cmds = _lab_commands(result)
    if stmts.get("installed") and lab_cmds is not None:
        for c in stmts.get("commands", []):
            if c["command"] not in lab_cmds and c["command"] not in ("BEGIN", "COMMIT", "ROLLBACK", "SET", "SHOW"):
                out.append(f"production ran {c['calls']:,} {c['command']} statements ({c['classes']} classes); "
                           "the lab ran none")
    elif not stmts.get("installed"):
        out.append(f"statement classes not compared: {stmts.get('note', 'pg_stat_statements was not read')}")
    else:
        out.append("statement classes not compared: the lab's run names no statements (a run sql does)")
    return out

