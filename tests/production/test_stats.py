"""Production's statistics against a real server: a "production" lab runs random index lookups on
five tables and a scan of a sixth; snapshots before and after give a delta whose figures are the
server's own; the same SQL run in the lab (`dbtier run sql`, same device and cache) ranks the objects
as production did; an estimate from the statistics alone picks the hottest random-read object."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from tests.conftest import assert_refused_in_one_line, dbtier
from tests.production.conftest import production_lab

#: lookup tables: name -> (rows, lookups); 'a' gets the most random reads by far, 'big' is scanned once
LOOKUPS = {"a": (20000, 1500), "b": (10000, 200), "c": (6000, 120), "d": (4000, 80), "e": (2000, 40)}
SCANNED_ROWS = 30000
#: the goal of issue 30: "rank correlation of per-object reads of at least 0.9 over the top 10 objects
#: when the lab's caches match production's"; production and the lab run the very same statements
#: from a cold cache on the same device, so the rank correlation should be near 1; 0.9 is the goal
RHO_GOAL = 0.9


def _setup_statements() -> list[str]:
    out = []
    for name, (rows, _n) in LOOKUPS.items():
        out += [f"CREATE TABLE {name} (id int PRIMARY KEY, pad text)",
                f"INSERT INTO {name} SELECT g, repeat(md5(g::text), 7) FROM generate_series(1, {rows}) g"]
    out += ["CREATE TABLE big (id int PRIMARY KEY, v int, pad text)",
            f"INSERT INTO big SELECT g, g % 100, repeat(md5(g::text), 9) FROM generate_series(1, {SCANNED_ROWS}) g",
            "VACUUM ANALYZE", "CHECKPOINT"]
    return out


def _run_statements() -> list[str]:
    rng = random.Random(30)
    out = []
    for name, (rows, n) in LOOKUPS.items():
        out += [f"SELECT pad FROM {name} WHERE id = {rng.randint(1, rows)}" for _ in range(n)]
    rng.shuffle(out)
    return out + ["SELECT count(*) FROM big WHERE pad <> ''"]


def _dsn(lab, role: str | None = None) -> str:
    """The lab authenticates its own user only (peer): another role is taken at connection (role=)."""
    return f"host={lab.cluster.socket_dir} port=5432 user=dbtier dbname=dbtier" + (f" options='-c role={role}'" if role else "")


def _statio(lab) -> dict:
    """The server's own per-object counters, read directly."""
    with lab.connect() as conn:
        t = {r[0]: r[1:] for r in conn.execute(
            "SELECT s.relname, s.heap_blks_read, s.heap_blks_hit, t.idx_scan, t.seq_scan FROM pg_statio_user_tables s "
            "JOIN pg_stat_user_tables t USING (relid)").fetchall()}
        i = {r[0]: r[1:] for r in conn.execute(
            "SELECT indexrelname, idx_blks_read, idx_blks_hit FROM pg_statio_user_indexes").fetchall()}
    return {"tables": t, "indexes": i}


def _flushed(conn) -> None:
    """This session's statistics in the server's shared counters now, not at its next idle flush."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")


@pytest.fixture(scope="module")
def production(production_workspace):
    """A production server that ran the workload between two snapshots, from a cold cache."""
    folder = production_workspace / "files"
    folder.mkdir()
    (folder / "setup.sql").write_text(";\n".join(_setup_statements()) + ";\n")
    statements = _run_statements()
    (folder / "run.sql").write_text(";\n".join(statements) + ";\n")
    with production_lab(production_workspace, destinations="csvlog") as lab:
        with lab.connect() as conn:
            conn.autocommit = True
            conn.execute("CREATE EXTENSION pg_stat_statements")
            conn.execute("CREATE ROLE nostats LOGIN")
            for s in _setup_statements():
                conn.execute(s)
        lab.restart_cold()
        before_views = _statio(lab)
        first = folder / "first.json"
        assert dbtier("stats", "snapshot", "--dsn", _dsn(lab), "-o", str(first), "-q", check=True).returncode == 0
        with lab.connect() as conn:
            conn.autocommit = True
            for s in statements:
                conn.execute(s)
            _flushed(conn)
        time.sleep(0.01)  # taken_at has microseconds; the second must be later
        second = folder / "second.json"
        dbtier("stats", "snapshot", "--dsn", _dsn(lab), "-o", str(second), "-q", check=True)
        after_views = _statio(lab)
        delta = folder / "delta.json"
        proc = dbtier("stats", "delta", str(first), str(second), "-o", str(delta), check=True)
        yield {"lab": lab, "folder": folder, "first": first, "second": second, "delta": delta, "delta_out": proc.stdout,
               "before": before_views, "after": after_views}


def test_snapshot_format(production):
    doc = json.loads(production["first"].read_text())
    assert doc["format"] == 1 and doc["kind"] == "stats-snapshot"
    assert doc["server"]["database"] == "dbtier" and doc["server"]["version_num"] >= 180000
    assert doc["server"]["system_identifier"].isdigit()
    with production["lab"].connect() as conn:
        n = conn.execute("SELECT count(*) FROM pg_settings").fetchone()[0]
        sb = conn.execute("SELECT setting, unit FROM pg_settings WHERE name = 'shared_buffers'").fetchone()
    assert len(doc["settings"]) == n  # every row of pg_settings
    assert (doc["settings"]["shared_buffers"]["setting"], doc["settings"]["shared_buffers"]["unit"]) == sb
    assert set(doc["settings"]["work_mem"]) == {"setting", "unit", "source", "boot_val", "reset_val", "vartype"}
    assert doc["statements"]["installed"] and not doc["kcache"]["installed"] and "pg_stat_kcache" in doc["kcache"]["note"]


def test_delta_equals_the_servers_views(production):
    delta = json.loads(production["delta"].read_text())
    objects = {o["name"]: o for o in delta["objects"]}
    before, after = production["before"], production["after"]
    for name in [*LOOKUPS, "big"]:
        heap_read, heap_hit = (after["tables"][name][k] - before["tables"][name][k] for k in (0, 1))
        assert (objects[name]["blocks_read"], objects[name]["blocks_hit"]) == (heap_read, heap_hit), name
        idx_read, idx_hit = (after["indexes"][f"{name}_pkey"][k] - before["indexes"][f"{name}_pkey"][k] for k in (0, 1))
        assert (objects[f"{name}_pkey"]["blocks_read"], objects[f"{name}_pkey"]["blocks_hit"]) == (idx_read, idx_hit)
    # and what the workload did, counted by the server: one index scan per lookup, one sequential scan
    for name, (_rows, n) in LOOKUPS.items():
        assert objects[name]["idx_scan"] == n and objects[name]["seq_scan"] == 0, name
        assert objects[f"{name}_pkey"]["idx_scan"] == n
    assert objects["big"]["seq_scan"] == 1 and objects["big"]["seq_tup_read"] == SCANNED_ROWS
    assert objects["big"]["blocks_read"] > 0 and objects["a"]["blocks_read"] > objects["b"]["blocks_read"] > 0
    assert abs(sum(o["read_share"] for o in delta["objects"]) - 1) < 1e-9
    # statements by class: the lookups of a as one class, and none of the snapshots' own queries
    classes = delta["statements"]["classes"]
    a = [c for c in classes if c["query"] == "SELECT pad FROM a WHERE id = $1"]
    assert len(a) == 1 and a[0]["calls"] == LOOKUPS["a"][1]
    assert not [c for c in classes if "pg_stat_io" in c["query"] or "pg_settings" in c["query"]]
    assert "read past shared_buffers: may be a kernel-cache hit" in production["delta_out"]


def test_refusals(production, shm_dir):
    lab, folder = production["lab"], production["folder"]
    out = shm_dir / "out"
    out.mkdir()
    proc = dbtier("stats", "snapshot", "--dsn", _dsn(lab, "nostats"), "-o", str(out / "s.json"))
    assert_refused_in_one_line(proc, "GRANT pg_read_all_stats TO nostats", {"output": out})
    proc = dbtier("stats", "snapshot", "--dsn", f"host={shm_dir} port=5999 user=dbtier dbname=dbtier",
                  "-o", str(out / "s.json"))
    assert_refused_in_one_line(proc, "--dsn: cannot connect", {"output": out})
    proc = dbtier("stats", "delta", str(production["second"]), str(production["first"]), "-o", str(out / "d.json"))
    assert_refused_in_one_line(proc, "not after", {"output": out})
    with lab.connect() as conn:
        conn.execute("SELECT pg_stat_reset()")
    after_reset = folder / "after-reset.json"
    dbtier("stats", "snapshot", "--dsn", _dsn(lab), "-o", str(after_reset), "-q", check=True)
    proc = dbtier("stats", "delta", str(production["first"]), str(after_reset), "-o", str(out / "d.json"))
    assert_refused_in_one_line(proc, "statistics were reset between the snapshots", {"output": out})


def test_another_servers_snapshot_refused(production, shm_dir):
    other_ws = shm_dir / "other"
    other_ws.mkdir()
    other_ws.chmod(0o755)
    other = shm_dir / "other.json"
    with production_lab(other_ws, destinations="csvlog") as lab:
        dbtier("stats", "snapshot", "--dsn", _dsn(lab), "-o", str(other), "-q", check=True)
    theirs = json.loads(other.read_text())["server"]["system_identifier"]
    ours = json.loads(production["first"].read_text())["server"]["system_identifier"]
    assert theirs != ours
    out = shm_dir / "out"
    out.mkdir()
    proc = dbtier("stats", "delta", str(production["first"]), str(other), "-o", str(out / "d.json"))
    assert_refused_in_one_line(proc, f"a snapshot of another server (system_identifier {theirs})", {"output": out})


def test_lab_beside_production(production, production_workspace, shm_dir):
    """The same SQL from a cold cache on the same device (ram-san) with the same cache (32MB, the
    production lab's and `run`'s default): the lab's per-object reads rank as production's."""
    folder = production["folder"]
    out = shm_dir / "results"
    out.mkdir()
    proc = dbtier("run", "sql", "--setup", str(folder / "setup.sql"), "--run", str(folder / "run.sql"),
                  "-d", "prod=ram-san", "--cache", "32MB", "--trace", "-o", str(out), "--workspace",
                  str(production_workspace), "--production", str(production["delta"]), check=True)
    assert "production beside the lab" in proc.stdout
    run_dir = Path(proc.stdout.strip().splitlines()[-1].split(": ", 1)[1])
    result = json.loads((run_dir / "result.json").read_text())
    inline = result["production"]
    report = (run_dir / "report.html").read_text()
    assert "production beside the lab" in report
    compared = shm_dir / "compare.json"
    proc = dbtier("stats", "compare", str(production["delta"]), str(run_dir), "--json", str(compared), check=True)
    doc = json.loads(compared.read_text())
    assert doc["rank_correlation"] == inline["rank_correlation"]
    assert doc["top"] == 10
    assert doc["rank_correlation"] >= RHO_GOAL, proc.stdout
    rows = {r["object"]: r for r in doc["objects"]}
    assert rows["a"]["lab_blocks_read"] > 0 and rows["big"]["lab_blocks_read"] > 0
    # the lab's reads of each looked-up table within 10% of production's (same SQL, same cold cache)
    for name in LOOKUPS:
        assert rows[name]["lab_blocks_read"] == pytest.approx(rows[name]["production_blocks_read"], rel=0.10), name
    assert not [d for d in doc["differences"] if "the lab's cache" in d]  # the caches match
    # the same run told apart from production where it would differ: a smaller cache, an object never read
    from dbtier.production import delta as delta_mod, labcompare

    smaller = {**result, "lab": {**result["lab"], "cache_bytes": 8 << 20},
               "object_io": [r for r in result["object_io"] if r["object"] != "c"]}
    said = labcompare.compare(delta_mod.read(production["delta"]), smaller)["differences"]
    assert any("the lab's cache (shared_buffers 8.0 MB) is smaller than production's (32.0 MB)" in d for d in said), said
    assert any(d.startswith("production read c (") and "the lab never did" in d for d in said), said


def test_advise_from_stats_picks_the_hottest_random_reads(production, shm_dir):
    delta = json.loads(production["delta"].read_text())
    a = next(o for o in delta["objects"] if o["name"] == "a")
    out = shm_dir / "estimate.json"
    proc = dbtier("advise", "--from-stats", str(production["delta"]), "--fast", "nvme=nvme-gen4",
                  "--slow", "hdd-sata-7200", "--budget", f"{a['bytes'] // 1024}kB", "--json", str(out), check=True)
    doc = json.loads(out.read_text())
    hottest = max(doc["objects"], key=lambda o: o["reads_per_s"] * o["random_share"])
    assert hottest["name"] == "a" and hottest["random_share"] == 1.0
    assert doc["recommended"]["fast"] == ["a"], proc.stdout
    assert doc["recommended"]["place"] == "data=slow,a=nvme"
    assert "ESTIMATE" in proc.stdout and "assumed:" in proc.stdout
    assert "dbtier compare replay" in proc.stdout and "advised:slow=hdd-sata-7200,nvme=nvme-gen4:data=slow,a=nvme" in proc.stdout
    big = next(o for o in doc["objects"] if o["name"] == "big")
    assert big["random_share"] == 0.0 and not big["recommended"]  # one scan: sequential, and larger than the budget


def test_a_damaged_snapshot_or_delta_is_refused_naming_the_file(production, shm_dir):
    """A snapshot is content dbtier may not have written: what the delta reads is checked."""
    doc = json.loads(production["second"].read_text())
    doc["tables"][0]["heap_blks_read"] = -5
    damaged = shm_dir / "damaged.json"
    damaged.write_text(json.dumps(doc))
    out = shm_dir / "out"
    out.mkdir()
    proc = dbtier("stats", "delta", str(production["first"]), str(damaged), "-o", str(out / "d.json"))
    assert_refused_in_one_line(proc, f"{damaged}: tables[0] ('a'): heap_blks_read is -5", {"output": out})
    truncated = shm_dir / "truncated.json"
    truncated.write_text(production["delta"].read_text()[:500])
    proc = dbtier("stats", "compare", str(truncated), str(shm_dir))
    assert_refused_in_one_line(proc, f"{truncated}: line ", {"output": out})
    proc = dbtier("stats", "compare", str(production["first"]), str(shm_dir))
    assert_refused_in_one_line(proc, "not a stats-delta", {"output": out})
    proc = dbtier("advise", "--from-stats", str(production["delta"]), "--fast", "nvme=nvme-gen4", "--budget", "8kB")
    assert_refused_in_one_line(proc, "--budget: room for 8.0 kB", {"output": out})


def test_a_comparison_of_layouts_takes_no_production(shm_dir):
    """compare runs several layouts: --production is run's (each layout's directory goes to stats compare)."""
    import dbtier as api
    from dbtier.errors import UserError

    with pytest.raises(UserError, match="dbtier stats compare DELTA RUN_DIR"):
        api.compare("sql", production=str(shm_dir / "delta.json"), config=["a:d=ram-san"], output=str(shm_dir))
    assert "--production" not in dbtier_cli_help("compare", "sql") and "--production" in dbtier_cli_help("run", "sql")


def dbtier_cli_help(*command: str) -> str:
    return dbtier(*command, "--help", check=True).stdout
