"""How fast `dbtier run replay` sends statements, and how closely it keeps a schedule.

Each case is a real `run replay` (through the Python API) on an emulated RAM SAN (-d ram=ram-san),
its database made by a setup file (a 100,000-row table with its primary key), the capture built here:
short statements, two thirds a named prepared primary-key lookup (the extended protocol with its
value), one third the same lookup as simple-protocol text.

- rate: `--speed max` with 1, 4 and 16 sessions (30,000 statements in all, split evenly): the
  replay's statements per second (statements over the replay's own elapsed time, one process).
  The goal is at least 5,000 per second per replay process (pgreplay reaches about 2,000).
- lag: `--speed 1`, 8 sessions each sending one statement every 5 ms for 10 s (16,000 statements,
  1,600 a second): how late statements started against the schedule (p50, p99, max).

Run: python bench/replay_rate.py [--json PATH]   (about two minutes)"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa

import dbtier
from dbtier.production import capture

LOOKUP = "SELECT balance FROM account WHERE id = $1"
SETUP = ("CREATE TABLE account (id int PRIMARY KEY, balance bigint NOT NULL);\n"
         "INSERT INTO account SELECT g, 1000 FROM generate_series(1, 100000) g;\n")


def build(folder: Path, sessions: int, per_session: int, every_s: float) -> Path:
    """A capture of `sessions` sessions, each `per_session` lookups `every_s` apart."""
    srows, rows = [], []
    for s in range(sessions):
        srows.append({"session": s, "log_session": f"s{s}", "database": "dbtier", "user": "bench",
                      "application": "bench", "client": "[local]", "start_s": 0.0,
                      "end_s": per_session * every_s + 0.01})
        for j in range(per_session):
            key = (7919 * (s * per_session + j)) % 100000 + 1
            simple = j % 3 == 2
            rows.append({"session": s, "seq": j, "start_s": j * every_s, "duration_s": None,
                         "kind": "simple" if simple else "execute", "name": None if simple else "lookup",
                         "text": f"SELECT balance FROM account WHERE id = {key}" if simple else LOOKUP,
                         "params": None if simple else [str(key)], "param_sources": None,
                         "class_id": 2 if simple else 1, "error_state": None, "error_message": None})
    n = len(rows)
    cap = capture.Capture(
        kind="log", database="dbtier", sources=[capture.Source("bench/replay_rate.py", "built", "0" * 64)],
        start="2026-11-26T00:00:00+00:00", span_s=per_session * every_s + 0.01,
        counts={"sessions": sessions, "statements": n, "prepared": sessions, "copy_from_stdin": 0, "fastpath": 0},
        sessions=pa.Table.from_pylist(srows, schema=capture.SESSIONS),
        statements=pa.Table.from_pylist(rows, schema=capture.STATEMENTS),
        classes=pa.Table.from_pylist([{"class_id": 1, "normalized": LOOKUP, "calls": n - n // 3, "mean_s": None},
                                      {"class_id": 2, "normalized": "SELECT balance FROM account WHERE id = $1 "
                                       "(simple)", "calls": n // 3, "mean_s": None}], schema=capture.CLASSES))
    return capture.write(folder / f"w-{sessions}-{every_s}", cap)


def replay(work: Path, folder: Path, speed: str) -> dict:
    result = dbtier.run("replay", workload_dir=str(folder), setup=[str(work / "setup.sql")], device="ram=ram-san",
                        speed=speed, output=str(work / "out"), set=["max_connections=40"])
    return result.doc["metrics"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="replay-rate-"))
    (work / "setup.sql").write_text(SETUP)
    figures: dict = {"rate": {}, "lag": {}}
    try:
        print("--speed max on ram-san: statements per second of one replay process")
        for sessions in (1, 4, 16):
            m = replay(work, build(work, sessions, 30000 // sessions, 0.001), "max")
            figures["rate"][sessions] = m["statements_per_s"]
            print(f"  {sessions:>2} sessions: {m['statements_per_s']:>8,.0f} statements/s "
                  f"({m['statements']:,} statements, {m['replay']['elapsed_s']:.2f} s)")
        m = replay(work, build(work, 8, 2000, 0.005), "1")
        r = m["replay"]
        figures["lag"] = {k: r[k] for k in ("lag_p50_ms", "lag_p99_ms", "lag_max_ms", "late_statements")}
        print(f"--speed 1, 8 sessions, 1,600 statements/s scheduled: lag p50 {r['lag_p50_ms']:.2f} ms, "
              f"p99 {r['lag_p99_ms']:.2f} ms, max {r['lag_max_ms']:.1f} ms; {r['late_statements']:,} of "
              f"{m['statements']:,} over {r['late_threshold_ms']:g} ms; elapsed {r['elapsed_s']:.2f} s against "
              f"{r['production_span_s']:.2f} s scheduled")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
