"""`dbtier run sql` on real servers: your own SQL files in phases, your own objects placed, your own
dump restored, and every mistake in them answered in one line that names the file and the line."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest

from dbtier.devices.spec import parse_all
from dbtier.errors import UserError
from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import Lab, LabOptions
from dbtier.workloads import sqlfile
from tests.conftest import dbtier

SCHEMA = """
CREATE TABLE sale (id bigint PRIMARY KEY, sold_on date NOT NULL, amount numeric(10,2), note text);
INSERT INTO sale SELECT g, date '2020-01-01' + (g % 1500), (g % 997) * 1.5, repeat('x', 300)
  FROM generate_series(1, 20000) g;
CREATE INDEX sale_sold_on_idx ON sale (sold_on);
\\echo psql commands work in a setup file
"""

WORK = """
-- phase: lookups
SELECT sum(amount) FROM sale WHERE sold_on = date '2021-03-01';
SELECT id FROM sale WHERE sold_on BETWEEN date '2021-01-01' AND date '2021-01-03' ORDER BY id;
-- phase: changes
BEGIN;
UPDATE sale SET amount = amount + 1 WHERE id % 100 = 0;
COMMIT;
SELECT $$a; dollar-quoted; text$$ AS "semi;colon", 'it''s; quoted' /* a ; comment */;
"""


# -- the splitter ------------------------------------------------------------------------------

def test_statements_split_at_their_own_semicolons():
    text = ("SELECT 'a;b', \"x;y\", E'c\\';d' -- e;f\n;\n/* g; /* nested; */ h; */ SELECT $q$ i; $q$;\n"
            "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$;\n-- phase: two\nSELECT 2")
    parts = sqlfile.split(text, "t.sql")
    assert [line for line, _ in parts] == [1, 3, 4, 5, 6]
    assert parts[0][1].startswith("SELECT 'a;b'") and parts[1][1] == "SELECT $q$ i; $q$"
    assert parts[3][1] == "\x00phase:two" and parts[4][1] == "SELECT 2"


@pytest.mark.parametrize("text, message", [
    ("SELECT 'open", "t.sql:1: a string opened here is not closed"),
    ("SELECT 1;\nSELECT $x$ open", "t.sql:2: a $x$ quote opened here is not closed"),
    ("/* open", "t.sql:1: a /* comment is not closed"),
    ("SELECT 1;\n\\copy t from x", "t.sql:2: \\copy is a psql command"),
])
def test_a_broken_file_is_refused_with_its_line(text, message):
    with pytest.raises(UserError, match=re.escape(message)):
        sqlfile.split(text, "t.sql")


def test_mariadb_sql_splits_as_mariadb_reads_it():
    """Backticks quote identifiers, strings take backslash escapes, # comments a line, $ is nothing
    special; DELIMITER and the client's backslash commands are its client's, not SQL."""
    text = ("# it's a comment; with a quote\nSELECT 'it\\'s;', `a;b`, \"c\\\";d\" FROM t;\n"
            "-- phase: two\nSELECT $x$;\nSELECT 3")
    parts = sqlfile.split(text, "m.sql", dialect="mariadb")
    assert [line for line, _ in parts] == [2, 3, 4, 5]
    assert parts[0][1] == "SELECT 'it\\'s;', `a;b`, \"c\\\";d\" FROM t" and parts[1][1] == "\x00phase:two"
    assert parts[2][1] == "SELECT $x$"
    for text, message in (("DELIMITER //\nSELECT 1//", "m.sql:1: DELIMITER is the mariadb client's command"),
                          ("SELECT `open", "m.sql:1: a quoted identifier opened here is not closed"),
                          ("\\G", "m.sql:1: \\G is the mariadb client's command")):
        with pytest.raises(UserError, match=re.escape(message)):
            sqlfile.split(text, "m.sql", dialect="mariadb")


# -- on a server -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sql")
    (folder / "schema.sql").write_text(SCHEMA)
    (folder / "work.sql").write_text(WORK)
    return folder


@pytest.fixture(scope="module")
def two_phase_run(files, module_shm_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    dbtier("run", "sql", "--setup", str(files / "schema.sql"), "--run", str(files / "work.sql"),
           "-d", "hdd=hdd-sata-7200", "-d", "ssd=ssd-sata-mlc", "--place", "data=hdd,sale_sold_on_idx=ssd",
           "--trace", "--workspace", str(module_shm_dir), "-o", str(out), "--json", str(out / "r.json"), "-q",
           check=True)
    (run_dir,) = out.glob("sql-*")
    return json.loads((out / "r.json").read_text()), run_dir


def test_each_phase_reports_its_statements(two_phase_run):
    result, _ = two_phase_run
    assert [ph["phase"] for ph in result["phases"]] == ["lookups", "changes"]
    lookups, changes = result["phases"]
    rows = [s["rows"] for s in lookups["metrics"]["statement_times"]]
    assert rows == [1, 3 * 14]  # one sum; 14 or so rows a day over three days (20000 rows / 1500 days)
    assert [s["rows"] for s in changes["metrics"]["statement_times"]] == [0, 200, 0, 1]
    assert changes["metrics"]["statement_times"][1]["where"].endswith("work.sql:7")  # WORK starts with a blank line
    for ph in result["phases"]:
        spent = sum(s["elapsed_s"] for s in ph["metrics"]["statement_times"])
        assert 0 < spent <= ph["elapsed_s"] * 1.01
        assert ph["devices"] and ph["top_events"] is not None and "pg_stat_io" in ph


def test_user_objects_are_placed_and_read_only_from_their_device(two_phase_run):
    result, run_dir = two_phase_run
    where = {o["object"]: o for o in result["objects"]}
    assert where["sale"]["device"] == "hdd" and where["sale_pkey"]["device"] == "hdd"
    assert where["sale_sold_on_idx"]["device"] == "ssd" and where["sale_sold_on_idx"]["path"].startswith("pg_tblspc/")
    assert result["moved"] == [{"object": "sale_sold_on_idx", "kind": "index", "from": "hdd", "to": "ssd",
                                "bytes": where["sale_sold_on_idx"]["bytes"]}]
    node = int(where["sale_sold_on_idx"]["path"].rsplit("/", 1)[1])
    trace = pq.read_table(run_dir / "trace.parquet").to_pylist()
    reads = {r["device"] for r in trace if r["op"] == "read" and r["relfilenode"] == node}
    assert reads == {"ssd"}


def test_a_restored_dump_of_each_format(module_shm_dir, tmp_path):
    """A user's database: dumped here by pg_dump in every format, with an owner and a grant the lab
    does not have, restored by `run sql --restore`, its index placed on its own device."""
    with Lab(parse_all(["d=ram-san"]), placement.parse([], ["d"]), LabOptions(workspace=module_shm_dir),
             say=lambda _l: None) as lab:
        db = lab.handle
        with db.connect() as conn:
            conn.execute("CREATE ROLE app NOLOGIN")
            conn.execute("CREATE TABLE shop (id int PRIMARY KEY, name text)")
            conn.execute("INSERT INTO shop SELECT g, 'item ' || g FROM generate_series(1, 5000) g")
            conn.execute("CREATE INDEX shop_name_idx ON shop (name)")
            conn.execute("ALTER TABLE shop OWNER TO app")
            conn.execute("GRANT SELECT ON shop TO PUBLIC")
        for fmt, name in (("p", "shop.sql"), ("c", "shop.dump"), ("d", "shop.dir"), ("t", "shop.tar")):
            proc = db.client("pg_dump", f"-F{fmt}", "-f", str(tmp_path / name), db.database, as_me=True).run()
            assert proc.returncode == 0, proc.stderr
    work = tmp_path / "lookup.sql"
    work.write_text("SELECT id FROM shop WHERE name = 'item 4242';\n")  # through shop_name_idx
    for name, fmt in (("shop.sql", "plain"), ("shop.dump", "custom"), ("shop.dir", "directory"), ("shop.tar", "tar")):
        out = tmp_path / f"out-{fmt}"
        proc = dbtier("run", "sql", "--restore", str(tmp_path / name), "-j", "2", "--run", str(work),
                      "-d", "hdd=ram-san", "-d", "ssd=ram-san", "--place", "shop_name_idx=ssd", "--trace",
                      "--workspace", str(module_shm_dir), "-o", str(out), "--json", str(tmp_path / "r.json"),
                      check=True)
        result = json.loads((tmp_path / "r.json").read_text())
        assert result["checks"]["restored"]["format"] == fmt
        assert result["metrics"]["statement_times"][0]["rows"] == 1
        where = {o["object"]: o for o in result["objects"]}
        assert {n: o["device"] for n, o in where.items()} == {"shop": "hdd", "shop_name_idx": "ssd", "shop_pkey": "hdd"}
        assert "ownership and privilege" in proc.stdout and "note:" in proc.stdout
        node = int(where["shop_name_idx"]["path"].rsplit("/", 1)[1])
        trace = pq.read_table(next(out.glob("sql-*")) / "trace.parquet").to_pylist()
        assert {r["device"] for r in trace if r["op"] == "read" and r["relfilenode"] == node} == {"ssd"}


@pytest.mark.parametrize("case, files_, extra, message", [
    ("sql-error", {"r.sql": "SELECT 1;\nSELECT * FROM nosuch;\n"}, [], 'r.sql:2: relation "nosuch" does not exist'),
    ("setup-error", {"s.sql": "CREATE TABLE a (x int);\nCREATE TABLE a (y int);\n", "r.sql": "SELECT 1;"},
     ["--setup", "{s.sql}"], 's.sql:2: relation "a" already exists'),
    ("timeout", {"r.sql": "SELECT 1;\nSELECT pg_sleep(5);\n"}, ["--timeout", "0.3"],
     "r.sql:2: the statement ran past --timeout 0.3 s and was cancelled"),
    ("psql-command", {"r.sql": "SELECT 1;\n\\timing on\n"}, [], "r.sql:2: \\timing is a psql command"),
    ("unknown-object", {"s.sql": "CREATE TABLE orders (id int);\nCREATE INDEX orders_id_idx ON orders (id);",
                        "r.sql": "SELECT 1;"}, ["--setup", "{s.sql}", "--place", "orders_idx=d"],
     "did you mean orders_id_idx?"),
    ("corrupt-dump", {"r.sql": "SELECT 1;", "x.dump": "PGDMP\x01\x0e\x00garbage"}, ["--restore", "{x.dump}"],
     "pg_restore failed"),
    ("not-a-dump", {"r.sql": "SELECT 1;", "x.dump": ""}, ["--restore", "{x.dump}"], "nor SQL text"),
    ("dump-of-another-database", {"r.sql": "SELECT 1;", "x.sql": "CREATE DATABASE shop;\n\\connect shop\n"
                                  "CREATE TABLE a (x int);\n-- PostgreSQL database dump complete\n"},
     ["--restore", "{x.sql}"], "x.sql:2: \\connect switches to another database (a dump made with pg_dump -C"),
    ("dump-error", {"r.sql": "SELECT 1;", "x.sql": "CREATE TABLE a (x int);\nCREATE TABLE a (x int);\n"
                    "-- PostgreSQL database dump complete\n"}, ["--restore", "{x.sql}"],
     'x.sql:2: relation "a" already exists'),
    ("no-run", {}, [], "give at least one --run FILE"),
    ("empty-run", {"r.sql": "-- nothing\n"}, [], "no SQL statement in it"),
    ("twice-the-phase", {"r.sql": "-- phase: a\nSELECT 1;\n-- phase: a\nSELECT 2;"}, [], "'a' is used twice"),
])
def test_mistakes_are_one_line_and_leave_nothing(case, files_, extra, message, shm_dir, tmp_path):
    for name, text in files_.items():
        (tmp_path / name).write_text(text)
    args = [str(tmp_path / a[1:-1]) if a.startswith("{") else a for a in extra]
    run = ["--run", str(tmp_path / "r.sql")] if "r.sql" in files_ else []
    out = tmp_path / "out"
    proc = dbtier("run", "sql", *run, *args, "-d", "d=ram-san", "--workspace", str(shm_dir), "-o", str(out))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()
    assert [p.name for p in shm_dir.glob("dbtier-*/*") if p.name != "runtime"] == []
