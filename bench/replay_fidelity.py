"""How faithfully `dbtier run replay` plays back a production workload, and how well `predict` foresees
it elsewhere (issue 30's goals).

Production is a real server whose files sit on emulated devices (everything on a 7,200 rpm disk), so
the replay has a ground truth on the same devices: pgbench's TPC-B-like script on 4 clients plus
three sessions of reporting SQL (an aggregate over the accounts, a branch's history, a teller
summary, each followed by a few seconds of think time), for --minutes, logged as the import wants it.
The dump is taken as the capture begins (the log is rotated then, and only the hour's files are
imported). Then:

1. the log imported (`workload import`): its statement classes and counts;
2. replayed at 1x on the same devices from that dump (`run replay --trace`): statement class counts
   against production (goal: within 1%), elapsed against production's (goal: within 5%), max lag
   against the schedule (goal: under 1 s), and the statement that went latest with what made it late;
   the same at 1x on a RAM SAN, a server that keeps up: the lag left is the replayer's own;
3. replayed with `--speed max` on a RAM SAN: statements per second (goal: at least 5,000 per process);
4. a `--speed max` replay on the production devices, traced, predicted on two other layouts
   (everything on a SATA SSD; the WAL alone on it), each run live as fast: prediction error (goal: at
   most 10% each), for the replay of the recording and for the median of 21 replays with the calls'
   arrivals moved by the host's own delays (`predict --spread 20`), and whether the live run falls in
   their range; and the recorded layout predicted as a check. At 1x a replay's elapsed time is its
   schedule's on any layout; as fast as it can go, it is the work's.

Production's pgbench runs closed loop (each client's next transaction as soon as its last one ended):
its disk is then as busy as it can be, and a replay on the same disk, slower anywhere, can never
catch up with the schedule. `--rate TPS` paces it instead (pgbench -R: transactions arriving at that
rate, as users do), which leaves the disk time to spare.

Prints each figure beside its goal. Run: python bench/replay_fidelity.py [--minutes 10] [--rate TPS]
[--json PATH] [--keep] (about six times --minutes, plus the loads)."""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psycopg

import dbtier
from dbtier.devices.spec import parse_all
from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import Lab, LabOptions
from dbtier.experiments import loaded
from dbtier.production import capture
from dbtier.production.importlog import import_logs
from dbtier.production.logsettings import CAPTURE, STATISTICS, as_sets
from dbtier.report import replayview

PRODUCTION_DEVICE = "hdd=hdd-sata-7200"
SCALE = 10                 # pgbench's scale: 1,000,000 accounts, about 150 MB with its indexes
CLIENTS = 4
REPORTERS = 3
THINK_S = 3.0
REPORTS = (
    "SELECT bid, sum(abalance), count(*) FROM pgbench_accounts WHERE aid BETWEEN %(lo)s AND %(lo)s + 50000 GROUP BY bid",
    "SELECT tid, count(*), sum(delta) FROM pgbench_history WHERE bid = %(bid)s GROUP BY tid ORDER BY 2 DESC",
    "SELECT t.tid, t.tbalance, b.bbalance FROM pgbench_tellers t JOIN pgbench_branches b USING (bid) ORDER BY t.tbalance DESC LIMIT 5",
)
#: name: (live run's devices and placement, the prediction's); "everything on the SSD" is predicted as the
#: recorded device given the SSD's profile (a device added by name would get nothing placed on it)
LAYOUTS = {"all on the SSD": ((["ssd=ssd-sata-mlc"], []), (["hdd=ssd-sata-mlc"], [])),
           "WAL on the SSD": (([PRODUCTION_DEVICE, "ssd=ssd-sata-mlc"], ["data=hdd,wal=ssd"]),
                              (["ssd=ssd-sata-mlc"], ["data=hdd,wal=ssd"]))}


def _reporter(dsn: str, seed: int, deadline: float, counts: list[int], scale: int) -> None:
    rng = random.Random(seed)
    with psycopg.connect(dsn, autocommit=True, application_name=f"report-{seed}") as conn:
        while time.monotonic() < deadline:
            conn.execute(rng.choice(REPORTS), {"lo": rng.randint(1, scale * 100000 - 50000), "bid": rng.randint(1, scale)})
            counts[0] += 1
            time.sleep(min(THINK_S * rng.uniform(0.5, 1.5), max(0.0, deadline - time.monotonic())))


def production(work: Path, minutes: float, rate: float | None = None, scale: int = SCALE,
               device: str = PRODUCTION_DEVICE) -> dict:
    """The production run: its dump, its log files of the hour, and its own figures."""
    sets = as_sets(CAPTURE, STATISTICS)
    sets.update({"logging_collector": "on", "log_destination": "'csvlog'", "log_rotation_size": "0",
                 "max_connections": "40"})
    with Lab(parse_all([device]), placement.parse([], [device.split("=")[0]]),
             LabOptions(sets=sets), say=print) as lab:
        dsn = f"host={lab.cluster.socket_dir} port=5432 user=dbtier dbname=dbtier"
        pgbench = str(lab.install.exe("pgbench"))
        print(f"loading pgbench at scale {scale} (emulation paused)")
        subprocess.run([pgbench, "-i", "-q", "-s", str(scale), dsn], check=True, capture_output=True)
        subprocess.run([str(lab.install.exe("pg_dump")), "-Fc", "-f", str(work / "production.dump"), dsn], check=True)
        lab.restart_cold()  # (a new log file, named to the second)
        time.sleep(1.1)  # so the rotation's file is another: the capture's alone
        before = set((lab.cluster.pgdata / "log").glob("*.csv"))
        with lab.connect() as conn:
            conn.execute("SELECT pg_rotate_logfile()")
        time.sleep(0.5)
        paced = ["-R", f"{rate:g}"] if rate else []
        print(f"production: pgbench ({CLIENTS} clients{f', {rate:g} tps' if rate else ', closed loop'}) and "
              f"{REPORTERS} reporting sessions for {minutes:g} min")
        counts = [0]
        with lab.measure(label="production") as m:
            deadline = time.monotonic() + minutes * 60
            threads = [threading.Thread(target=_reporter, args=(dsn, k, deadline, counts, scale)) for k in range(REPORTERS)]
            for t in threads:
                t.start()
            subprocess.run([pgbench, "-n", "-c", str(CLIENTS), "-j", "2", "-T", str(int(minutes * 60)), "-M",
                            "prepared", *paced, dsn], check=True, capture_output=True)
            for t in threads:
                t.join()
        logs = sorted(set((lab.cluster.pgdata / "log").glob("*.csv")) - before)
        for log in logs:
            shutil.copy(log, work / log.name)
        util = m.result["devices"][0]["iostat"]["%util"]
        print(f"production took {m.result['elapsed_s']:.1f} s, its disk {util:.1f}% busy")
        return {"logs": [work / log.name for log in logs], "elapsed_s": m.result["elapsed_s"], "reports": counts[0],
                "device_util_pct": util}


def replay(work: Path, name: str, devices: list[str], place: list[str], **options) -> Path:
    result = dbtier.run("replay", workload_dir=str(work / "captured"), restore=str(work / "production.dump"),
                        device=devices, place=place, output=str(work / name),
                        set=["max_connections=40"], **options)
    return result.path


SPREAD = 20  # more replays of each prediction, calls' arrivals moved by the host's own delays


def _predicted_s(recorded: Path, devices: list[str], place: list[str]) -> tuple[float, dict]:
    """The prediction's elapsed time, and its range over the moved replays (min, median, max)."""
    prediction = dbtier.predict(str(recorded), device=devices, place=place, spread=SPREAD)
    for note in prediction.doc["notes"]:
        print(f"  note: {note}")
    phases = prediction.doc["phases"]
    spread = {k: sum(ph["spread"]["elapsed_s"][k] for ph in phases) for k in ("min", "median", "max")}
    return sum(ph["predicted"]["elapsed_s"] for ph in phases), spread


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="production's length (default 10)")
    parser.add_argument("--rate", type=float, help="pace production's pgbench at this many transactions per second "
                        "(pgbench -R; default: closed loop, its disk as busy as it can be)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work folder (logs, dump, runs) and the loaded cluster, and say where")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="replay-fidelity-", dir="/var/tmp"))
    figures: dict = {}
    kept_before = {e["key"] for e in loaded.kept_list()}  # the replays share one load; it goes at the end
    try:
        prod = production(work, args.minutes, args.rate)
        figures["production"] = {"minutes": args.minutes, "rate_tps": args.rate, "elapsed_s": prod["elapsed_s"],
                                 "device_util_pct": prod["device_util_pct"]}
        t0 = time.monotonic()
        imported = import_logs(prod["logs"], work / "captured")
        cap = capture.read(work / "captured")
        figures["import"] = {"statements": cap.statements.num_rows, "sessions": cap.sessions.num_rows,
                             "seconds": time.monotonic() - t0}
        print(f"imported {cap.statements.num_rows:,} statements of {cap.sessions.num_rows} sessions in "
              f"{figures['import']['seconds']:.1f} s; notes: {'; '.join(imported.notes) or 'none'}")

        run_dir = replay(work, "at-1x", [PRODUCTION_DEVICE], [])
        doc = json.loads((run_dir / "result.json").read_text())
        metrics = doc["metrics"]
        produced = {row["class_id"]: row["calls"] for row in cap.classes.to_pylist()}
        replayed = {c["class_id"]: c["count"] for c in metrics["classes"]}
        worst = max(abs(replayed.get(k, 0) - n) / n for k, n in produced.items())
        r = metrics["replay"]
        elapsed_error = doc["elapsed_s"] / prod["elapsed_s"] - 1
        figures["replay"] = {"class_count_error_max": worst, "elapsed_s": doc["elapsed_s"],
                             "production_elapsed_s": prod["elapsed_s"], "elapsed_error": elapsed_error,
                             "production_device_util_pct": prod["device_util_pct"],
                             "lag_max_ms": r["lag_max_ms"], "lag_p99_ms": r["lag_p99_ms"], "lag_p50_ms": r["lag_p50_ms"],
                             "held_p50_ms": r.get("held_p50_ms"), "held_p99_ms": r.get("held_p99_ms"),
                             "held_max_ms": r.get("held_max_ms"),
                             "device_util_pct": doc["devices"][0]["iostat"]["%util"]}
        print(f"statement classes: {len(produced)}, largest count difference {worst:.2%} (goal within 1%)")
        print(f"elapsed: replay {doc['elapsed_s']:.1f} s against production {prod['elapsed_s']:.1f} s: "
              f"{elapsed_error:+.1%} (goal within 5%)")
        print(f"lag against the schedule: p50 {r['lag_p50_ms']:.0f} ms, p99 {r['lag_p99_ms']:.0f} ms, max "
              f"{r['lag_max_ms']:.0f} ms (goal under 1 s); of it held by the replayer itself: p50 "
              f"{r['held_p50_ms']:.2f} ms, p99 {r['held_p99_ms']:.2f} ms, max {r['held_max_ms']:.0f} ms; the disk "
              f"{doc['devices'][0]['iostat']['%util']:.1f}% busy")
        for line in replayview.detail_lines(doc):  # the latest statement, and what made it late
            print(line)
        figures["replay"]["latest"] = r.get("latest")
        # The same schedule on a server that keeps up (a RAM SAN): what lag is left is the replayer's
        # and the server's CPU, not a disk taking longer than production's did.
        quick = json.loads((replay(work, "at-1x-ram", ["ram=ram-san"], []) / "result.json").read_text())
        q = quick["metrics"]["replay"]
        figures["replay_on_ram"] = {"elapsed_s": quick["elapsed_s"], "lag_p50_ms": q["lag_p50_ms"],
                                    "lag_p99_ms": q["lag_p99_ms"], "lag_max_ms": q["lag_max_ms"],
                                    "held_max_ms": q.get("held_max_ms"), "latest": q.get("latest")}
        print(f"at 1x on a RAM SAN: {quick['elapsed_s']:.1f} s; lag p50 {q['lag_p50_ms']:.1f} ms, p99 "
              f"{q['lag_p99_ms']:.1f} ms, max {q['lag_max_ms']:.0f} ms (goal under 1 s); held max "
              f"{q['held_max_ms']:.0f} ms")

        fast = json.loads((replay(work, "max", ["ram=ram-san"], [], speed="max") / "result.json").read_text())
        rate = fast["metrics"]["statements_per_s"]
        figures["speed_max_statements_per_s"] = rate
        print(f"--speed max on a RAM SAN: {rate:,.0f} statements/s (goal at least 5,000)")

        # A paced replay's elapsed time is its schedule's wherever it runs; as fast as it can go (closed
        # loop, think time dropped) the elapsed time is the work's, which a layout changes.
        recorded = replay(work, "max-recorded", [PRODUCTION_DEVICE], [], speed="max", trace=True)
        recorded_s = json.loads((recorded / "result.json").read_text())["elapsed_s"]
        print(f"as fast as it goes on {PRODUCTION_DEVICE.split('=')[1]}, traced: {recorded_s:.1f} s")
        itself, spread = _predicted_s(recorded, [], [])
        print(f"its own layout predicted: {itself:.1f} s: {itself / recorded_s - 1:+.1%}; over {SPREAD + 1} moved "
              f"replays {spread['min']:.1f} to {spread['max']:.1f} s, median {spread['median']:.1f} s: "
              f"{spread['median'] / recorded_s - 1:+.1%}")
        figures["predictions"] = {"recorded_s": recorded_s, "own_layout_predicted_s": itself,
                                  "own_layout_spread_s": spread}
        for name, ((devices, place), (predict_devices, predict_place)) in LAYOUTS.items():
            predicted, spread = _predicted_s(recorded, predict_devices, predict_place)
            live = json.loads((replay(work, f"live-{len(figures['predictions'])}", devices, place, speed="max")
                               / "result.json").read_text())["elapsed_s"]
            inside = spread["min"] <= live <= spread["max"]
            figures["predictions"][name] = {"predicted_s": predicted, "live_s": live, "error": predicted / live - 1,
                                            "spread_s": spread, "median_error": spread["median"] / live - 1,
                                            "live_within_spread": inside}
            print(f"{name}: predicted {predicted:.1f} s, live {live:.1f} s: {predicted / live - 1:+.1%}; median of "
                  f"{SPREAD + 1} moved replays {spread['median']:.1f} s: {spread['median'] / live - 1:+.1%} (goal "
                  f"within 10%); range {spread['min']:.1f} to {spread['max']:.1f} s, live "
                  f"{'inside' if inside else 'OUTSIDE'}")
    finally:
        if args.keep:
            print(f"kept: {work} (dbtier labs lists the loaded cluster)")
        else:
            loaded.remove([e["key"] for e in loaded.kept_list() if e["key"] not in kept_before])
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
