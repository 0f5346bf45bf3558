"""The TPC-C terminals as pgbench clients: pgbench (C, from the same PostgreSQL install) runs five
scripts weighted 45/43/4/4/4, each drawing the specification's inputs with pgbench's own random
functions and calling the transaction's server-side function; its per-transaction log gives the
latency of every transaction by type. Its client cost is a small fraction of the Python terminals'
(bench/oltp_driver.py measures both).

NURand(A, x, y) is drawn as ((random(0, A) | random(x, y)) + C) % (y - x + 1) + x; below the
specification's scale the result wraps around the smaller ranges, as tpcc_driver.py does."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import numpy as np

from dbtier.workloads import pgbench_log
from dbtier.workloads.base import WorkloadError
from dbtier.workloads.tpcc_driver import C_RUN, MIX, TYPES

ITEM = "((((random(0, 8191) | random(1, 100000)) + {c}) % 100000) % {items} + 1)"


def scripts(warehouses: int, items: int, customers: int) -> dict[str, str]:
    w = warehouses
    home = f"\\set w 1 + :client_id % {w}\n"
    cust = f"\\set c ((((random(0, 1023) | random(1, 3000)) + {C_RUN['id']}) % 3000) % {customers} + 1)\n"
    name = (f"\\set ln ((((random(0, 255) | random(0, 999)) + {C_RUN['last']}) % 1000) % {min(1000, customers)})\n"
            "\\set byname case when random(1, 100) <= 60 then 1 else 0 end\n")
    remote = "random(1, 100) = 1" if w > 1 else "0"
    lines = "".join(f"\\set i{k} {ITEM.format(c=C_RUN['item'], items=items)}\n"
                    f"\\set s{k} case when {remote} then random(1, {w}) else :w end\n"
                    f"\\set q{k} random(1, 10)\n" for k in range(1, 16))
    arr = lambda p: "ARRAY[" + ", ".join(f":{p}{k}" for k in range(1, 16)) + "]::int[]"  # noqa: E731
    return {
        "new_order": home + "\\set d random(1, 10)\n" + cust + "\\set n random(5, 15)\n" +
                     f"\\set bad case when random(1, 100) = 1 then {items + 1} else 0 end\n" + lines +
                     f"SELECT tpcc_new_order_drawn(:w, :d, :c, :n, :bad, {arr('i')}, {arr('s')}, {arr('q')});\n",
        "payment": home + "\\set d random(1, 10)\n" + cust + name +
                   f"\\set remote case when {'random(1, 100) > 85' if w > 1 else '0'} then 1 else 0 end\n"
                   f"\\set cw case when :remote = 1 then random(1, {w}) else :w end\n"
                   "\\set cd case when :remote = 1 then random(1, 10) else :d end\n"
                   "\\set cents random(100, 500000)\n"
                   "SELECT tpcc_payment(:w::int, :d::int, :cw::int, :cd::int, "
                   "CASE WHEN :byname::int = 1 THEN NULL ELSE :c::int END, "
                   "CASE WHEN :byname::int = 1 THEN tpcc_last(:ln::int) END, :cents::numeric / 100);\n",
        "order_status": home + "\\set d random(1, 10)\n" + cust + name +
                        "SELECT tpcc_order_status(:w::int, :d::int, CASE WHEN :byname::int = 1 THEN NULL ELSE :c::int END, "
                        "CASE WHEN :byname::int = 1 THEN tpcc_last(:ln::int) END);\n",
        "delivery": home + "\\set carrier random(1, 10)\nSELECT tpcc_delivery(:w::int, :carrier::int);\n",
        "stock_level": home + f"\\set d 1 + (:client_id / {w}) % 10\n\\set threshold random(10, 20)\n"
                       "SELECT tpcc_stock_level(:w::int, :d::int, :threshold::int);\n",
    }


def _new_orders(lab) -> int:
    with lab.connect() as conn:
        return int(conn.execute("SELECT sum(d_next_o_id) FROM district").fetchone()[0])


def read_logs(prefix: Path, lab=None) -> tuple[dict[str, list[float]], list[int]]:
    """Latencies (ms) by transaction type and every transaction's end (epoch us), from pgbench's
    per-transaction log (each transaction also handed to the lab, if given)."""
    logs = pgbench_log.read(prefix)
    if lab is not None:
        pgbench_log.note_transactions(lab, logs, list(TYPES))
    latencies = {t: logs[i].latency_ms if i in logs else [] for i, t in enumerate(TYPES)}
    return latencies, [end for log in logs.values() for end in log.ends_us]


def drive(lab, clients: int, seconds: int, warehouses: int, items: int, customers: int, seed: int,
          progress=None, transform=None) -> dict:
    """Runs pgbench for `seconds`; returns the same summary as the Python terminals. transform(kind,
    script): the script run instead of each (a crash test's ledger row)."""
    folder = lab.scratch_dir("pgbench")
    files = []
    for (kind, weight), text in zip(MIX, scripts(warehouses, items, customers).values()):
        path = folder / f"{kind}.sql"
        path.write_text(transform(kind, text) if transform else text)
        files += ["-f", f"{path}@{weight}"]
    prefix = folder / f"log{time.monotonic_ns()}"
    client = lab.client("pgbench", "-n", "-M", "prepared", "-c", str(clients), "-j", str(min(clients, 2)),
                        "-T", str(seconds), "--max-tries=10", f"--random-seed={seed}", "-l", f"--log-prefix={prefix}",
                        *files, lab.database)
    before = _new_orders(lab)
    proc = client.popen(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while proc.poll() is None:
            time.sleep(1)
            if progress:
                progress.advance(1)
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
    if proc.returncode != 0:
        raise WorkloadError(f"pgbench failed ({proc.returncode}): {' / '.join(err.strip().splitlines()[-3:])}")
    committed_new = _new_orders(lab) - before
    latencies, ends_us = read_logs(prefix, lab)
    retried = sum(int(line.split()[-1]) for line in out.splitlines() if line.startswith("number of retried"))
    return summarize(latencies, committed_new, retried, seconds, ends_us)


def summarize(latencies: dict[str, list[float]], committed_new: int, retried: int, seconds: float,
              ends_us: list[int] = ()) -> dict:
    """The Python terminals' summary, from pgbench's log: a New-Order that rolled back is in the log
    (pgbench ran it) but not in the district's order counter."""
    rolled_back = max(0, len(latencies["new_order"]) - committed_new)
    per_type = {}
    for t in TYPES:
        lat = np.asarray(latencies[t])
        per_type[t] = {"count": int(lat.size), "mean_ms": float(lat.mean()) if lat.size else 0.0,
                       **({f"p{q}_ms": float(np.percentile(lat, q)) for q in (50, 90, 95, 99)} if lat.size else {})}
    per_type["new_order"]["count"] = committed_new
    committed = sum(v["count"] for v in per_type.values())
    minutes = seconds / 60
    return {"driver": "pgbench", "committed": committed, "rolled_back": rolled_back, "retried": retried,
            "new_orders": committed_new, "nopm": committed_new / minutes, "tpm": committed / minutes,
            "mix_pct": {t: 100.0 * per_type[t]["count"] / committed if committed else 0.0 for t in TYPES},
            "latency": per_type, "transactions_per_s": pgbench_log.per_second(list(ends_us))}
