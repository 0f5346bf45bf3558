"""What the interposer costs per call, measured in one run: 8 KiB pread from a cached tmpfs file,
plain, under the interposer outside every device (pass-through), and on a `real` device (counted
and histogrammed, no latency injected), with and without the trace. The cases run interleaved,
ROUNDS times, and each keeps its best: the machine is shared, so only minima measured side by side
compare. Run: python bench/interposer_overhead.py"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from dbtier.devices.profile import load
from dbtier.devices.session import Device, Session

HERE = Path(__file__).resolve().parent
N = 100_000
ROUNDS = 7


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="dbtier-bench-", dir="/dev/shm"))
    try:
        exe = work / "callbench"
        subprocess.run(["cc", "-O2", "-o", str(exe), str(HERE / "callbench.c")], check=True)
        inside, outside = work / "dev", work / "elsewhere"
        inside.mkdir()
        outside.mkdir()
        for d in (inside, outside):
            (d / "f").write_bytes(os.urandom(128 * 8192))

        def run(path: Path, env=None) -> float:
            out = subprocess.run([str(exe), str(path), str(N)], env=env, capture_output=True, text=True, check=True)
            return float(out.stdout)

        session = Session([Device("dev", inside, load("real"))], work / "state")
        session.create()
        traced_session = Session([Device("dev", inside, load("real"))], work / "state2", trace_dir=work / "trace")
        traced_session.create()
        cases = {
            "without the interposer": (inside / "f", None),
            "interposer, pass-through": (outside / "f", session.env()),
            "interposer, counting (real dev)": (inside / "f", session.env()),
            "interposer, counting + trace": (inside / "f", traced_session.env()),
        }
        best = {name: float("inf") for name in cases}
        for _ in range(ROUNDS):
            for name, (path, env) in cases.items():
                best[name] = min(best[name], run(path, env))
        base = best["without the interposer"]
        print(f"pread 8 KiB from a cached file, ns per call (best of {ROUNDS} interleaved rounds x 5 x {N:,}):")
        for name, value in best.items():
            extra = "" if value is base else f"   (+{value - base:.1f})"
            print(f"  {name:34} {value:8.1f}{extra}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
