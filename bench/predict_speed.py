"""How fast `dbtier predict` goes through a large recorded run: recorded calls per second, for a whole
prediction and for the replay engine alone, and what reading the recording and preparing it cost.

The recording (made here unless --run-dir gives one, and kept in --keep if asked): pgbench's
select-only script, prepared, 2 clients for --seconds, on an Optane profile with buffered I/O, a
1 MB database cache and a 1 GB page cache: each transaction's reads miss the database cache and most
find the page cache, so the trace holds about 2 calls per transaction, some 75,000 a second on 2
cores (the machine's load decides: the figures say how many it got). 70 s gave 5.2 million calls.

Measured, in one process (the machine is shared and noisy: each prediction --repeat times, the
median and the best given):
- reading the run directory (recording.load: Parquet, its checks);
- preparing its event streams once (prediction.replay.Predictor);
- a prediction with every figure (per device, per object, transaction latencies), on another
  device (-d fast=nvme-gen4): the Prediction's replay.calls_per_s, end to end (devices made, calls
  placed and replayed, figures computed), and replay.engine_calls_per_s (the replay in C alone);
- the same without figures, as advise asks hundreds of placements;
- advice on it end to end, as a user asks it (`dbtier advise RUN_DIR --catalog aws --max-cost 200`:
  the recording read, every part on every offer climbed, the best layouts predicted whole, the
  report written). Goal (issue 31): under 2 minutes on a recording of at least 5 million calls.

--baseline PYTHON measures the same recording again under another installation's interpreter (a
checkout of an earlier commit with its own venv), and prints both.

Run: python bench/predict_speed.py [--run-dir DIR | --seconds 80 [--keep DIR]] [--repeat 5]
                                   [--baseline PYTHON] [--json PATH]   (about 3 minutes)"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENARIO = ("fast=nvme-gen4",)  # the recorded device's profile swapped: every call replayed on another model


def record(out: Path, seconds: int) -> Path:
    """A pgbench run made to hold many calls (see the module's text); its run directory."""
    cmd = [sys.executable, "-m", "dbtier", "run", "pgbench", "-i", "-s", "10", "-b", "select-only", "-c", "2", "-j", "2",
           "-T", str(seconds), "-M", "prepared", "-d", "fast=optane-p5800x", "--io-mode", "buffered", "--cache", "1MB",
           "--page-cache", "1GB", "--trace", "-q", "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"recording failed:\n{proc.stderr}")
    return next(out.glob("pgbench-*"))


def measure(run_dir: Path, repeat: int) -> dict:
    """The figures of one installation (this interpreter's dbtier) on one recording."""
    from dbtier.prediction import recording, scenario
    from dbtier.prediction.replay import Predictor
    from dbtier.workspace import Workspace

    t = time.perf_counter()
    rec = recording.load(run_dir)
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    predictor = Predictor(rec, Workspace.open(None))
    prepare_s = time.perf_counter() - t
    question = scenario.build(rec, SCENARIO, (), None, 1.0, None)
    out = {"run_dir": str(run_dir), "load_s": load_s, "prepare_s": prepare_s}
    for figures in (True, False):
        runs = []
        for _ in range(repeat):
            t = time.perf_counter()
            r = predictor.predict(question, figures=figures).to_dict()["replay"]
            runs.append({"wall_s": time.perf_counter() - t, **r})
        out["figures" if figures else "no_figures"] = runs
    out["calls"] = out["figures"][0]["calls"]
    out["records"] = len(rec.records)
    return out


ADVICE = ("--catalog", "aws", "--max-cost", "200")


def advice(run_dir: Path) -> dict:
    """`dbtier advise` on the recording, timed end to end in its own process."""
    with tempfile.TemporaryDirectory(prefix="advice-speed-") as out:
        doc_path = Path(out) / "advice.json"
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "dbtier", "advise", str(run_dir), *ADVICE, "-q", "-o", out,
                               "--json", str(doc_path)], capture_output=True, text=True)
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            raise SystemExit(f"advise failed:\n{proc.stderr}")
        doc = json.loads(doc_path.read_text())
    return {"wall_s": wall, "predictions": doc["search"]["predictions"], "search_s": doc["search"]["seconds"],
            "finding": doc["finding"]}


def summary(m: dict) -> dict:
    def rates(runs, key):
        values = [r[key] for r in runs]
        return {"median": statistics.median(values), "best": max(values)}

    return {"calls": m["calls"], "load_s": m["load_s"], "prepare_s": m["prepare_s"],
            **{f"{kind}_{key}": rates(m[kind], key) for kind in ("figures", "no_figures")
               for key in ("calls_per_s", "engine_calls_per_s")}}


def show(label: str, s: dict) -> None:
    calls = s["calls"]
    print(f"{label}: {calls:,} calls; read the recording {s['load_s']:.1f} s ({calls / s['load_s'] / 1e6:.2f} M calls/s), "
          f"prepared its streams {s['prepare_s']:.1f} s ({calls / s['prepare_s'] / 1e6:.2f} M calls/s)")
    for kind, what in (("figures", "with every figure"), ("no_figures", "without figures")):
        e2e, eng = s[f"{kind}_calls_per_s"], s[f"{kind}_engine_calls_per_s"]
        print(f"  a prediction {what}: end to end {e2e['median'] / 1e6:.2f} M calls/s (best {e2e['best'] / 1e6:.2f}), "
              f"engine {eng['median'] / 1e6:.2f} M calls/s (best {eng['best'] / 1e6:.2f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, help="a recorded run (dbtier run ... --trace) to measure on")
    parser.add_argument("--seconds", type=int, default=80, help="how long the recording made here runs")
    parser.add_argument("--keep", type=Path, help="where to keep the recording made here (default: removed)")
    parser.add_argument("--repeat", type=int, default=5, help="predictions of each kind")
    parser.add_argument("--baseline", help="another installation's Python: measured on the same recording too")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--measure-only", type=Path, help=argparse.SUPPRESS)  # --baseline's child: raw figures here
    args = parser.parse_args()
    if args.measure_only:
        args.measure_only.write_text(json.dumps(measure(args.run_dir, args.repeat)))
        return 0
    work = None
    run_dir = args.run_dir
    if run_dir is None:
        work = Path(tempfile.mkdtemp(prefix="predict-speed-"))
        print(f"recording pgbench select-only for {args.seconds} s ...", flush=True)
        run_dir = record(args.keep or work, args.seconds)
    try:
        with open(run_dir / "trace.parquet", "rb") as f:  # into the OS's cache first: no installation pays the disk
            while f.read(64 << 20):
                pass
        figures = {"this": summary(measure(run_dir, args.repeat))}
        print("advising on it ...", flush=True)
        figures["advice"] = advice(run_dir)
        if args.baseline:
            raw = Path(tempfile.mkstemp(suffix=".json")[1])
            try:
                subprocess.run([args.baseline, __file__, "--run-dir", str(run_dir), "--repeat", str(args.repeat),
                                "--measure-only", str(raw)], check=True)
                figures["baseline"] = summary(json.loads(raw.read_text()))
            finally:
                raw.unlink(missing_ok=True)
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"recording: {run_dir if args.run_dir or args.keep else 'made here, removed'}; predicted with -d "
          f"{' -d '.join(SCENARIO)}")
    if "baseline" in figures:
        show(f"baseline ({args.baseline})", figures["baseline"])
    show("this dbtier", figures["this"])
    a = figures["advice"]
    print(f"  advice (dbtier advise RUN_DIR {' '.join(ADVICE)}): {a['wall_s']:.1f} s end to end, "
          f"{a['predictions']:,} predictions ({a['search_s']:.1f} s in the search), goal under 120 s")
    print(f"  its finding: {a['finding']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
