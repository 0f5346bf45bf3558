"""How well `dbtier predict` foresees a live run, and how fast it replays.

Each workload is recorded once, traced, with everything on a disk (a flash device present but
unused), then predicted on other layouts: everything on flash (another device kind), one object
moved to flash (a mixed placement), the WAL alone on flash, and the recorded layout itself. Each
predicted layout is then run live on the emulated devices and the two compared: elapsed (summed over
a workload's phases), or tpm for oltp. Direct and buffered I/O both appear.

Prints one row per case, the error statistics, and the replay's speed with the trace's size.
--save writes the cases of the other layouts into src/dbtier/prediction/measured_error.json: the
predictor's measured error, from which `dbtier advise --catalog` takes each answer's likely range
live and its risk of missing a target.

--engine mariadb: the same on MariaDB (InnoDB's redo log in the WAL's place), its own workloads.

Run: python bench/predict_accuracy.py [--engine mariadb] [--only WORKLOAD ...] [--json PATH] [--save]
(about 20 minutes; MariaDB's about 10)"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEVICES = ["-d", "hdd=hdd-sata-7200", "-d", "ssd=ssd-sata-mlc"]
RECORDED = "data=hdd"

#: name, workload, its parameters, the object moved in the mixed case
WORKLOADS = [
    ("random-index direct", "random-index", ["--rows", "3000", "--io-mode", "direct"], "t_attribute_idx"),
    ("random-index buffered", "random-index", ["--rows", "3000", "--io-mode", "buffered"], "t"),
    ("table-scan buffered", "table-scan", ["--rows", "6000", "--scans", "2", "--io-mode", "buffered"], "t"),
    ("index-range direct", "index-range", ["--rows", "60000", "--io-mode", "direct"], "pob_idx"),
    ("oltp direct", "oltp", ["--items", "5000", "--customers", "300", "--clients", "2", "--duration", "15",
                             "--warmup", "3", "--io-mode", "direct"], "stock"),
    ("insert-loop buffered", "insert-loop", ["--rows", "30000", "--io-mode", "buffered"], "a_perf_pkey"),
    ("update-locality direct", "update-locality", ["--rows", "30000", "--updates", "3000", "--cache", "4MB",
                                                   "--io-mode", "direct"], "a_perf"),
    ("merge-join buffered", "merge-join", ["--departments", "300", "--employees", "200", "--work-mem", "1MB",
                                           "--io-mode", "buffered"], "employee"),
    ("io-modes direct", "io-modes", ["--orders", "4000", "--io-mode", "direct"], "lineitem"),
]

#: --engine mariadb: the workloads that mean the same on InnoDB (a table moved: an index stays in its table's file)
MARIADB_WORKLOADS = [
    ("random-index direct", "random-index", ["--rows", "3000", "--io-mode", "direct"], "t"),
    ("table-scan buffered", "table-scan", ["--rows", "6000", "--scans", "2", "--io-mode", "buffered"], "t"),
    ("oltp direct", "oltp", ["--items", "5000", "--customers", "300", "--clients", "4", "--duration", "15",
                             "--warmup", "3", "--io-mode", "direct"], "stock"),
]


def targets(obj: str, log: str = "wal") -> list[tuple[str, str]]:
    name = "WAL" if log == "wal" else "redo log"
    return [("as recorded", RECORDED), ("all on flash", "data=ssd"), (f"{obj} on flash", f"data=hdd,{obj}=ssd"),
            (f"{name} on flash", f"data=hdd,{log}=ssd")]


def dbtier(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "dbtier", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"dbtier {' '.join(args)} failed:\n{proc.stderr}")


def figure(workload: str) -> str:
    """oltp: tpm (its elapsed is fixed by --duration); else the elapsed of all measured phases."""
    return "tpm" if workload == "oltp" else "elapsed s"


def live_headline(doc: dict, workload: str) -> float:
    return doc["rates"]["tpm"] if workload == "oltp" else doc["elapsed_s"]


def predicted_headline(doc: dict, workload: str) -> tuple[float, float]:
    """(predicted, recorded) from a prediction's JSON."""
    if workload == "oltp":
        (ph,) = doc["phases"]
        return ph["predicted"]["rates"]["tpm"], ph["recorded"]["rates"]["tpm"]
    return (sum(p["predicted"]["elapsed_s"] for p in doc["phases"]),
            sum(p["recorded"]["elapsed_s"] for p in doc["phases"]))


ERRORS = Path(__file__).resolve().parent.parent / "src" / "dbtier" / "prediction" / "measured_error.json"


def save_errors(rows: list[dict]) -> None:
    """This bench's cases (the other layouts) in place of those it wrote before; other benches' kept."""
    commit = subprocess.run(["git", "-C", str(ERRORS.parent), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    doc = json.loads(ERRORS.read_text())
    doc["sources"]["predict_accuracy"] = {"bench": "bench/predict_accuracy.py", "commit": commit,
                                          "date": time.strftime("%Y-%m-%d"), "host": f"{os.cpu_count()}-core host",
                                          "devices": ", ".join(d.split("=")[1] for d in DEVICES[1::2])}
    doc["cases"] = [c for c in doc["cases"] if c["source"] != "predict_accuracy"] + [
        {"source": "predict_accuracy", "workload": r["workload"], "layout": r["layout"],
         "figure": "tpm" if r["figure"] == "tpm" else "elapsed", "predicted": r["predicted"], "live": r["live"]}
        for r in rows if r["layout"] != "as recorded"]
    ERRORS.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {ERRORS}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", help="workload names (first column) to run")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--save", action="store_true", help="write the cases into the package's measured errors")
    ap.add_argument("--engine", choices=("postgres", "mariadb"), default="postgres")
    args = ap.parse_args()
    if args.save and args.engine != "postgres":
        ap.error("--save writes PostgreSQL's cases (advise --catalog's measured error is PostgreSQL's)")
    engine = ["--engine", args.engine]
    workloads = WORKLOADS if args.engine == "postgres" else MARIADB_WORKLOADS
    log = "wal" if args.engine == "postgres" else "log"
    work = Path(tempfile.mkdtemp(prefix="dbtier-predict-bench-"))
    rows, speeds, latencies = [], [], []
    try:
        for name, workload, params, obj in workloads:
            if args.only and name not in args.only and workload not in args.only:
                continue
            out = work / name.replace(" ", "-")
            out.mkdir()
            dbtier("run", workload, *engine, *params, *DEVICES, "--place", RECORDED, "--trace", "-q", "--output",
                   str(out / "rec"))
            run_dir = next((out / "rec").glob(f"{workload}-*"))
            trace_mb = (run_dir / "trace.parquet").stat().st_size / 1e6
            for label, place in targets(obj, log):
                pj = out / f"p-{len(rows)}.json"
                t = time.perf_counter()
                dbtier("predict", str(run_dir), "--place", place, "--json", str(pj))
                wall = time.perf_counter() - t
                doc = json.loads(pj.read_text())
                pred, rec = predicted_headline(doc, workload)
                if place == RECORDED:
                    live = rec
                else:
                    lj = out / f"l-{len(rows)}.json"
                    dbtier("run", workload, *engine, *params, *DEVICES, "--place", place, "-q", "--output",
                           str(out / "live"), "--json", str(lj))
                    live = live_headline(json.loads(lj.read_text()), workload)
                err = 100.0 * (pred - live) / live
                rows.append({"workload": name, "layout": label, "figure": figure(workload), "recorded": rec,
                             "predicted": pred, "live": live, "error%": err, "calls": doc["replay"]["calls"],
                             "replay_s": doc["replay"]["seconds"], "engine_s": doc["replay"]["engine_seconds"],
                             "predict_wall_s": wall, "trace_mb": trace_mb})
                speeds.append((doc["replay"]["calls"], doc["replay"]["engine_seconds"], doc["replay"]["seconds"]))
                if workload == "oltp" and place != RECORDED:
                    lat = doc["phases"][0].get("latency", {})
                    live_lat = json.loads(lj.read_text()).get("metrics", {}).get("latency", {})
                    for t in ("new_order", "payment"):
                        if t in lat and t in live_lat:
                            latencies.append((label, t, lat[t]["recorded"].get("p50_ms"), lat[t]["predicted"].get("p50_ms"),
                                              live_lat[t].get("p50_ms"), lat[t]["predicted"].get("p90_ms"),
                                              live_lat[t].get("p90_ms")))
                print(f"{name:24} {label:26} {rows[-1]['figure']:9} rec {rec:10.3f} pred {pred:10.3f} "
                      f"live {live:10.3f} err {err:+6.1f}%", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.save:
        save_errors(rows)
    moved = [abs(r["error%"]) for r in rows if r["layout"] != "as recorded"]
    same = [abs(r["error%"]) for r in rows if r["layout"] == "as recorded"]
    print()
    print("| workload | layout | figure | recorded | predicted | live | error |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['layout']} | {r['figure']} | {r['recorded']:.3f} | {r['predicted']:.3f} | "
              f"{r['live']:.3f} | {r['error%']:+.1f}% |")
    if moved:
        ordered = sorted(moved)
        p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
        print(f"\nother layouts: {len(moved)} cases, median |error| {statistics.median(moved):.1f}%, "
              f"p95 {p95:.1f}%, max {max(moved):.1f}%")
    if same:
        print(f"the recorded layout: {len(same)} cases, max |error| {max(same):.2f}%")
    if latencies:
        print("\n| oltp layout | transaction | p50 ms recorded | p50 predicted | p50 live | p90 predicted | p90 live |")
        print("|---|---|---|---|---|---|---|")
        for label, t, rec50, p50, l50, p90, l90 in latencies:
            print(f"| {label} | {t} | {rec50:.2f} | {p50:.2f} | {l50:.2f} | {p90:.2f} | {l90:.2f} |")
    calls = sum(c for c, _, _ in speeds)
    engine = sum(e for _, e, _ in speeds)
    whole = sum(w for _, _, w in speeds)
    if engine:
        biggest = max(rows, key=lambda r: r["calls"])
        print(f"replay engine: {calls:,} calls in {engine:.2f} s, {calls / engine / 1e6:.1f} M calls/s on one core; "
              f"whole predictions (streams built, figures computed) {calls / whole / 1e6:.2f} M calls/s; largest "
              f"trace {biggest['trace_mb']:.1f} MB of Parquet ({biggest['calls']:,} calls, {biggest['workload']})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
