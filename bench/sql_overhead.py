"""The client's cost of `dbtier run sql` per statement, against `psql -f` on the same file: dbtier
splits the file, sends each statement on one connection, fetches its rows and times it; psql does the
same without the timing. One lab on an emulated RAM SAN (the devices cost next to nothing), a file of
short indexed lookups, rounds interleaved, the median of each.

    python bench/sql_overhead.py [STATEMENTS] [ROUNDS]

Prints, per statement: wall time and the client's CPU (dbtier's own process, or psql's)."""

from __future__ import annotations

import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from dbtier.devices.spec import parse_all
from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import Lab, LabOptions
from dbtier.workloads import sqlfile
from dbtier.workloads.base import QuietProgress
from dbtier.workloads.user_sql import run_statements


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    folder = Path(tempfile.mkdtemp(prefix="dbtier-bench-sql-"))
    work = folder / "lookups.sql"
    work.write_text("".join(f"SELECT v FROM kv WHERE k = {1 + (i * 7919) % 10000};\n" for i in range(n)))
    statements = sqlfile.phases(work, "lookups")[0].statements
    base = Path(tempfile.mkdtemp(prefix="dbtier-bench-ws-", dir="/dev/shm"))
    base.chmod(0o755)
    timings: dict[str, list[tuple[float, float]]] = {"dbtier run sql": [], "psql -f": []}
    try:
        measure(n, rounds, work, statements, base, timings)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{n:,} indexed lookups from one file, emulated RAM SAN, median of {rounds} interleaved rounds")
    print(f"{'client':>16} {'wall us/stmt':>13} {'client CPU us/stmt':>19}")
    for name, rows in timings.items():
        wall = statistics.median(w for w, _ in rows)
        cpu = statistics.median(c for _, c in rows)
        print(f"{name:>16} {1e6 * wall / n:>13.1f} {1e6 * cpu / n:>19.1f}")


def measure(n: int, rounds: int, work: Path, statements, base: Path, timings: dict) -> None:
    with Lab(parse_all(["d=ram-san"]), placement.parse([], ["d"]), LabOptions(workspace=base),
             say=lambda _l: None) as lab:
        db = lab.handle
        db.execute("CREATE TABLE kv (k int PRIMARY KEY, v int)")
        db.execute("INSERT INTO kv SELECT g, g FROM generate_series(1, 10000) g")
        lab.session.pause(False)  # emulated, as a measured run is
        for _ in range(rounds):
            t0, c0 = time.monotonic(), own_cpu()
            run_statements(db, statements, 0.0, QuietProgress())
            timings["dbtier run sql"].append((time.monotonic() - t0, own_cpu() - c0))
            t0, c0 = time.monotonic(), children_cpu()
            proc = db.client("psql", "-X", "-q", "-o", "/dev/null", "-f", str(work), db.database, as_me=True).run()
            assert proc.returncode == 0, proc.stderr
            timings["psql -f"].append((time.monotonic() - t0, children_cpu() - c0))


if __name__ == "__main__":
    main()
