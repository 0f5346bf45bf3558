"""PostgreSQL's file-name grammar is C's alone (native/iotap/pgpath.c). It answers as the two rules it
replaced did: the regular expressions that attributed I/O to objects, and the interposer's hand scan
that chose what a dsync device writes through. Both are kept here, as the oracle, and compared over
every path a mix of PostgreSQL's components makes."""

from __future__ import annotations

import itertools
import random
import re

import pytest

from dbtier.devices import native
from dbtier.devices.native import pg_path as classify

_REL = re.compile(
    r"^(?P<space>.*)/(?:base|PG_\d+_\d+)/(?P<db>\d+)/(?P<temp>t\d+_)?(?P<node>\d+)"
    r"(?:_(?P<fork>fsm|vm|init))?(?:\.(?P<seg>\d+))?$"
)
_GLOBAL = re.compile(r"^(?P<space>.*)/global/(?P<node>\d+)(?:_(?P<fork>fsm|vm|init))?(?:\.(?P<seg>\d+))?$")
_WAL = re.compile(r"/pg_wal/|/[0-9A-F]{24}(?:\.partial)?$")
_TEMP = re.compile(r"/pgsql_tmp/")


def regex_classify(path: str) -> dict:
    """The attribution rule as it was (pg/paths.py before the grammar moved to C)."""
    out = {"class": "other", "tablespace": None, "database": None, "relfilenode": None, "segment": None}
    if _TEMP.search(path):
        out["class"] = "temp"
        return out
    m = _REL.match(path) or _GLOBAL.match(path)
    if m:
        fork = m.group("fork")
        out["class"] = {"fsm": "fsm", "vm": "vm"}.get(fork, "relation")
        out["tablespace"] = "pg_global" if "/global/" in path and m.re is _GLOBAL else (
            "pg_default" if "/base/" in path else m.group("space"))
        out["database"] = int(m.group("db")) if "db" in m.groupdict() and m.group("db") else None
        out["relfilenode"] = int(m.group("node"))
        out["segment"] = int(m.group("seg") or 0)
        if m.groupdict().get("temp"):
            out["class"] = "temp"
        return out
    if _WAL.search(path):
        out["class"] = "wal"
    return out


def scan_dsync(path: str) -> bool:
    """The dsync rule as it was (state.c's dbt_path_in_dsync_scope)."""
    if "/pgsql_tmp" in path:
        return False
    base = path.rsplit("/", 1)[-1]
    m = re.fullmatch(r"[0-9a-fA-F]+(?:_(?:fsm|init|vm))?(?:\.[0-9]+)?", base)
    return m is not None


PREFIXES = ["", "/srv", "/dev/shm/dbtier-x/ssd", "/mnt/PG_18_1", "/a b/ü"]
FOLDERS = ["base", "global", "PG_18_202506291", "PG_x_1", "PG_18_", "pg_wal", "pg_xact", "pg_multixact/offsets",
           "base/pgsql_tmp", "pg_tblspc", "5", "pgsql_tmp1.fileset"]
DATABASES = ["5", "16389", "", "x1", "global"]
NAMES = ["16384", "16384_fsm", "16384_vm", "16384_init", "16384.2", "16384_fsm.12", "t3_16384", "t3_16384_vm.1",
         "000000010000000000000003", "000000010000000000000003.partial", "00000001000000000000000a", "0000",
         "00AF", "cafe", "16384_x", "16384.", "16384..1", "_fsm", "pg_internal.init", "pg_filenode.map",
         "PG_VERSION", "pgsql_tmp1234.0", "1.0", "postmaster.pid", "", "t_16384", "tx_5", "16384_fsmx",
         "99999999999999999999", "0016384"]


def _paths():
    for prefix, folder, db, name in itertools.product(PREFIXES, FOLDERS, DATABASES, NAMES):
        yield "/".join(p for p in (prefix, folder, db) if p) + "/" + name
        yield "/".join(p for p in (prefix, folder) if p) + "/" + name
    yield from ["", "16384", "/", "base/5/16384", "/base/5/16384", "/global/1262", "/w/pg_wal/x"]


def _huge_ids(path: str) -> bool:
    """A relation's ids (database, backend, relfilenode, segment) past any PostgreSQL id (2^62 and more)."""
    m = None if _TEMP.search(path) else (_REL.match(path) or _GLOBAL.match(path))
    ids = [v for v in (m.groupdict().values() if m else ()) if v and v.strip("t_").isdigit()] if m else []
    return any(int(v.strip("t_")) >= 1 << 62 for v in ids)


def _huge_segment(path: str) -> bool:
    return any(int(n) >= 1 << 62 for n in re.findall(r"\.(\d+)$", path.rsplit("/", 1)[-1]))


def _intended(path: str, old: dict) -> dict:
    """Where the grammar means to differ: a tablespace whose location holds a folder named base is
    that location, not pg_default ("/base/" anywhere in the path made it pg_default); and a number
    no PostgreSQL id reaches makes no relation file."""
    if _huge_ids(path):  # no relation: what the rest of the rules say
        return {"class": "wal" if _WAL.search(path) else "other", "tablespace": None, "database": None,
                "relfilenode": None, "segment": None}
    m = _REL.match(path)
    if m and not _TEMP.search(path) and re.search(r"/PG_\d+_\d+/\d+/[^/]*$", path):
        return {**old, "tablespace": m.group("space")}
    return old


def test_the_grammar_answers_as_the_rules_it_replaced():
    paths = sorted(set(_paths()))
    assert len(paths) > 5000
    for path in paths:
        assert classify(path) == _intended(path, regex_classify(path)), path
        if not _huge_segment(path):
            assert native.dsync_scope(path) is scan_dsync(path), path


def test_random_paths():
    rng = random.Random(7)
    alphabet = "0123456789abcdefABCDEF_./tgxPG"
    for _ in range(20000):
        parts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 5))]
        path = "/" + "/".join(rng.choice([p, rng.choice(FOLDERS), rng.choice(NAMES)]) for p in parts)
        assert classify(path) == _intended(path, regex_classify(path)), path
        if not _huge_segment(path):
            assert native.dsync_scope(path) is scan_dsync(path), path


@pytest.mark.parametrize("path, want", [
    ("/d/base/5/16384.2", {"class": "relation", "tablespace": "pg_default", "database": 5, "relfilenode": 16384,
                           "segment": 2}),
    ("/mnt/base/ts/PG_18_202506291/16389/24576_vm", {"class": "vm", "tablespace": "/mnt/base/ts", "database": 16389,
                                                    "relfilenode": 24576, "segment": 0}),
    ("/d/global/1262_fsm", {"class": "fsm", "tablespace": "pg_global", "database": None, "relfilenode": 1262,
                            "segment": 0}),
    ("/d/base/5/t3_16384", {"class": "temp", "tablespace": "pg_default", "database": 5, "relfilenode": 16384,
                            "segment": 0}),
    ("/srv/ü/PG_18_1/5/7", {"class": "relation", "tablespace": "/srv/ü", "database": 5, "relfilenode": 7,
                            "segment": 0}),
])
def test_ids_and_tablespaces(path, want):
    assert classify(path) == want


def test_the_interposer_records_each_files_class(shm_dir, tmp_path):
    """A file's class is recorded in the state's file table when the interposer first sees it, by the
    same grammar, and shown in the dump."""
    import subprocess
    import sys

    from dbtier.devices.profile import load
    from dbtier.devices.session import Device, Session

    names = {"base/5/16384_fsm": "fsm", "pg_wal/000000010000000000000001": "wal", "postmaster.pid": "other"}
    for name in names:
        (shm_dir / name).parent.mkdir(parents=True, exist_ok=True)
    session = Session([Device("d", shm_dir, load("ram-san"))], tmp_path / "s")
    session.create()
    code = "import sys\nfor p in sys.argv[1:]: open(p, 'w').write('x')"
    subprocess.run([sys.executable, "-c", code, *(str(shm_dir / n) for n in names)], env=session.env(), check=True)
    recorded = {row[2]: row[5] for row in session.snapshot()["files"]}
    assert {name: recorded[str(shm_dir / name)] for name in names} == names
