"""The README's "Your production workload" commands, run as printed on a small production server: two
snapshots around an hour of production (here a few seconds of several sessions), the log imported,
and the replay from the dump taken as it began, with production's settings and statistics beside
it. Only the names differ: the DSN is the production lab's socket, the log its csvlog files."""

from __future__ import annotations

import json
import random
import re
import shlex
import subprocess
import threading
import time
from pathlib import Path

import psycopg

from dbtier.production import capture
from tests.conftest import dbtier
from tests.production.conftest import log_files, production_lab

README = Path(__file__).resolve().parents[2] / "README.md"
SESSIONS = 3
LOOKUPS = 150


def _readme_commands() -> list[list[str]]:
    """The tutorial's shell lines (continuations joined, comments dropped), each split as a shell would."""
    text = README.read_text()
    section = text[text.index("## Your production workload"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    joined = re.sub(r"\\\n\s*", " ", block)
    return [shlex.split(line.split("  #", 1)[0]) for line in joined.splitlines() if line.strip()]


def _session(dsn: str, seed: int) -> None:
    rng = random.Random(seed)
    with psycopg.connect(dsn, autocommit=True, application_name=f"shop-{seed}") as conn:
        for _ in range(LOOKUPS):
            conn.execute("SELECT name FROM customer WHERE id = %s", (rng.randint(1, 20000),))
        with conn.transaction():
            conn.execute("UPDATE customer SET visits = visits + 1 WHERE id = %s", (seed,))
        conn.execute("SELECT count(*) FROM orders WHERE amount > %s", (rng.random() * 100,))


def test_the_production_tutorial_runs_as_printed(production_workspace, tmp_path):
    commands = _readme_commands()
    assert [c[:3] for c in commands] == [["dbtier", "stats", "snapshot"], ["dbtier", "stats", "delta"],
                                         ["dbtier", "workload", "import"], ["dbtier", "run", "replay"]]
    with production_lab(production_workspace, destinations="csvlog") as lab:
        dsn = f"host={lab.cluster.socket_dir} port=5432 user=dbtier dbname=dbtier"
        with lab.connect() as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
            conn.execute("CREATE TABLE customer (id int PRIMARY KEY, name text, visits int DEFAULT 0)")
            conn.execute("INSERT INTO customer (id, name) SELECT g, md5(g::text) FROM generate_series(1, 20000) g")
            conn.execute("CREATE TABLE orders (id int PRIMARY KEY, customer int, amount numeric)")
            conn.execute("INSERT INTO orders SELECT g, g % 20000 + 1, g % 100 FROM generate_series(1, 30000) g")
            conn.execute("VACUUM ANALYZE")
        # the dump as the hour begins, then a log of its own for the hour (a file name is to the second)
        subprocess.run([str(lab.install.exe("pg_dump")), "-Fc", "-f", str(tmp_path / "shop.dump"), dsn], check=True)
        time.sleep(1.1)
        with lab.connect() as conn:
            conn.execute("SELECT pg_rotate_logfile()")
        time.sleep(0.5)
        before_hour = set(log_files(lab, ".csv"))

        def substitute(args: list[str]) -> list[str]:
            out = []
            for a in args[1:]:
                if a.startswith("host=db1"):
                    a = dsn
                out.append(a)
            return out

        dbtier(*substitute(commands[0]), cwd=tmp_path, check=True)  # snapshot before.json
        threads = [threading.Thread(target=_session, args=(dsn, k + 1)) for k in range(SESSIONS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with lab.connect() as conn:
            conn.execute("SELECT pg_stat_force_next_flush()")
        time.sleep(1.1)
        dbtier(*substitute(commands[0])[:-1], "after.json", cwd=tmp_path, check=True)  # ... and after.json
        hour_logs = [p for p in log_files(lab, ".csv") if p not in before_hour] or log_files(lab, ".csv")[-1:]
        for log in hour_logs:
            (tmp_path / log.name).write_bytes(log.read_bytes())
    dbtier(*commands[1][1:], cwd=tmp_path, check=True)  # stats delta
    imported = [a for a in commands[2][1:] if not a.startswith("postgresql-")]
    dbtier(*imported[:2], *[p.name for p in hour_logs], *imported[2:], cwd=tmp_path, check=True)
    captured = capture.read(tmp_path / commands[2][commands[2].index("-o") + 1])
    assert captured.counts["snapshot_sessions"] == 2  # the snapshots' own sessions are not the workload
    assert sorted(a for a in captured.sessions["application"].to_pylist() if (a or "").startswith("shop-")) == \
        [f"shop-{k + 1}" for k in range(SESSIONS)]
    out = tmp_path / "runs"
    dbtier(*commands[3][1:], "-q", "--workspace", str(production_workspace), "-o", str(out), cwd=tmp_path, check=True)
    (run_dir,) = out.iterdir()
    result = json.loads((run_dir / "result.json").read_text())
    metrics = result["metrics"]
    classes = {c["normalized"]: c for c in metrics["classes"]}
    lookups = [c for text, c in classes.items() if text.startswith("SELECT name FROM customer")]
    assert lookups and lookups[0]["count"] == SESSIONS * LOOKUPS, classes
    assert metrics["replay"]["new_failures"] == 0, metrics["replay"]["first_new_failures"]
    assert result["production"]["objects"], result["production"]
    assert result["lab"]["settings_compared"], "the settings beside production's"
