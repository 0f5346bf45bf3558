"""The same OLTP on both engines, on the same emulated devices: sysbench's own `oltp_read_write` (a client
nobody here wrote, with a driver for each engine) against PostgreSQL and MariaDB, each on three layouts:
everything on a 7,200 rpm disk, the log alone on a SATA SSD (PostgreSQL's WAL, InnoDB's redo log), and
everything on the SSD. The same tables and rows, the same clients and seconds, the same database cache.

    python bench/engines.py [--tables 4] [--rows 20000] [--threads 4] [--time 20] [--cache 64MB] [--json PATH]

Prints, per engine and layout: transactions per second, latency (mean and p99, as sysbench measured
them), the log device's flushes per transaction, and the share of the run the server's processes
spent waiting for I/O. (TPC-C on both engines, the issue's workload, needs a driver for InnoDB:
not built yet; sysbench's OLTP is the same transactions on both today.)"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

import dbtier

LAYOUTS = {  # name: (devices, the log's placement key per engine, or None: everything on the first device)
    "all on the disk": (["disk=hdd-sata-7200"], None),
    "log on the SSD": (["disk=hdd-sata-7200", "ssd=ssd-sata-mlc"], "ssd"),
    "all on the SSD": (["ssd=ssd-sata-mlc"], None),
}
LOG_ROLE = {"postgres": "wal", "mariadb": "log"}
CONNECTION = {
    "postgres": ["--db-driver=pgsql", "--pgsql-host=$PGHOST", "--pgsql-port=$PGPORT", "--pgsql-user=$PGUSER",
                 "--pgsql-db=$PGDATABASE"],
    "mariadb": ["--db-driver=mysql", "--mysql-socket=$MYSQL_UNIX_PORT", "--mysql-user=$MYSQL_USER",
                "--mysql-db=$MYSQL_DATABASE"],
}


def sysbench_figures(stdout: str) -> dict:
    """sysbench's own summary: transactions per second, latency mean, p95 and p99 (ms)."""
    def grab(pattern: str) -> float:
        m = re.search(pattern, stdout)
        return float(m.group(1)) if m else float("nan")
    return {"tps": grab(r"transactions:\s+\d+\s+\(([\d.]+) per sec"),
            "transactions": grab(r"transactions:\s+(\d+)"),
            "mean_ms": grab(r"avg:\s+([\d.]+)"), "p99_ms": grab(r"99th percentile:\s+([\d.]+)")}


def one(engine: str, layout: str, args, out: Path) -> dict:
    devices, log_on = LAYOUTS[layout]
    common = ["sysbench", "oltp_read_write", *CONNECTION[engine], f"--tables={args.tables}",
              f"--table-size={args.rows}"]
    path = out / f"{engine}-{len(list(out.glob('*.json')))}.json"
    dbtier.run("client", engine=engine, device=devices,
                        place=f"{LOG_ROLE[engine]}={log_on}" if log_on else None, cache=args.cache,
                        prepare_command=" ".join([*common, f"--threads={args.threads}", "prepare"]),
                        connections=args.threads,
                        command=[*common, f"--threads={args.threads}", f"--time={args.time}", "--percentile=99",
                                 "run"],
                        output=str(out), json=str(path), quiet=True)
    doc = json.loads(path.read_text())
    figures = sysbench_figures((Path(doc["run_dir"]) / "client.stdout").read_text())
    log_object = "WAL" if engine == "postgres" else "redo log"
    log_rows = [r for r in doc["object_io"] if r["object"] == log_object or r["kind"] in ("wal", "log")]
    flushes = sum(r["flushes"] for r in log_rows)
    return {"engine": engine, "layout": layout, **figures,
            "log_flushes_per_tx": flushes / figures["transactions"] if figures["transactions"] else float("nan"),
            "io_wait_share": doc["io_wait_s"] / (doc["io_wait_s"] + doc["server_cpu_s"])
            if doc["io_wait_s"] + doc["server_cpu_s"] else 0.0,
            "elapsed_s": doc["elapsed_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--time", type=int, default=20)
    ap.add_argument("--cache", default="64MB")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    print(f"sysbench oltp_read_write, {args.tables} tables of {args.rows:,} rows, {args.threads} threads, "
          f"{args.time} s, database cache {args.cache}")
    print(f"{'engine':<9} {'layout':<16} {'tps':>8} {'mean ms':>8} {'p99 ms':>7} "
          f"{'log flushes/tx':>15} {'I/O wait share':>15}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for layout in LAYOUTS:
            for engine in ("postgres", "mariadb"):
                r = one(engine, layout, args, Path(tmp))
                rows.append(r)
                print(f"{engine:<9} {layout:<16} {r['tps']:>8.1f} {r['mean_ms']:>8.2f} "
                      f"{r['p99_ms']:>7.2f} {r['log_flushes_per_tx']:>15.2f} {100 * r['io_wait_share']:>14.0f}%",
                      flush=True)
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "rows": rows}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
