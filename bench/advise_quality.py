"""How good `dbtier advise` is: its advice against the best placement found by running placements live.

Each workload is recorded once, traced, on a disk (hdd-sata-7200), then advised for a SATA SSD
(ssd-sata-mlc) under two budgets: a quarter and four fifths of the bytes its candidates take. The
placements are then run live on the emulated devices, the workload loaded once (`dbtier compare`):
every role-level placement (data, indexes, WAL and temp each on the disk or the SSD: 16 layouts, 8
when the run wrote no temp file and temp's place changes nothing) and, at each budget, the advice
and its two best alternatives (the top object-level placements). Under each budget the best found is
the live run that fits it with the best figure (elapsed, or tpm / tps); the advice's own live run is
compared with it.

Prints one row per workload and budget: the advice, its predicted and live speed-up over everything
on the disk, the best found and its live speed-up, how far the advice is from it, and the time the
advice took against the time of running the role-level layouts live.
Run: python bench/advise_quality.py [--only NAME ...] [--json PATH]   (about 15 minutes)"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SLOW, FAST = "hdd=hdd-sata-7200", "ssd=ssd-sata-mlc"
DEVICES = ["-d", SLOW, "-d", FAST]
BUDGETS = (0.25, 0.80)
#: the advice's alternatives run live beside it, at each budget
TOP_LIVE = 3

#: name, workload, its parameters
WORKLOADS = [
    ("oltp large cache", "oltp", ["--items", "5000", "--customers", "300", "--clients", "2", "--duration", "10",
                                  "--warmup", "2", "--cache", "64MB"]),
    ("oltp reduced cache", "oltp", ["--items", "5000", "--customers", "300", "--clients", "2", "--duration", "10",
                                    "--warmup", "2", "--cache", "2MB"]),
    ("index-range", "index-range", ["--rows", "60000", "--io-mode", "direct"]),
    ("random-index", "random-index", ["--rows", "3000", "--io-mode", "direct"]),
    ("merge-join", "merge-join", ["--departments", "300", "--employees", "200", "--work-mem", "1MB",
                                  "--io-mode", "buffered"]),
    ("pgbench tpcb-like", "pgbench", ["-i", "-s", "2", "-b", "tpcb-like", "-c", "2", "-T", "10"]),
]


def dbtier(*args: str) -> float:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "dbtier", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"dbtier {' '.join(args)} failed:\n{proc.stderr}")
    return time.perf_counter() - t


def live_figure(result: dict, metric: str) -> float:
    if metric in ("tps", "tpm"):
        return float(result["rates"][metric])
    return float(result["elapsed_s"])


def role_layouts(cands: list, has_temp: bool) -> list[tuple[str, str, frozenset]]:
    """(name, --place text, the candidates it puts on the SSD) for each role-level placement."""
    out = []
    roles = ("data", "indexes", "wal", "temp") if has_temp else ("data", "indexes", "wal")
    for bits in itertools.product((0, 1), repeat=len(roles)):
        on = {r for r, b in zip(roles, bits) if b}
        place = ",".join(f"{r}={'ssd' if r in on else 'hdd'}" for r in roles)
        fast = frozenset(c.name for c in cands
                         if (c.kind == "wal" and "wal" in on) or (c.kind == "temp" and "temp" in on)
                         or (c.kind == "index" and "indexes" in on)
                         or (c.kind in ("table", "materialized view", "catalog") and "data" in on))
        name = "roles-" + ("".join(r[0] for r in roles if r in on) or "none")
        out.append((name, place, fast))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", help="workload names (first column) to run")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from dbtier.advisor import advice
    from dbtier.advisor.advice import verified_best
    from dbtier.advisor.candidates import candidates
    from dbtier.prediction import recording

    work = Path(tempfile.mkdtemp(prefix="dbtier-advise-bench-"))
    rows = []
    try:
        for name, workload, params in WORKLOADS:
            if args.only and name not in args.only and workload not in args.only:
                continue
            out = work / name.replace(" ", "-")
            out.mkdir()
            dbtier("run", workload, *params, *DEVICES, "--place", "data=hdd", "--trace", "-q", "--output",
                   str(out / "rec"))
            run_dir = next((out / "rec").glob(f"{workload}-*"))
            rec = recording.load(run_dir)
            advices = []
            total = sum(c.bytes for c in candidates(rec))
            for share in BUDGETS:
                budget_kb = max(1, int(total * share) // 1024)
                t = time.perf_counter()
                q = advice.question(rec, FAST, None, f"{budget_kb}kB", None, None)
                doc, _adv = advice.advise(q)
                advices.append((share, budget_kb * 1024, doc, time.perf_counter() - t))
            cands = q.candidates
            roles = role_layouts(cands, any(c.kind == "temp" and c.active for c in cands))
            fast_bytes = {c.name: c.bytes for c in cands}
            # the role-level layouts, live: what exhaustive emulation costs
            cj = out / "roles.json"
            configs = [a for n, p, _f in roles for a in ("--config", f"{n}:{SLOW},{FAST}:{p}")]
            roles_wall = dbtier("compare", workload, *params, *configs, "-q", "--output", str(out / "cmp"),
                                "--json", str(cj))
            metric = advices[0][2]["metric"]
            live = {}  # the ssd set -> (name, live figure)
            for (n, _p, f), r in zip(roles, json.loads(cj.read_text())["results"]):
                live[f] = (n, live_figure(r, metric))
            # the advice and its best alternatives at each budget, live
            objects = []
            for share, _b, doc, _s in advices:
                for i, o in enumerate([doc["recommended"], *doc["alternatives"]][:TOP_LIVE]):
                    f = frozenset(o["fast"])
                    if f not in live and f not in [x[1] for x in objects]:
                        objects.append((f"advice-{int(share * 100)}-{i + 1}", f, o["place"]))
            oj = out / "objects.json"
            if objects:
                configs = [a for n, _f, p in objects for a in ("--config", f"{n}:{SLOW},{FAST}:{p}")]
                if len(objects) == 1:  # compare wants two layouts: the all-disk one again is the other
                    configs += ["--config", f"again:{SLOW},{FAST}:data=hdd"]
                dbtier("compare", workload, *params, *configs, "-q", "--output", str(out / "cmp"), "--json", str(oj))
                for (n, f, _p), r in zip(objects, json.loads(oj.read_text())["results"]):
                    live[f] = (n, live_figure(r, metric))
            higher = advices[0][2]["higher_is_better"]
            base = live[frozenset()][1]

            def speedup(v):
                return v / base if higher else base / v
            for share, budget, doc, seconds in advices:
                fits = {f: v for f, v in live.items() if sum(fast_bytes.get(n, 0) for n in f) <= budget}
                best_f = max(fits, key=lambda f: speedup(fits[f][1]))
                adv_f = frozenset(doc["recommended"]["fast"])
                adv_live, best_live = speedup(live[adv_f][1]), speedup(fits[best_f][1])
                gap = 100.0 * (1 - adv_live / best_live)
                # --verify TOP_LIVE: the advice and its alternatives were run live above; the verified
                # advice is the one that measured best (a 1% difference a tie, as advise judges it)
                tops = [frozenset(o["fast"]) for o in [doc["recommended"], *doc["alternatives"]][:TOP_LIVE]]
                ver = verified_best({"higher_is_better": higher, "verify": [
                    {"label": str(i), "place": "", "fast_bytes": 0, "measured": live[f][1]} for i, f in enumerate(tops)]})
                ver_live = speedup(ver["measured"])
                ver_gap = 100.0 * (1 - ver_live / best_live)
                rows.append({"workload": name, "metric": metric, "budget_bytes": budget, "budget_share": share,
                             "advice": doc["recommended"]["place"], "advice_predicted_x": doc["recommended"]["speedup"],
                             "advice_live_x": adv_live, "best_found": live[best_f][0] if best_f in live else "",
                             "best_place": next((p for n, p, f in roles if f == best_f),
                                                next((p for n, f, p in objects if f == best_f), "")),
                             "best_live_x": best_live, "gap%": gap, "verified_live_x": ver_live,
                             "verified_gap%": ver_gap, "advise_s": seconds,
                             "predictions": doc["search"]["predictions"], "roles_live_s": roles_wall,
                             "layouts_live": len(live), "time%": 100.0 * seconds / roles_wall})
                r = rows[-1]
                print(f"{name:20} budget {budget / 2**20:8.1f} MB  advice {r['advice_predicted_x']:.2f}x pred "
                      f"{r['advice_live_x']:.2f}x live  best {r['best_live_x']:.2f}x ({r['best_found']})  gap "
                      f"{gap:+.1f}%  verified {ver_live:.2f}x ({ver_gap:+.1f}%)  advise {seconds:.1f} s vs "
                      f"{roles_wall:.0f} s live ({r['time%']:.1f}%)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    print("| workload | budget | advice (--place) | predicted | live | best found live | best | from best | "
          f"verified ({TOP_LIVE}) | from best | advise time (predictions) | role layouts live | time |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['budget_bytes'] / 2**20:.1f} MB | `{r['advice']}` | {r['advice_predicted_x']:.2f}x | "
              f"{r['advice_live_x']:.2f}x | `{r['best_place']}` | {r['best_live_x']:.2f}x | {r['gap%']:+.1f}% | "
              f"{r['verified_live_x']:.2f}x | {r['verified_gap%']:+.1f}% | "
              f"{r['advise_s']:.1f} s ({r['predictions']}) | {r['roles_live_s']:.0f} s | {r['time%']:.1f}% |")
    if rows:
        for key, what in (("gap%", "the advice"), ("verified_gap%", f"the advice verified ({TOP_LIVE} run live)")):
            gaps = [r[key] for r in rows]
            print(f"{what}: {len(rows)} cases, within 3% of the best found: {sum(g <= 3 for g in gaps)}; median "
                  f"{statistics.median(gaps):+.1f}%, worst {max(gaps):+.1f}%")
        print(f"advice time: median {statistics.median(r['time%'] for r in rows):.1f}%, most "
              f"{max(r['time%'] for r in rows):.1f}% of the role layouts' live time")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
