"""How fast `dbtier workload import` reads a production log: the goal is a million lines in under a minute.

A lab server plays production: it logs as docs/production.md asks (logsettings.CAPTURE: every
statement, its duration, connections) to stderr, csvlog and jsonlog at once, and `pgbench -S` (the
simple protocol: each statement a text of its own, parsed and classed anew) runs on it until its stderr
log holds about --lines lines (a statement and its duration are two). Each format's files are then
imported (dbtier.production.importlog.read_logs, all but the writing of Parquet, then timed again with
it) and the bench prints, per format: lines, records, statements, seconds, lines per second.
Run: python bench/import_speed.py [--lines 1000000] [--keep DIR] [--json PATH]   (about 5 minutes)"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dbtier.devices.spec import parse_all
from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import Lab, LabOptions
from dbtier.production import capture
from dbtier.production.importlog import read_logs
from dbtier.production.logsettings import CAPTURE, as_sets

SUFFIX = {"stderr": ".log", "csvlog": ".csv", "jsonlog": ".json"}
GOAL_S = 60.0


def _lines(files: list[Path]) -> int:
    n = 0
    for f in files:
        with open(f, "rb") as fh:
            n += sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b""))
    return n


def make_log(workspace: Path, target_lines: int, keep: Path) -> None:
    """Runs pgbench -S on a logging lab until its stderr log has target_lines lines; copies the logs to keep."""
    sets = as_sets(CAPTURE)
    sets.update({"logging_collector": "on", "log_destination": "'stderr,csvlog,jsonlog'", "log_rotation_size": "0",
                 "log_rotation_age": "0"})
    with Lab(parse_all(["prod=ram-san"]), placement.parse([], ["prod"]), LabOptions(workspace=workspace, sets=sets),
             say=lambda _line: None) as lab:
        env = dict(os.environ, PGHOST=str(lab.cluster.socket_dir), PGPORT="5432", PGUSER="dbtier", PGDATABASE="dbtier")
        pgbench = str(lab.install.exe("pgbench"))
        subprocess.run([pgbench, "-i", "-s", "1", "-q"], env=env, check=True, capture_output=True)
        logdir = lab.cluster.pgdata / "log"
        while True:
            have = _lines(sorted(logdir.glob("*.log")))
            if have >= target_lines:
                break
            per_client = max(1000, (target_lines - have) // 4 + 1000)   # two lines a statement, two clients
            print(f"  log has {have:,} lines; pgbench -S -c 2 -t {per_client:,}", flush=True)
            subprocess.run([pgbench, "-S", "-c", "2", "-t", str(per_client)], env=env, check=True, capture_output=True)
        time.sleep(1.0)  # the logger's last writes
        keep.mkdir(parents=True, exist_ok=True)
        for f in logdir.iterdir():
            shutil.copy(f, keep / f.name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000, help="the stderr log's size to reach")
    ap.add_argument("--keep", type=Path, help="keep the logs here (and reuse them if they are there)")
    ap.add_argument("--json", type=Path, help="write the figures as JSON")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dbtier-import-speed-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    tmp.chmod(0o755)
    logs = args.keep or tmp / "logs"
    try:
        if not (logs.exists() and any(logs.glob("*.log"))):
            print(f"making a log of about {args.lines:,} lines (pgbench -S on a logging lab server)", flush=True)
            started = time.monotonic()
            (tmp / "ws").mkdir(mode=0o755)
            make_log(tmp / "ws", args.lines, logs)
            print(f"  made in {time.monotonic() - started:.0f} s", flush=True)
        rows = []
        for fmt, suffix in SUFFIX.items():
            files = sorted(logs.glob("*" + suffix))
            lines = _lines(files)
            started = time.monotonic()
            imported = read_logs(files, fmt=fmt)
            read_s = time.monotonic() - started
            started = time.monotonic()
            capture.write(tmp / f"work-{fmt}", imported.capture)
            write_s = time.monotonic() - started
            c = imported.capture.counts
            rows.append({"format": fmt, "lines": lines, "bytes": sum(f.stat().st_size for f in files),
                         "statements": c["statements"], "sessions": c["sessions"], "read_s": read_s,
                         "write_s": write_s, "lines_per_s": lines / (read_s + write_s)})
        print(f"{'format':8} {'lines':>10} {'MB':>7} {'statements':>10} {'read s':>7} {'write s':>7} {'lines/s':>9}  goal")
        for r in rows:
            total = r["read_s"] + r["write_s"]
            per_million = total / r["lines"] * 1e6
            print(f"{r['format']:8} {r['lines']:>10,} {r['bytes'] / 1e6:>7.1f} {r['statements']:>10,} "
                  f"{r['read_s']:>7.1f} {r['write_s']:>7.1f} {r['lines_per_s']:>9,.0f}  "
                  f"{per_million:.1f} s per million lines ({'met' if per_million < GOAL_S else 'MISSED'})")
        if args.json:
            args.json.write_text(json.dumps({"goal_s_per_million_lines": GOAL_S, "formats": rows}, indent=2) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
