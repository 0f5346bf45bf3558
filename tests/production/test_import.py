"""`dbtier workload import` against a real production server: a lab server logging every statement in
stderr, csvlog and jsonlog at once, with pg_stat_statements, driven by real clients (psycopg's simple
and extended protocols, psql's large-object import, pgbench). Its three logs must tell one story, and
the story pg_stat_statements counted. Only the malformed-input cases write log text by hand."""

from __future__ import annotations

import csv
import gzip
import json
import os
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import psycopg
import pyarrow.compute as pc
import pytest

from dbtier.errors import UserError
from dbtier.production import capture
from dbtier.production.importlog import parse_params, read_logs
from dbtier.production.paramsource import is_utility
from dbtier.production.stmtclass import fingerprint_id
from dbtier.production.synthetic import synthesize
from tests.conftest import assert_refused_in_one_line, dbtier, shm_folder
from tests.production.conftest import log_files, production_lab

SUFFIX = {"stderr": ".log", "csvlog": ".csv", "jsonlog": ".json"}
MULTI_LINE = "multi\nline\n\ttabbed, 'quoted'"
SHOP_SQL = "SELECT id,\n       note\nFROM items\nWHERE id < %s"
END = "end of the workload"


def _client_env(lab, dbname: str = "dbtier") -> dict:
    return dict(os.environ, PGHOST=str(lab.cluster.socket_dir), PGPORT="5432", PGUSER="dbtier", PGDATABASE=dbname)


def _shop(conn: psycopg.Connection) -> int:
    """One application's session of every kind of statement; returns how many it sent (COPY aside)."""
    conn.autocommit = True
    conn.execute("SELECT count(*) FROM items")                                  # simple protocol
    for row in ((1, "it's"), (2, None), (3, MULTI_LINE)):                       # extended, unnamed
        conn.execute("INSERT INTO items VALUES (%s, %s)", row)
    for i in range(4):                                                          # extended, named
        conn.execute("SELECT note FROM items WHERE id = %s", (i,), prepare=True)
    conn.execute(SHOP_SQL, (3,))                                                # a text of several lines
    with pytest.raises(psycopg.errors.UndefinedTable):                          # fails (simple)
        conn.execute("SELECT * FROM no_such_table")
    with pytest.raises(psycopg.errors.UniqueViolation):                         # fails (extended)
        conn.execute("INSERT INTO items VALUES (%s, %s)", (1, "again"))
    with conn.transaction():                                                    # BEGIN, UPDATE, COMMIT
        conn.execute("UPDATE items SET note = %s WHERE id = %s", ("x", 2))
    with conn.cursor().copy("COPY items FROM STDIN") as copy:                   # counted, not replayed
        copy.write_row((10, "copied"))
        copy.write_row((11, "copied"))
    return 1 + 3 + 4 + 1 + 2 + 3


def _wait_for_logs(lab, marker: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if all(any(marker in f.read_text(errors="replace") for f in log_files(lab, s)) for s in SUFFIX.values()):
            return
        time.sleep(0.2)
    raise AssertionError(f"the server's logs never showed {marker!r}")


@pytest.fixture(scope="module")
def production(production_workspace, tmp_path_factory):
    """The production server after its workload: its logs (copied), pg_stat_statements as it counted
    the workload, exports of it, and what the clients sent."""
    out = tmp_path_factory.mktemp("production")
    with production_lab(production_workspace) as lab:
        env = _client_env(lab)
        with lab.connect() as conn:
            conn.autocommit = True
            conn.execute("CREATE EXTENSION pg_stat_statements")
            conn.execute("CREATE TABLE items (id int PRIMARY KEY, note text)")
            conn.execute("CREATE DATABASE other")
        subprocess.run([str(lab.install.exe("pgbench")), "-i", "-s", "1", "-q"], env=env, check=True,
                       capture_output=True)
        with lab.connect() as conn:
            conn.execute("SELECT pg_stat_statements_reset()")
        with psycopg.connect(host=str(lab.cluster.socket_dir), port=5432, user="dbtier", dbname="dbtier",
                             application_name="shop") as conn:
            shop_sent = _shop(conn)
        with psycopg.connect(host=str(lab.cluster.socket_dir), port=5432, user="dbtier", dbname="other") as conn:
            conn.autocommit = True
            conn.execute("SELECT 1")
            conn.execute("SELECT %s::int", (7,))
            conn.execute("SELECT 'other'")
        blob = out / "blob.txt"
        blob.write_text("a large object\n")
        blob.chmod(0o644)
        subprocess.run([str(lab.install.exe("psql")), "-X", "-q", "-c", f"\\lo_import {blob}"], env=env,
                       check=True, capture_output=True)
        time.sleep(1.1)  # the log files' names have seconds: the rotated part gets a name of its own
        with lab.connect() as conn:
            conn.execute("SELECT pg_rotate_logfile()")
        time.sleep(0.3)
        subprocess.run([str(lab.install.exe("pgbench")), "-c", "2", "-T", "2", "-M", "prepared"], env=env,
                       check=True, capture_output=True)
        with lab.connect() as conn:
            pss = conn.execute("SELECT s.query, s.calls, d.datname, s.toplevel FROM pg_stat_statements s "
                               "JOIN pg_database d ON d.oid = s.dbid").fetchall()
            with open(out / "pgss.csv", "w", newline="") as f:
                with conn.cursor().copy("COPY (SELECT * FROM pg_stat_statements) TO STDOUT WITH (FORMAT csv, HEADER)") as cp:
                    for block in cp:
                        f.write(bytes(block).decode())
            doc = conn.execute("SELECT json_agg(s) FROM pg_stat_statements s").fetchone()[0]
            (out / "pgss.json").write_text(json.dumps(doc))
            dbtier_oid = conn.execute("SELECT oid FROM pg_database WHERE datname = 'dbtier'").fetchone()[0]
            conn.execute(f"SELECT '{END}'")
        _wait_for_logs(lab, END)
        logs = out / "log"
        logs.mkdir()
        for suffix in SUFFIX.values():
            for f in log_files(lab, suffix):
                shutil.copy(f, logs / f.name)
        yield {"lab": lab, "logs": logs, "pss": pss, "shop_sent": shop_sent, "out": out, "dbtier_oid": dbtier_oid,
               "dsn": f"host={lab.cluster.socket_dir} port=5432 user=dbtier dbname=dbtier"}


def _files(production, fmt: str) -> list[Path]:
    return sorted(production["logs"].glob("*" + SUFFIX[fmt]))


@pytest.fixture(scope="module")
def imported(production):
    return {fmt: read_logs(_files(production, fmt)) for fmt in SUFFIX}


def test_rotated_logs_are_several_files(production):
    for fmt in SUFFIX:
        assert len(_files(production, fmt)) >= 2, fmt


def test_the_three_formats_agree(imported):
    csv_, json_, stderr = (imported[f].capture for f in ("csvlog", "jsonlog", "stderr"))
    for other in (json_, stderr):
        assert other.counts == csv_.counts
        assert other.database == csv_.database == "dbtier"
        for table in ("sessions", "statements", "classes"):
            assert getattr(other, table).equals(getattr(csv_, table)), table
    assert csv_.counts["unreadable_lines"] == 0
    assert imported["stderr"].prefix == "%m [%p] %q%u@%d/%a %c %e "


def _session_of(cap, application: str) -> list[dict]:
    sessions = cap.sessions.to_pylist()
    ids = [s["session"] for s in sessions if s["application"] == application]
    assert len(ids) == 1, (application, sessions)
    return [s for s in cap.statements.to_pylist() if s["session"] == ids[0]]


@pytest.mark.parametrize("fmt", list(SUFFIX))
def test_one_applications_session_as_sent(imported, production, fmt):
    cap = imported[fmt].capture
    stmts = _session_of(cap, "shop")
    assert len(stmts) == production["shop_sent"]
    assert [s["seq"] for s in stmts] == list(range(len(stmts)))
    kinds = Counter(s["kind"] for s in stmts)
    assert kinds == {"simple": 4, "execute": 10}, kinds
    inserts = [s for s in stmts if s["text"].startswith("INSERT INTO items")]
    assert [s["params"] for s in inserts] == [["1", "it's"], ["2", None], ["3", MULTI_LINE], ["1", "again"]]
    assert all(s["kind"] == "execute" and s["name"] is None for s in inserts)
    named = [s for s in stmts if s["name"] is not None]
    assert len(named) == 4 and len({s["name"] for s in named}) == 1
    assert [s["params"] for s in named] == [[str(i)] for i in range(4)]
    multi = [s for s in stmts if s["text"].startswith("SELECT id,")]
    assert multi[0]["text"] == SHOP_SQL.replace("%s", "$1") and multi[0]["params"] == ["3"]
    failed = {s["text"]: (s["error_state"], s["error_message"]) for s in stmts if s["error_state"]}
    assert failed == {"SELECT * FROM no_such_table": ("42P01", 'relation "no_such_table" does not exist'),
                      "INSERT INTO items VALUES ($1, $2)":
                          ("23505", 'duplicate key value violates unique constraint "items_pkey"')}
    assert [s["text"] for s in stmts][-3:] == ["BEGIN", "UPDATE items SET note = $1 WHERE id = $2", "COMMIT"]
    assert not any("COPY" in s["text"] for s in stmts)
    ok = [s for s in stmts if not s["error_state"]]
    assert all(s["duration_s"] is not None and s["duration_s"] >= 0 for s in ok)
    starts = [s["start_s"] for s in stmts]
    assert starts == sorted(starts)  # one connection, one statement after the other (ms in the log)


def test_counts_of_what_is_not_replayed(imported):
    c = imported["csvlog"].capture.counts
    assert c["copy_from_stdin"] >= 1            # the shop's (pgbench -i copies too)
    assert c["fastpath"] >= 3                   # psql's lo_import: lo_creat, lo_open, lowrite, lo_close
    assert c["errors"] == 2
    assert c["prepared"] >= 1 + 2 * 7          # the shop's, and pgbench's seven on each of its two connections
    assert imported["csvlog"].databases["other"] == 3
    assert c["other_databases"] >= 3
    assert any("COPY FROM STDIN" in n for n in imported["csvlog"].notes)


def test_calls_per_class_match_pg_stat_statements(imported, production):
    cap = imported["csvlog"].capture
    stmts = cap.statements.to_pylist()
    reset = next(s["start_s"] for s in stmts if "pg_stat_statements_reset" in s["text"])
    ours = Counter(s["class_id"] for s in stmts if s["start_s"] > reset and s["error_state"] is None)
    theirs: Counter = Counter()
    for query, calls, datname, toplevel in production["pss"]:
        # pg_stat_statements leaves out utility statements sent with the extended protocol (pgbench's
        # prepared BEGIN and END); the log has them all: utility statements are not compared
        if datname != "dbtier" or not toplevel or "pg_stat_statements" in query or is_utility(query):
            continue
        fp = fingerprint_id(query)
        assert fp is not None, query
        theirs[fp] += calls
    pgbench = [fp for fp, n in theirs.items() if n >= 50]  # pgbench's five, two seconds of them
    assert len(pgbench) == 5
    assert {fp: ours[fp] for fp in theirs} == dict(theirs)


def test_sessions_and_time(imported):
    cap = imported["csvlog"].capture
    sessions = cap.sessions.to_pylist()
    apps = Counter(s["application"] for s in sessions)
    assert apps["shop"] == 1 and apps["psql"] == 1 and apps["pgbench"] >= 3   # -i, and the run's -c 2 (+1)
    ended = [s for s in sessions if s["end_s"] is not None]
    assert len(ended) >= len(sessions) - 1   # the last may not have logged its end yet
    assert all(s["end_s"] >= s["start_s"] for s in ended)
    assert {s["database"] for s in sessions} == {"dbtier"}
    stmts = cap.statements
    assert cap.span_s >= 2.0   # pgbench ran two seconds
    assert pc.max(stmts["start_s"]).as_py() <= cap.span_s
    by_class = {r["class_id"]: r for r in cap.classes.to_pylist()}
    assert sum(r["calls"] for r in by_class.values()) == stmts.num_rows


def test_gzip_and_files_in_any_order(imported, production, tmp_path):
    files = _files(production, "stderr")
    zipped = tmp_path / (files[0].name + ".gz")
    zipped.write_bytes(gzip.compress(files[0].read_bytes()))
    again = read_logs([*reversed(files[1:]), zipped]).capture
    assert again.statements.equals(imported["stderr"].capture.statements)
    assert again.sessions.equals(imported["stderr"].capture.sessions)


def test_cli_writes_a_workload_directory(production, imported, tmp_path):
    out, doc = tmp_path / "work", tmp_path / "import.json"
    proc = dbtier("workload", "import", *map(str, _files(production, "jsonlog")), "-o", str(out), "--json", str(doc),
                  check=True)
    assert "statements of other databases" in proc.stdout and "written:" in proc.stdout
    cap = capture.read(out)
    assert cap.kind == "log" and not cap.synthetic
    assert cap.statements.equals(imported["jsonlog"].capture.statements)
    result = json.loads(doc.read_text())
    assert result["kind"] == "workload-import" and result["counts"] == cap.counts
    quiet = dbtier("workload", "import", *map(str, _files(production, "csvlog")), "-o", str(out), "-q", check=True)
    assert quiet.stdout.strip() == f"written: {out}"   # a workload directory is replaced
    assert capture.read(out).sources[0].format == "csvlog"


def test_unreadable_lines_are_counted_and_shown(production, tmp_path):
    files = _files(production, "stderr")
    lines = files[-1].read_text().splitlines(keepends=True)
    bad = tmp_path / files[-1].name
    bad.write_text("".join(lines[:3]) + "garbage from another program\n" + "".join(lines[3:]))
    imp = read_logs([*files[:-1], bad])
    assert imp.unreadable.count == 1
    assert imp.unreadable.examples[0][:2] == (str(bad), 4)
    proc = dbtier("workload", "import", *map(str, [*files[:-1], bad]), "-o", str(tmp_path / "w"), check=True)
    assert f"{bad}:4" in proc.stdout


def test_one_user_kept(production, imported):
    mine = read_logs(_files(production, "csvlog"), user="dbtier").capture
    assert mine.statements.equals(imported["csvlog"].capture.statements)   # the one user of this production
    assert mine.counts["other_users"] == 0
    with pytest.raises(UserError, match="no statements of user 'reporter' in database dbtier; it has dbtier"):
        read_logs(_files(production, "csvlog"), user="reporter")


def test_parameters_unquoted():
    assert parse_params("Parameters: $1 = 'it''s', $2 = NULL, $3 = ''") == ["it's", None, ""]
    assert parse_params("Parameters: $1 = 'a, $2 = b'") == ["a, $2 = b"]
    assert parse_params("prepare: PREPARE p AS SELECT 1") is None


# ---- the default prefix: no session ids -------------------------------------------------------------

def test_default_prefix_recognised_sessions_by_process_id():
    ws = shm_folder()
    try:
        with production_lab(ws, destinations="stderr", sets={"log_line_prefix": "'%m [%p] '"}) as lab:
            for app in ("first", "second"):
                with lab.connect(application_name=app) as conn:
                    conn.execute("SELECT %s::text", (app,))
                    conn.execute("SELECT 2")
            with lab.connect() as conn:
                conn.execute(f"SELECT '{END}'")
            deadline = time.monotonic() + 20
            while not any(END in f.read_text() for f in log_files(lab, ".log")) and time.monotonic() < deadline:
                time.sleep(0.2)
            imp = read_logs(log_files(lab, ".log"))
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    assert imp.prefix == "%m [%p] "
    assert any("told apart by process id" in n for n in imp.notes)
    cap = imp.capture
    for app in ("first", "second"):
        stmts = _session_of(cap, app)
        assert [(s["text"], s["params"]) for s in stmts[-2:]] == [("SELECT $1::text", [app]), ("SELECT 2", None)]


# ---- statistics alone ---------------------------------------------------------------------------------

def _check_synthetic(result, production):
    cap = result.capture
    assert cap.kind == "statistics" and cap.synthetic
    assert cap.database in ("dbtier", str(production["dbtier_oid"]))   # an export has the oid only
    assert any(n.startswith("SYNTHETIC") for n in result.notes)
    stmts = cap.statements.to_pylist()
    assert stmts and all(s["kind"] == "execute" and s["params"] is None for s in stmts)
    assert result.left_out.get("other databases", 0) >= 1
    assert result.left_out.get("utility statements", 0) >= 2   # BEGIN, COMMIT, CREATE ...
    # in proportion to calls: the classes' shares against pg_stat_statements', 8,000 statements drawn
    calls = Counter()
    for query, n, datname, toplevel in production["pss"]:
        if datname == "dbtier" and toplevel:
            calls[fingerprint_id(query)] += n
    mixed = Counter(s["class_id"] for s in stmts)
    total_calls = sum(calls[c] for c in mixed)
    for cid, n in mixed.items():
        assert abs(n / len(stmts) - calls[cid] / total_calls) < 0.05, cid   # about 10 standard deviations
    sources = {s["text"]: s["param_sources"] for s in stmts}
    select = next(t for t in sources if t.startswith("SELECT abalance FROM pgbench_accounts"))
    assert sources[select] == ["pgbench_accounts.aid"]
    update = next(t for t in sources if t.startswith("UPDATE pgbench_accounts"))
    assert sources[update] == [None, "pgbench_accounts.aid"]
    assert result.unknown_sources >= 1


@pytest.mark.parametrize("export", ["pgss.csv", "pgss.json"])
def test_synthetic_from_an_export(production, export):
    result = synthesize(statements=production["out"] / export, sessions=8, duration_s=20, rate_per_s=400, seed=3)
    assert result.capture.sources[0].format.endswith(export.split(".")[1])
    assert 7000 < result.capture.statements.num_rows < 9000   # 400/s for 20 s
    _check_synthetic(result, production)


def test_synthetic_from_the_server_and_cli(production, tmp_path):
    out, doc = tmp_path / "synthetic", tmp_path / "s.json"
    proc = dbtier("workload", "import", "--dsn", production["dsn"], "--sessions", "8", "--duration", "20",
                  "--rate", "400", "-o", str(out), "--json", str(doc), check=True)
    assert "SYNTHETIC" in proc.stdout
    cap = capture.read(out)
    result = json.loads(doc.read_text())
    assert result["synthetic"] is True and result["capture_kind"] == "statistics"
    assert any("SYNTHETIC" in n for n in result["notes"])
    assert cap.database == "dbtier" and cap.counts["statements"] == result["counts"]["statements"] > 7000
    _check_synthetic(synthesize(dsn=production["dsn"], sessions=8, duration_s=20, rate_per_s=400), production)


# ---- bad input: one line, status 2, nothing left ---------------------------------------------------

def _refused(args, message, tmp_path, fresh_dirs=None):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    proc = dbtier("workload", "import", *map(str, args), "-o", str(out))
    return assert_refused_in_one_line(proc, message, fresh_dirs or {"output": out})


def test_wrong_prefix_names_file_line_and_expectation(production, tmp_path):
    files = _files(production, "stderr")
    line = _refused([*files, "--prefix", "%t [%p] "], f"{files[0]}:1: not of log_line_prefix '%t [%p] '", tmp_path)
    assert "expected a time such as 2026-01-31 12:00:00 UTC (%t) at column 1" in line
    line = _refused([*files, "--prefix", "%m %c "], f"{files[0]}:1:", tmp_path)
    assert "expected a session id" in line


def test_a_log_with_no_statements(production, tmp_path):
    first = _files(production, "stderr")[0]
    lines = first.read_text().splitlines(keepends=True)
    quiet = tmp_path / "startup.log"
    quiet.write_text("".join(line for line in lines if "statement: " not in line and "execute " not in line
                             and "duration: " not in line and "ERROR:" not in line))
    _refused([quiet], "no statements in the log", tmp_path)


def test_a_log_of_another_database_only(production, tmp_path):
    _refused([*_files(production, "csvlog"), "--database", "inventory"],
             "no statements of database 'inventory' in the log", tmp_path)


def test_a_truncated_gzip(production, tmp_path):
    first = _files(production, "csvlog")[0]
    cut = tmp_path / (first.name + ".gz")
    data = gzip.compress(first.read_bytes())
    cut.write_bytes(data[: len(data) // 2])
    _refused([cut], f"{cut}: a truncated or damaged gzip file", tmp_path)


def test_unreadable_files(production, tmp_path):
    _refused([tmp_path / "missing.csv"], "no such log file", tmp_path)
    folder = tmp_path / "afolder"
    folder.mkdir()
    _refused([folder], "a folder, not a log file", tmp_path)
    binary = tmp_path / "binary.log"
    binary.write_bytes(bytes(range(256)) * 4)
    _refused([binary], f"{binary}:1: not a PostgreSQL log", tmp_path)
    _refused([*_files(production, "csvlog"), *_files(production, "jsonlog")], "several log formats", tmp_path)


def test_output_onto_a_folder_that_is_not_a_workload(production, tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    proc = dbtier("workload", "import", *map(str, _files(production, "csvlog")), "-o", str(taken))
    assert_refused_in_one_line(proc, "not a workload directory", {})
    assert sorted(p.name for p in taken.iterdir()) == ["notes.txt"]


def test_statistics_bad_input(production, tmp_path):
    _refused(["--dsn", "host=/nonexistent port=1 user=nobody dbname=none"], "--dsn: cannot connect", tmp_path)
    notpss = tmp_path / "other.csv"
    with open(notpss, "w", newline="") as f:
        csv.writer(f).writerows([["a", "b"], ["1", "2"]])
    _refused(["--statements", notpss], "not an export of pg_stat_statements", tmp_path)
    _refused(["--statements", production["out"] / "pgss.csv", "--database", "inventory"],
             "no statements of database 'inventory'", tmp_path)
    _refused([*_files(production, "csvlog"), "--sessions", "4"], "--sessions shapes a synthetic workload", tmp_path)
    with pytest.raises(UserError, match="either"):
        synthesize()
    with pytest.raises(UserError, match="no statements of user 'reporter' .rolname. in database dbtier"):
        synthesize(dsn=production["dsn"], user="reporter")


def test_the_docs_give_every_setting_production_needs():
    from dbtier.production.logsettings import CAPTURE, STATISTICS

    page = (Path(__file__).resolve().parents[2] / "docs" / "production.md").read_text()
    for name, (value, _why) in {**CAPTURE, **STATISTICS}.items():
        assert f"| `{name}` | `{value}` |" in page, name
    for name, (value, _why) in CAPTURE.items():
        assert f"ALTER SYSTEM SET {name} = " in page, name
