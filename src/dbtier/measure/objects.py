"""Per-object I/O: every traced I/O of the measured interval attributed to the table, index, WAL,
temp file or other file it touched, with the object's name from the database's catalog.

A relation file is named by (database oid, relfilenode); the catalog is read at the start and the
end of the interval, so objects rewritten (new relfilenode) or created during it are named too."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from dbtier.devices import native
from dbtier.measure import trace

READ, WRITE, FLUSH = trace.READ, trace.WRITE, trace.FLUSH
PAGE_CACHE, ASYNC = trace.FLAGS["page_cache"], trace.FLAGS["async"]
#: a TOAST relation (and its index) is named after the table that owns it, with this after the name
TOAST_SUFFIX = " (TOAST)"

NAMES_QUERY = f"""
SELECT (SELECT oid FROM pg_database WHERE datname = current_database()),
       pg_relation_filenode(c.oid), c.relisshared,
       CASE WHEN n.nspname = 'pg_toast' THEN coalesce(owner.relname, c.relname) || '{TOAST_SUFFIX}'
            ELSE c.relname END,
       CASE WHEN n.nspname IN ('pg_catalog', 'information_schema') THEN 'catalog'
            WHEN n.nspname = 'pg_toast' THEN 'toast'
            ELSE CASE c.relkind WHEN 'r' THEN 'table' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence'
                                WHEN 'm' THEN 'matview' WHEN 't' THEN 'toast' ELSE c.relkind::text END END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_class owner ON owner.reltoastrelid = c.oid OR
     (n.nspname = 'pg_toast' AND c.relkind = 'i' AND owner.reltoastrelid =
        (SELECT indrelid FROM pg_index WHERE indexrelid = c.oid))
WHERE pg_relation_filenode(c.oid) IS NOT NULL
"""


def catalog_names(conn) -> dict[tuple[int, int], tuple[str, str]]:
    """(database oid, relfilenode) -> (name, kind) in the connected database; shared catalogs under 0."""
    out = {}
    for db, node, shared, name, kind in conn.execute(NAMES_QUERY).fetchall():
        out[(0 if shared else db, node)] = (name, kind)
    return out


def cluster_names(connect, home: str) -> dict[tuple[int, int], tuple[str, str]]:
    """catalog_names over every database that takes connections; objects outside `home` carry their
    database's name (tpcc_build.stock)."""
    out = {}
    with connect(home) as conn:
        others = [d for (d,) in conn.execute("SELECT datname FROM pg_database WHERE datallowconn AND "
                                             "NOT datistemplate AND datname <> current_database()").fetchall()]
        out.update(catalog_names(conn))
    for db in others:
        try:
            with connect(db) as conn:
                out.update({k: (f"{db}.{name}" if kind != "catalog" else name, kind)
                            for k, (name, kind) in catalog_names(conn).items()})
        except Exception:  # dropped meanwhile: its files are named by relfilenode
            continue
    return out


def _name(path: str, info: dict, names: dict) -> tuple[str, str]:
    cls = info["class"]
    if "/pg_internal.init" in path:  # the relation cache's init file, read through stdio by each new backend
        return "relation cache init files", "other"
    if cls == "wal":
        return "WAL", "wal"
    if cls == "temp":
        return "temp files", "temp"
    if info["relfilenode"] is None:
        return "other files", "other"
    db = 0 if info["tablespace"] == "pg_global" else info["database"]
    hit = names.get((db, info["relfilenode"]))
    if hit is None:
        return f"relfilenode {info['relfilenode']} (dropped)", "dropped"
    name, kind = hit
    if cls in FORKS:
        return f"{name} [{cls}]", kind
    return name, kind


#: a relation's other forks: reported beside it, as "NAME [fsm]"; they move with it
FORKS = ("fsm", "vm")


def owner(name: str) -> str:
    """The relation a reported name belongs to, as a placement moves it: a fork's relation, a
    TOAST relation's (or its index's) table."""
    for fork in FORKS:
        if name.endswith(f" [{fork}]"):
            name = name[:-len(fork) - 3]
    if name.endswith(TOAST_SUFFIX):
        name = name[:-len(TOAST_SUFFIX)]
    return name


def object_io(records: np.ndarray, files: dict[int, str], devices: list[str],
              names: dict[tuple[int, int], tuple[str, str]]) -> list[dict]:
    """records: trace records of the interval (measure.trace.RECORD). One row per object and device."""
    rows: dict[tuple[str, str], dict] = {}
    by_file = defaultdict(list)
    for i, f in enumerate(records["file"]):
        by_file[int(f)].append(i)
    for f, idx in by_file.items():
        rec = records[np.asarray(idx)]
        rec = rec[np.argsort(rec["submit_ns"], kind="stable")]
        path = files.get(f, "")
        name, kind = _name(path, native.pg_path(path), names)
        for dev in np.unique(rec["dev"]):
            r = rec[rec["dev"] == dev]
            device = devices[dev] if dev < len(devices) else str(dev)
            row = rows.setdefault((name, device), {
                "object": name, "kind": kind, "device": device, "reads": 0, "read_bytes": 0, "writes": 0,
                "write_bytes": 0, "flushes": 0, "cached_reads": 0, "sequential": 0, "async": 0, "device_s": 0.0})
            req = r[r["kind"] == trace.REQUEST]  # what reached the device
            op, flags = req["op"], req["flags"]
            transfer = (op == READ) | (op == WRITE)
            row["reads"] += int(np.sum(op == READ))
            row["read_bytes"] += int(np.sum(req["len"][op == READ]))
            row["writes"] += int(np.sum(op == WRITE))
            row["write_bytes"] += int(np.sum(req["len"][op == WRITE]))
            row["flushes"] += int(np.sum(op == FLUSH))  # an O_DSYNC write's flush is a request of its own
            call = r[r["kind"] == trace.CALL]  # a buffered read that found all it needed in memory
            row["cached_reads"] += int(np.sum((call["op"] == READ) & ((call["flags"] & PAGE_CACHE) != 0)))
            row["async"] += int(np.sum(transfer & ((flags & ASYNC) != 0)))
            t = req[transfer]
            if len(t) > 1:  # sequential: starts where the file's previous device transfer ended
                ends = t["offset"][:-1] + t["len"][:-1]
                row["sequential"] += int(np.sum(t["offset"][1:] == ends))
            busy = req[transfer | (op == FLUSH)]
            row["device_s"] += float(np.sum(busy["complete_ns"].astype(np.int64) - busy["submit_ns"].astype(np.int64))) / 1e9
    out = []
    for row in rows.values():
        n = row["reads"] + row["writes"]
        row["sequential_pct"] = 100.0 * row["sequential"] / n if n else 0.0
        del row["sequential"]
        out.append(row)
    out.sort(key=lambda r: -r["device_s"])
    return out
