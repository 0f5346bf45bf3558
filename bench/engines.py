"""The same OLTP on both engines, on the same emulated devices, each on three layouts: everything on a
7,200 rpm disk, the log alone on a SATA SSD (PostgreSQL's WAL, InnoDB's redo log), and everything on
the SSD; the same rows, clients, seconds and database cache on both.

- TPC-C (seed 002's order entry, `dbtier run oltp`): the same nine tables at the same warehouses, the
  same five transactions (PostgreSQL's functions, InnoDB's stored procedures) driven by the same
  terminals (dbtier's threads, one connection each): tpm, NOPM and New-Order's latency percentiles.
- sysbench's own `oltp_read_write` (a client nobody here wrote, with a driver for each engine): its
  transactions per second and latency.

    python bench/engines.py [--workload tpcc|sysbench|both] [--warehouses 1] [--clients 4] [--time 20]
                            [--cache 64MB] [--json PATH]

Each row adds the log device's flushes per transaction and the share of the run the server's processes
spent waiting for I/O."""

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
                        prepare_command=" ".join([*common, f"--threads={args.clients}", "prepare"]),
                        connections=args.clients,
                        command=[*common, f"--threads={args.clients}", f"--time={args.time}", "--percentile=99",
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


def one_tpcc(engine: str, layout: str, args, out: Path) -> dict:
    devices, log_on = LAYOUTS[layout]
    path = out / f"{engine}-{len(list(out.glob('*.json')))}.json"
    dbtier.run("oltp", engine=engine, device=devices, place=f"{LOG_ROLE[engine]}={log_on}" if log_on else None,
               cache=args.cache, warehouses=args.warehouses, clients=args.clients, duration=args.time,
               warmup=args.warmup, driver="python", output=str(out), json=str(path), quiet=True)
    doc = json.loads(path.read_text())
    m = doc["metrics"]
    log_object = "WAL" if engine == "postgres" else "redo log"
    flushes = sum(r["flushes"] for r in doc["object_io"] if r["object"] == log_object)
    new_order = m["latency"]["new_order"]
    return {"engine": engine, "layout": layout, "tpm": m["tpm"], "nopm": m["nopm"], "committed": m["committed"],
            **{f"new_order_{q}_ms": new_order.get(f"{q}_ms", float("nan")) for q in ("p50", "p90", "p99")},
            "log_flushes_per_tx": flushes / m["committed"] if m["committed"] else float("nan"),
            "io_wait_share": doc["io_wait_s"] / (doc["io_wait_s"] + doc["server_cpu_s"])
            if doc["io_wait_s"] + doc["server_cpu_s"] else 0.0, "elapsed_s": doc["elapsed_s"]}


def each_layout(one_run, args, out: Path, line) -> list[dict]:
    """Both engines on each layout, a printed line per run as it ends."""
    rows = []
    for layout in LAYOUTS:
        for engine in ("postgres", "mariadb"):
            r = one_run(engine, layout, args, out)
            rows.append(r)
            print(f"{engine:<9} {layout:<16} {line(r)} {r['log_flushes_per_tx']:>15.2f} "
                  f"{100 * r['io_wait_share']:>14.0f}%", flush=True)
    return rows


def tpcc(args, out: Path) -> list[dict]:
    print(f"TPC-C, {args.warehouses} warehouse(s), {args.clients} terminals (dbtier's threads), {args.warmup} s "
          f"warm-up then {args.time} s, database cache {args.cache}")
    print(f"{'engine':<9} {'layout':<16} {'tpm':>8} {'NOPM':>8} {'New-Order p50/p90/p99 ms':>25} "
          f"{'log flushes/tx':>15} {'I/O wait share':>15}")
    def line(r: dict) -> str:
        pct = f"{r['new_order_p50_ms']:.1f}/{r['new_order_p90_ms']:.1f}/{r['new_order_p99_ms']:.1f}"
        return f"{r['tpm']:>8.0f} {r['nopm']:>8.0f} {pct:>25}"
    return each_layout(one_tpcc, args, out, line)


def sysbench(args, out: Path) -> list[dict]:
    print(f"sysbench oltp_read_write, {args.tables} tables of {args.rows:,} rows, {args.clients} threads, "
          f"{args.time} s, database cache {args.cache}")
    print(f"{'engine':<9} {'layout':<16} {'tps':>8} {'mean ms':>8} {'p99 ms':>7} "
          f"{'log flushes/tx':>15} {'I/O wait share':>15}")
    return each_layout(one, args, out, lambda r: f"{r['tps']:>8.1f} {r['mean_ms']:>8.2f} {r['p99_ms']:>7.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", choices=("tpcc", "sysbench", "both"), default="both")
    ap.add_argument("--warehouses", type=int, default=1, help="TPC-C's scale (about 100 MB each)")
    ap.add_argument("--warmup", type=int, default=5, help="TPC-C's warm-up seconds, on the devices, unmeasured")
    ap.add_argument("--tables", type=int, default=4, help="sysbench's tables")
    ap.add_argument("--rows", type=int, default=20000, help="sysbench's rows per table")
    ap.add_argument("--clients", type=int, default=4, help="terminals (TPC-C) or threads (sysbench)")
    ap.add_argument("--time", type=int, default=20, help="measured seconds")
    ap.add_argument("--cache", default="64MB", help="the database's cache (shared_buffers, the buffer pool)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.workload in ("tpcc", "both"):
            out["tpcc"] = tpcc(args, Path(tmp))
        if args.workload in ("sysbench", "both"):
            out["sysbench"] = sysbench(args, Path(tmp))
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, **out}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
