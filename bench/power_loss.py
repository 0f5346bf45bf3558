"""The power-loss matrix: `dbtier crash` over configurations whose answer is known from PostgreSQL's
documentation and LazyFS's findings, each over many cuts, and how many crash states an hour it checks.

Expected (issue: "Does this layout keep my commits?"):
- no lost acknowledged commit and no damage: the defaults on an honest device (flushes obeyed, or
  power-loss protection, or no volatile cache), for each wal_sync_method, in the direct, buffered and
  dsync I/O modes; full_page_writes = on with tears at 512 B and 4 KiB;
- a bounded loss, a suffix in commit order: synchronous_commit = off, within 3 x wal_writer_delay;
- damage found, the first within 100 cuts: fsync = off (lost commits); full_page_writes = off with
  512 B or 4 KiB atomic writes (torn pages); a device that ignores flushes (lost commits);
- an fsync failed with EIO: the defaults PANIC and keep everything; data_sync_retry = on loses data.

The cells are examples/power-loss.toml's (what `dbtier crash --matrix` runs), each with --cuts and
--time over the file's: pgbench -i -s 1, 2 clients, on one emulated device; cuts of every kind in turn
(flush, random, torn, reorder; torn only for the full_page_writes cells, with the small cache that
makes the tables' pages be written during the run); two cells fail an fsync with EIO after the run. Prints a row per cell: what it found
against what was expected, the first cut that found it, recovery time, and crash states per hour
(the whole command's wall time, run and cuts, over the cuts).

Also the logging's cost: pgbench's tps with the durability log on against off (the same run, the
log switched on or not), three of each, alternated.

MariaDB's: --matrix examples/power-loss-innodb.toml (TPC-C on InnoDB: its defaults, the redo log flushed
once a second, no doublewrite buffer, the I/O modes, a drive that ignores flushes).

Run: python bench/power_loss.py [--matrix FILE] [--cuts N] [--only NAME ...] [--json PATH]   (--cuts 1000: hours)"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import time

from dataclasses import replace
from pathlib import Path

from dbtier.crash import matrix
from dbtier.crash.run import run_crash
from dbtier.experiments.experiment import Experiment

SSD = "ssd=ssd-sata-mlc"  # a consumer SATA SSD: volatile cache, flushes obeyed
#: the cells and what each expects: the matrix a user runs with dbtier crash --matrix
MATRIX = Path(__file__).resolve().parent.parent / "examples" / "power-loss.toml"


def cell(c: matrix.Cell, cuts: int, seconds: int | None, recoveries: int | None) -> dict:
    exp = c.experiment
    if seconds is not None:  # pgbench's seconds are its time, TPC-C's its duration
        exp = replace(exp, params={**exp.params, "duration" if exp.workload == "oltp" else "time": seconds})
    t0 = time.monotonic()
    r = run_crash(exp, cuts, c.seed, c.kinds, say=lambda _line: None, fsync_error=c.fsync_error,
                  recoveries=recoveries)
    wall = time.monotonic() - t0
    s = r["summary"]
    rec = s["recovery_s"] or [float("nan")] * 2
    return {"cell": c.name, "expected": c.expect, "held": matrix.held(c.expect, r), "cuts": cuts,
            "lost": s["lost_commits"], "damaged": s["damaged"], "first_loss": s["first_loss"],
            "first_damage": s["first_damage"], "longest_loss_ms": s["longest_loss_ms"], "recovery_s": rec,
            "tps": r["run"]["tps"], "states_per_hour": 3600 * cuts / wall, "wall_s": wall,
            "recoveries": r["run"]["recoveries"]}


def logging_cost(seconds: int) -> dict:
    """pgbench's tps with and without the durability log (the same course, the log on or off), three of
    each, alternated."""
    on, off = [], []
    for i in range(6):
        exp = Experiment.from_options("pgbench", device=[SSD], init=True, scale=1, client=2, time=seconds)
        r = run_crash(exp, 1, seed=1, kinds=("random",), say=lambda _line: None, durability_log=bool(i % 2))
        (on if i % 2 else off).append(r["run"]["tps"])
    return {"tps_logged": on, "tps_unlogged": off,
            "ratio": statistics.median(on) / statistics.median(off)}


def _unwind(signum, _frame):
    """SIGTERM and SIGHUP unwind as Ctrl-C does (as dbtier's command line makes them): the lab's servers
    stopped, its base image, states and logs removed. Killed without it, a cell left 416 MB in /dev/shm."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # the cleanup the first one started finishes
    raise KeyboardInterrupt


def main() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _unwind)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuts", type=int, default=100, help="cuts per cell (the issue asks 1,000)")
    ap.add_argument("--time", type=int, help="the workload's seconds per cell (default: the matrix file's)")
    ap.add_argument("--matrix", type=Path, default=MATRIX,
                    help="the matrix file (default: examples/power-loss.toml; MariaDB's: power-loss-innodb.toml)")
    ap.add_argument("--only", nargs="*", help="cells whose name contains one of these")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--recoveries", type=int, help="states recovered at once (default: the machine's CPUs)")
    args = ap.parse_args()
    rows = []
    print("| configuration | expected | held | lost (cuts) | damaged (cuts) | first finding | longest loss (ms) "
          "| recovery (s) | tps | states per hour |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for c in matrix.load(args.matrix):
        if args.only and not any(o in c.name for o in args.only):
            continue
        row = cell(c, cuts=args.cuts, seconds=args.time, recoveries=args.recoveries)
        rows.append(row)
        first = row["first_loss"] if row["expected"] == "lost" else row["first_damage"] \
            if row["expected"] == "damage" else row["first_loss"] if row["lost"] else row["first_damage"]
        print(f"| {row['cell']} | {row['expected']} | {'yes' if row['held'] else 'NO'} | {row['lost']:,} of "
              f"{row['cuts']:,} | {row['damaged']:,} | {'-' if first is None else f'cut {first}'} | "
              f"{row['longest_loss_ms']:,.0f} | {row['recovery_s'][0]:.2f}-{row['recovery_s'][1]:.2f} | "
              f"{row['tps'] or 0:,.0f} | {row['states_per_hour']:,.0f} |", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    if not args.only and args.matrix == MATRIX:
        cost = logging_cost(args.time or 5)
        print(f"\nthe durability log's cost: tps {statistics.median(cost['tps_logged']):,.0f} logged against "
              f"{statistics.median(cost['tps_unlogged']):,.0f} unlogged (median of 3 each): "
              f"{100 * (cost['ratio'] - 1):+.1f}%")
        rows.append({"logging": cost})
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    sys.exit(0 if all(r.get("held", True) for r in rows) else 1)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # cleaned up on the way out (the lab's own finally blocks)
        print("power_loss: interrupted", file=sys.stderr)
        sys.exit(130)
