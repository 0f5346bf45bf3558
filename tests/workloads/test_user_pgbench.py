"""`dbtier run pgbench` on real servers: pgbench's own options, the per-script latency from its
per-transaction log (checked against pgbench's own summary), your own scripts and tables placed."""

from __future__ import annotations

import json
import re

import pytest

from dbtier.workloads import pgbench_log
from tests.conftest import dbtier


def test_the_log_is_read_by_script_with_skipped_and_failed(tmp_path):
    prefix = tmp_path / "log"
    (tmp_path / "log.100").write_text("0 0 1500 0 1700000000 1\n0 1 skipped 0 1700000000 2 300\n"
                                      "1 0 2500 1 1700000000 3\n")
    (tmp_path / "log.100.1").write_text("2 0 failed 1 1700000000 4 0 3\n2 1 3500 1 1700000000 5\n")
    logs = pgbench_log.read(prefix)
    assert logs[0].latency_ms == [1.5] and logs[0].skipped == 1
    assert sorted(logs[1].latency_ms) == [2.5, 3.5] and logs[1].failed == 1
    assert list(tmp_path.iterdir()) == []  # read once, removed
    s = pgbench_log.summary(logs[1])
    assert s["count"] == 2 and s["p50_ms"] == 3.0 and s["failed"] == 1


def pgbench_says(output: list[str]) -> dict[int, tuple[int, float]]:
    """pgbench's own summary: per script, its transactions and latency average (ms)."""
    text = "\n".join(output)
    out = {}
    for m in re.finditer(r"SQL script (\d+):.*?\n - weight.*?\n - (\d+) transactions.*?latency average = ([\d.]+) ms",
                         text, re.S):
        out[int(m.group(1)) - 1] = (int(m.group(2)), float(m.group(3)))
    return out


@pytest.fixture(scope="module")
def pgbench_run(module_shm_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("pgb")
    # -t, not -T: with -T, pgbench logs the transactions that end after the deadline but leaves them out of
    # its summary, so the two would differ by a transaction or two. -j 1: pgbench's threads add to its
    # per-script summary without a lock ("XXX could use a mutex here, but we choose not to", pgbench.c),
    # so with two threads its summary can lose a transaction that its log (ours) has: 1,499 against 1,502
    dbtier("run", "pgbench", "-i", "-s", "1", "-c", "2", "-j", "1", "-t", "1000", "-b", "tpcb", "-b", "select@3",
           "-d", "hdd=ram-san", "-d", "ssd=ram-san", "--place", "pgbench_accounts_pkey=ssd", "--workspace",
           str(module_shm_dir), "-o", str(out), "--json", str(out / "r.json"), "-q", check=True)
    return json.loads((out / "r.json").read_text())


def test_latency_per_script_agrees_with_pgbench(pgbench_run):
    m = pgbench_run["metrics"]
    names = list(m["scripts"])
    assert names == ["tpcb-like", "select-only"]
    said = pgbench_says(m["pgbench"]["output"])
    assert set(said) == {0, 1}
    for i, name in enumerate(names):
        s = m["scripts"][name]
        count, average = said[i]
        assert s["count"] == count > 0
        assert s["mean_ms"] == pytest.approx(average, abs=0.0015)  # pgbench prints three decimals
        assert s["p50_ms"] <= s["p90_ms"] <= s["p99_ms"] <= s["p999_ms"]
    assert m["transactions"] == sum(c for c, _ in said.values()) == 2000
    assert m["tps"] == pytest.approx(m["transactions"] / pgbench_run["elapsed_s"], rel=0.25)
    assert pgbench_run["rates"]["tps"] == m["tps"]


def test_pgbench_tables_are_placed(pgbench_run):
    where = {o["object"]: o["device"] for o in pgbench_run["objects"]}
    assert where["pgbench_accounts_pkey"] == "ssd" and where["pgbench_accounts"] == "hdd"
    assert pgbench_run["devices"][1]["counters"]["reads"] + pgbench_run["devices"][1]["counters"]["cache_hits"] >= 0


def test_your_own_script_on_your_own_table(module_shm_dir, tmp_path):
    (tmp_path / "schema.sql").write_text("CREATE TABLE kv (k int PRIMARY KEY, v int);\n"
                                         "INSERT INTO kv SELECT g, 0 FROM generate_series(1, 1000) g;\n")
    (tmp_path / "bump.sql").write_text("\\set k random(1, 1000)\nUPDATE kv SET v = v + 1 WHERE k = :k;\n")
    (tmp_path / "read.sql").write_text("\\set k random(1, 1000)\nSELECT v FROM kv WHERE k = :k;\n")
    dbtier("run", "pgbench", "--setup", str(tmp_path / "schema.sql"), "-f", f"{tmp_path / 'bump.sql'}@1",
           "-f", f"{tmp_path / 'read.sql'}@4", "-c", "2", "-t", "200", "-M", "prepared", "-d", "d=ram-san",
           "--workspace", str(module_shm_dir), "-o", str(tmp_path / "out"), "--json", str(tmp_path / "r.json"),
           "-q", check=True)
    m = json.loads((tmp_path / "r.json").read_text())["metrics"]
    assert m["transactions"] == 400  # -t is per client
    assert {n: s["weight"] for n, s in m["scripts"].items()} == {"bump.sql": 1, "read.sql": 4}
    assert m["scripts"]["read.sql"]["count"] > m["scripts"]["bump.sql"]["count"]


@pytest.mark.parametrize("args, message", [
    (["-T", "5", "-t", "10"], "not both"),
    (["-b", "nosuch"], "choose one of tpcb-like, simple-update, select-only"),
    (["-f", "/nonexistent/x.sql"], "no such script file"),
    (["--no-such-option"], "No such option"),
    (["-c", "1", "-j", "2"], "at most one thread per client"),
    (["-i", "--setup", "/etc/hostname"], "leave it out"),
    (["-R", "0"], "give a positive number"),
    (["-b", "tpcb@0"], "a weight is 1 to 1000"),
])
def test_bad_pgbench_options_are_one_line(args, message, shm_dir, tmp_path):
    proc = dbtier("run", "pgbench", *args, "-d", "d=ram-san", "--workspace", str(shm_dir), "-o", str(tmp_path / "o"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert message in proc.stderr
    assert not (tmp_path / "o").exists() and not list(shm_dir.iterdir())


@pytest.mark.parametrize("script, message", [
    ("\\set aid random(1, \nSELECT 1;\n", "s.sql:1: syntax error in command \"set\""),
    ("\\set aid random(1, 10)\nSELECT 1;\nSELECT *\n  FROM nosuch WHERE x = :aid;\n",
     's.sql:3: relation "nosuch" does not exist'),
    ("SELECT 1;\n\\set a 1 + \\\n  2\nSELECT 1/0;\n", "s.sql:4: division by zero"),
])
def test_a_script_mistake_names_its_script_and_line(script, message, shm_dir, tmp_path):
    """pgbench names the line of a script it cannot parse, and only the command's number of one that
    fails as it runs: either way the one line says FILE:LINE: the message, exit status 2."""
    (tmp_path / "s.sql").write_text(script)
    proc = dbtier("run", "pgbench", "-i", "-f", str(tmp_path / "s.sql"), "-t", "3", "-d", "d=ram-san",
                  "--workspace", str(shm_dir), "-o", str(tmp_path / "o"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"dbtier: error: -f {tmp_path}/") and message in proc.stderr, proc.stderr
    assert not (tmp_path / "o").exists()
