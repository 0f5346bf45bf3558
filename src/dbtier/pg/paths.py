"""What a PostgreSQL file is, from its path: relation data (main, fsm, vm, init forks), WAL, temp
files, or other. Paths are as the interposer saw them: resolved, so a tablespace appears as its
location directory rather than pg_tblspc/<oid>."""

from __future__ import annotations

import re

_REL = re.compile(
    r"^(?P<space>.*)/(?:base|PG_\d+_\d+)/(?P<db>\d+)/(?P<temp>t\d+_)?(?P<node>\d+)"
    r"(?:_(?P<fork>fsm|vm|init))?(?:\.(?P<seg>\d+))?$"
)
_GLOBAL = re.compile(r"^(?P<space>.*)/global/(?P<node>\d+)(?:_(?P<fork>fsm|vm|init))?(?:\.(?P<seg>\d+))?$")
_WAL = re.compile(r"/pg_wal/|/[0-9A-F]{24}(?:\.partial)?$")
_TEMP = re.compile(r"/pgsql_tmp/")

CLASSES = ("relation", "fsm", "vm", "wal", "temp", "other")


def classify(path: str) -> dict:
    """{"class", "tablespace", "database", "relfilenode", "segment"}: ids as ints, or None."""
    out = {"class": "other", "tablespace": None, "database": None, "relfilenode": None, "segment": None}
    if _TEMP.search(path):
        out["class"] = "temp"
        return out
    m = _REL.match(path) or _GLOBAL.match(path)
    if m:
        fork = m.group("fork")
        out["class"] = {"fsm": "fsm", "vm": "vm"}.get(fork, "relation")
        space = m.group("space")
        out["tablespace"] = "pg_global" if "/global/" in path and m.re is _GLOBAL else (
            "pg_default" if "/base/" in path else space)
        out["database"] = int(m.group("db")) if "db" in m.groupdict() and m.group("db") else None
        out["relfilenode"] = int(m.group("node"))
        out["segment"] = int(m.group("seg") or 0)
        if m.groupdict().get("temp"):
            out["class"] = "temp"
        return out
    if _WAL.search(path):
        out["class"] = "wal"
    return out
