"""Per-object I/O: every traced I/O of the measured interval attributed to the table, index, WAL,
temp file or other file it touched, with the object's name from the database's catalog.

A relation file is named by (database oid, relfilenode); the catalog is read at the start and the
end of the interval, so objects rewritten (new relfilenode) or created during it are named too."""

from __future__ import annotations

from typing import Callable

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
       CASE WHEN n.nspname = 'pg_toast' THEN coalesce(owner.relname, index_owner.relname, c.relname) || '{TOAST_SUFFIX}'
            ELSE c.relname END,
       CASE WHEN n.nspname IN ('pg_catalog', 'information_schema') THEN 'catalog'
            WHEN n.nspname = 'pg_toast' THEN 'toast'
            ELSE CASE c.relkind WHEN 'r' THEN 'table' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence'
                                WHEN 'm' THEN 'matview' WHEN 't' THEN 'toast' ELSE c.relkind::text END END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
-- a TOAST table's owner, and a TOAST index's (through its TOAST table): equality joins, so a catalog
-- of thousands of relations is named in milliseconds (an OR in one join made it a nested loop)
LEFT JOIN pg_class owner ON owner.reltoastrelid = c.oid
LEFT JOIN pg_index toast_index ON n.nspname = 'pg_toast' AND c.relkind = 'i' AND toast_index.indexrelid = c.oid
LEFT JOIN pg_class index_owner ON index_owner.reltoastrelid = toast_index.indrelid
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


#: what an engine names a file by: its path -> (object, kind)
NameOf = Callable[[str], tuple[str, str]]


def postgres_names(names: dict[tuple[int, int], tuple[str, str]]) -> NameOf:
    """PostgreSQL's files named by its catalog ((database oid, relfilenode) -> (name, kind))."""
    return lambda path: _name(path, native.pg_path(path), names)


def object_io(records: np.ndarray, files: dict[int, str], devices: list[str],
              names: dict[tuple[int, int], tuple[str, str]], name_of: NameOf | None = None) -> list[dict]:
    """records: trace records of the interval (measure.trace.RECORD). One row per object and device.
    name_of: the engine's naming of a file (PostgreSQL's catalog `names` when None)."""
    counter = native.ObjectIO()
    try:
        counter.add_records(records)
        return table(counter.rows(), files, devices, names, name_of=name_of)
    finally:
        counter.close()


def table(rows: np.ndarray, files: dict[int, str], devices: list[str], names: dict[tuple[int, int], tuple[str, str]],
          named: dict[int, tuple[str, str]] | None = None, name_of: NameOf | None = None) -> list[dict]:
    """The I/O counted per file and device (native.OBJIO_ROW, as the C side counts it: objio.c) added
    up per object and device, the busiest first. named: file index -> (object, kind), filled as files
    are named (a caller naming the same files again keeps it)."""
    named = {} if named is None else named
    name_of = name_of or postgres_names(names)
    out: dict[tuple[str, str], dict] = {}
    for r in rows:
        f = int(r["file"])
        if f not in named:
            named[f] = name_of(files.get(f, ""))
        name, kind = named[f]
        dev = int(r["dev"])
        device = devices[dev] if dev < len(devices) else str(dev)
        row = out.setdefault((name, device), {
            "object": name, "kind": kind, "device": device, "reads": 0, "read_bytes": 0, "writes": 0,
            "write_bytes": 0, "flushes": 0, "cached_reads": 0, "sequential": 0, "async": 0, "device_s": 0.0})
        for key in ("reads", "read_bytes", "writes", "write_bytes", "flushes", "cached_reads", "async", "sequential"):
            row[key] += int(r[key])
        row["device_s"] += float(int(r["device_ns"])) / 1e9
    result = []
    for row in out.values():
        n = row["reads"] + row["writes"]
        row["sequential_pct"] = 100.0 * row["sequential"] / n if n else 0.0
        del row["sequential"]
        result.append(row)
    result.sort(key=lambda r: -r["device_s"])
    return result
