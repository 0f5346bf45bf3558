"""Production's profile over a span of time (`dbtier stats delta FIRST SECOND`): two snapshots of one
server differenced. It is a file of its own, rather than two snapshots handed to every reader, so the
checks (one server, one database, in order, no statistics reset between) are made once, when it is
made, and `stats compare`, `run --production` and `advise --from-stats` read one profile.

Per object (table, index, TOAST) it holds the blocks read and hit: a block "read" is one PostgreSQL
did not find in shared_buffers and asked the kernel for, which may have been a hit in the kernel's
page cache; only pg_stat_kcache tells them apart (READ_LABEL says so wherever the figure is shown).
Beside them: each object's share of the reads, its scans and tuples, pg_stat_io by backend, object
and context, pg_stat_statements by statement class, and pg_stat_kcache when it is installed."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from dbtier.errors import UserError
from dbtier.production import snapshot as snap

KIND = "stats-delta"
READ_LABEL = "read past shared_buffers: may be a kernel-cache hit; only pg_stat_kcache tells them apart"
WRITE_LABEL = ("production's statistics count no blocks written per object: tuples inserted, updated and "
               "deleted stand for them")
TOAST_SUFFIX = " (TOAST)"  # as the lab names a TOAST relation and its index (measure/objects.py)


def object_name(schema: str, name: str) -> str:
    """As the lab names it: the bare name in public, schema.name elsewhere."""
    return name if schema == "public" else f"{schema}.{name}"


def _when(doc: dict, path) -> datetime:
    try:
        t = datetime.fromisoformat(doc["taken_at"])
    except ValueError:
        raise UserError(f"{path}: taken_at {doc['taken_at']!r} is not an ISO 8601 time; take the snapshot again") from None
    if t.tzinfo is None:
        raise UserError(f"{path}: taken_at {doc['taken_at']!r} has no time zone; take the snapshot again")
    return t


def _check_pair(first: dict, second: dict, p1, p2) -> float:
    a, b = first["server"], second["server"]
    if a["system_identifier"] != b["system_identifier"]:
        raise UserError(f"{p2}: a snapshot of another server (system_identifier {b['system_identifier']}) than "
                        f"{p1}'s ({a['system_identifier']}); give two snapshots of one server")
    if a["database"] != b["database"]:
        raise UserError(f"{p2}: a snapshot of database {b['database']!r}, {p1} of {a['database']!r}; give two "
                        "snapshots of one database")
    span = (_when(second, p2) - _when(first, p1)).total_seconds()
    if span <= 0:
        raise UserError(f"{p2}: taken at {second['taken_at']}, not after {p1} ({first['taken_at']}); give the older "
                        "snapshot first")
    resets = [("pg_stat_database", first["database"].get("stats_reset"), second["database"].get("stats_reset"))]
    io1 = {tuple(r.get(k) for k in snap.IO_KEYS): r.get("stats_reset") for r in first["io"]}
    resets += [("pg_stat_io", io1[key], r.get("stats_reset")) for r in second["io"]
               if (key := tuple(r.get(k) for k in snap.IO_KEYS)) in io1]
    s1, s2 = first["statements"], second["statements"]
    if s1.get("installed") and s2.get("installed"):
        resets.append(("pg_stat_statements_info", s1["info"].get("stats_reset"), s2["info"].get("stats_reset")))
    for view, before, after in resets:
        if before != after:
            raise UserError(f"{p2}: the statistics were reset between the snapshots ({view}.stats_reset {before} -> "
                            f"{after}); take a new first snapshot after the reset")
    return span


def _sub(after: dict, before: dict | None, keys, where: str, p2) -> dict:
    out = {}
    for k in keys:
        a, b = after.get(k), (before or {}).get(k)
        if a is None:
            out[k] = None
            continue
        d = a - (b or 0)
        if d < 0:
            raise UserError(f"{p2}: {where}: {k} went down ({b} -> {a}): its statistics were reset between the "
                            "snapshots; take a new first snapshot after the reset")
        out[k] = d
    return out


TABLE_COUNTS = ("seq_scan", "seq_tup_read", "idx_scan", "idx_tup_fetch", "n_tup_ins", "n_tup_upd", "n_tup_del",
                "n_tup_hot_upd", "heap_blks_read", "heap_blks_hit", "toast_blks_read", "toast_blks_hit",
                "tidx_blks_read", "tidx_blks_hit")
INDEX_COUNTS = ("idx_scan", "idx_tup_read", "idx_tup_fetch", "idx_blks_read", "idx_blks_hit")
STATEMENT_KEY = ("userid", "dbid", "toplevel", "queryid")
STATEMENT_COUNTS = ("calls", "total_exec_time", "rows", "shared_blks_hit", "shared_blks_read", "shared_blks_dirtied",
                    "shared_blks_written", "temp_blks_read", "temp_blks_written", "shared_blk_read_time",
                    "shared_blk_write_time")
DATABASE_COUNTS = ("xact_commit", "xact_rollback", "blks_read", "blks_hit", "tup_returned", "tup_fetched",
                   "tup_inserted", "tup_updated", "tup_deleted", "temp_files", "temp_bytes", "blk_read_time",
                   "blk_write_time")


def _objects(first: dict, second: dict, p2) -> list[dict]:
    before_t = {r["relid"]: r for r in first["tables"]}
    before_i = {r["indexrelid"]: r for r in first["indexes"]}
    out = []
    for t in second["tables"]:
        name = object_name(t["schema"], t["name"])
        d = _sub(t, before_t.get(t["relid"]), TABLE_COUNTS, f"table {name}", p2)
        out.append({"name": name, "kind": "table", "table": name, "bytes": t["bytes"],
                    "blocks_read": d["heap_blks_read"] or 0, "blocks_hit": d["heap_blks_hit"] or 0,
                    "seq_scan": d["seq_scan"] or 0, "seq_tup_read": d["seq_tup_read"] or 0,
                    "idx_scan": d["idx_scan"] or 0, "idx_tup_fetch": d["idx_tup_fetch"] or 0,
                    "tuples_written": (d["n_tup_ins"] or 0) + (d["n_tup_upd"] or 0) + (d["n_tup_del"] or 0),
                    "n_tup_ins": d["n_tup_ins"] or 0, "n_tup_upd": d["n_tup_upd"] or 0,
                    "n_tup_del": d["n_tup_del"] or 0, "n_tup_hot_upd": d["n_tup_hot_upd"] or 0})
        if t.get("toast_relid"):
            out.append({"name": name + TOAST_SUFFIX, "kind": "toast", "table": name,
                        "bytes": (t["toast_bytes"] or 0) + (t["toast_index_bytes"] or 0),
                        "blocks_read": (d["toast_blks_read"] or 0) + (d["tidx_blks_read"] or 0),
                        "blocks_hit": (d["toast_blks_hit"] or 0) + (d["tidx_blks_hit"] or 0)})
    for i in second["indexes"]:
        name = object_name(i["schema"], i["name"])
        d = _sub(i, before_i.get(i["indexrelid"]), INDEX_COUNTS, f"index {name}", p2)
        out.append({"name": name, "kind": "index", "table": object_name(i["schema"], i["table"]), "bytes": i["bytes"],
                    "blocks_read": d["idx_blks_read"] or 0, "blocks_hit": d["idx_blks_hit"] or 0,
                    "idx_scan": d["idx_scan"] or 0, "idx_tup_read": d["idx_tup_read"] or 0,
                    "idx_tup_fetch": d["idx_tup_fetch"] or 0})
    total = sum(o["blocks_read"] for o in out)
    written = sum(o.get("tuples_written", 0) for o in out)
    for o in out:
        o["read_share"] = o["blocks_read"] / total if total else 0.0
        o["written_share"] = o.get("tuples_written", 0) / written if written else 0.0
        touched = o["blocks_read"] + o["blocks_hit"]
        o["hit_ratio"] = o["blocks_hit"] / touched if touched else None
    out.sort(key=lambda o: (-o["blocks_read"], -o["blocks_hit"], o["name"]))
    return out


def _io(first: dict, second: dict, p2) -> list[dict]:
    before = {tuple(r.get(k) for k in snap.IO_KEYS): r for r in first["io"]}
    rows = []
    for r in second["io"]:
        key = tuple(r.get(k) for k in snap.IO_KEYS)
        d = _sub(r, before.get(key), snap.IO_COUNTS, "pg_stat_io " + "/".join(map(str, key)), p2)
        if any(d.values()):
            rows.append({**dict(zip(snap.IO_KEYS, key)), **d})
    rows.sort(key=lambda r: -sum((r[k] or 0) for k in ("reads", "writes", "extends", "hits")))
    return rows


def command(query: str) -> str:
    """A statement's command, its first word (WITH, SELECT, INSERT...), for the classes' summary."""
    words = str(query).lstrip("( \n\t").split(None, 1)
    return words[0].upper() if words else "?"


def _statements(first: dict, second: dict, p2) -> dict:
    s1, s2 = first["statements"], second["statements"]
    if not s2.get("installed"):
        return {"installed": False, "note": s2.get("note", "pg_stat_statements was not read")}
    if not s1.get("installed"):
        return {"installed": False, "note": "pg_stat_statements was not read in the first snapshot"}
    before = {tuple(r.get(k) for k in STATEMENT_KEY): r for r in s1["rows"]}
    classes = []
    for r in s2["rows"]:
        if snap.MARKER in str(r.get("query") or ""):
            continue  # the snapshots' own queries
        key = tuple(r.get(k) for k in STATEMENT_KEY)
        old = before.get(key)
        if old is not None and (r.get("calls") or 0) < (old.get("calls") or 0):
            old = None  # evicted and counted again since: what it has now is all since the first snapshot
        d = _sub(r, old, STATEMENT_COUNTS, f"statement {r.get('queryid')}", p2)
        if d["calls"]:
            classes.append({"queryid": str(r.get("queryid")), "query": str(r.get("query") or ""),
                            "command": command(r.get("query") or ""), "toplevel": bool(r.get("toplevel")), **d})
    classes.sort(key=lambda c: (-(c["shared_blks_read"] or 0), -(c["total_exec_time"] or 0)))
    commands: dict[str, dict] = {}
    for c in classes:
        if not c["toplevel"]:
            continue
        agg = commands.setdefault(c["command"], {"command": c["command"], "classes": 0, "calls": 0,
                                                 "total_exec_time": 0.0, "shared_blks_read": 0})
        agg["classes"] += 1
        for k in ("calls", "total_exec_time", "shared_blks_read"):
            agg[k] += c[k] or 0
    evicted = (s2["info"].get("dealloc") or 0) - (s1["info"].get("dealloc") or 0)
    out = {"installed": True, "classes": classes, "commands": sorted(commands.values(), key=lambda a: -a["calls"]),
           "evicted": evicted}
    if evicted > 0:
        out["note"] = (f"pg_stat_statements evicted entries {evicted} times between the snapshots "
                       "(pg_stat_statements.max): the classes' figures are a lower bound")
    return out


def _kcache(first: dict, second: dict) -> dict:
    k1, k2 = first["kcache"], second["kcache"]
    if not (k1.get("installed") and k2.get("installed")):
        return {"installed": False, "note": (k2 if not k2.get("installed") else k1).get(
            "note", "pg_stat_kcache was not read")}
    key = ("queryid", "top", "userid", "dbid")
    before = {tuple(r.get(k) for k in key): r for r in k1["rows"]}
    rows = []
    for r in k2["rows"]:
        old = before.get(tuple(r.get(k) for k in key), {})
        d = {k: (v - (old.get(k) or 0)) if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in key
             else v for k, v in r.items()}
        rows.append(d)
    return {"installed": True, "rows": rows}


def _setting_bytes(settings: dict, name: str) -> int | None:
    """A size setting in bytes (shared_buffers is in 8kB pages)."""
    s = settings.get(name)
    if not isinstance(s, dict):
        return None
    try:
        value = float(s["setting"])
    except (KeyError, TypeError, ValueError):
        return None
    units = {"B": 1, "kB": 1024, "8kB": 8192, "MB": 1 << 20, "16MB": 16 << 20, "GB": 1 << 30}
    return int(value * units.get(s.get("unit") or "B", 1))


def make(first: dict, second: dict, p1="FIRST", p2="SECOND") -> dict:
    span = _check_pair(first, second, p1, p2)
    db = _sub(second["database"], first["database"], DATABASE_COUNTS, "pg_stat_database", p2)
    objects = _objects(first, second, p2)
    return {
        "format": snap.FORMAT, "kind": KIND,
        "first": {"taken_at": first["taken_at"], "file": str(p1)},
        "second": {"taken_at": second["taken_at"], "file": str(p2)},
        "span_s": span, "server": second["server"],
        "shared_buffers_bytes": _setting_bytes(second["settings"], "shared_buffers"),
        "block_bytes": _setting_bytes(second["settings"], "block_size") or 8192,
        "labels": {"blocks_read": READ_LABEL, "tuples_written": WRITE_LABEL},
        "database": db, "objects": objects, "io": _io(first, second, p2),
        "statements": _statements(first, second, p2), "kcache": _kcache(first, second),
        "settings": second["settings"],
    }


def from_files(first: Path, second: Path) -> dict:
    return make(snap.read(first), snap.read(second), first, second)


def read(path: Path) -> dict:
    """A delta file, checked where its readers look."""
    doc = snap.load_json(path, KIND, "dbtier stats delta")
    if not isinstance(doc.get("span_s"), (int, float)) or doc["span_s"] <= 0:
        raise UserError(f"{path}: span_s is missing or not above 0; make the delta again")
    objs = doc.get("objects")
    if not isinstance(objs, list):
        raise UserError(f"{path}: 'objects' is not a list; make the delta again")
    for i, o in enumerate(objs):
        if not (isinstance(o, dict) and isinstance(o.get("name"), str) and o.get("kind") in ("table", "index", "toast")):
            raise UserError(f"{path}: objects[{i}] has no name or kind (table, index, toast); make the delta again")
        for k in ("bytes", "blocks_read", "blocks_hit"):
            v = o.get(k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
                raise UserError(f"{path}: objects[{i}] ({o['name']}): {k} is {v!r}; make the delta again")
    for key in ("statements", "server", "settings"):
        if not isinstance(doc.get(key), dict):
            raise UserError(f"{path}: '{key}' is missing; make the delta again")
    if not isinstance(doc.get("io"), list):
        raise UserError(f"{path}: 'io' is not a list; make the delta again")
    return doc
