"""A minimal QD1 load generator: one request at a time, each timed by the caller's clock.

Run under the interposer by the fidelity tests and the benches:
    python -m dbtier.devices.ioload FILE --op read --random --count 300 --seed 42
It prints JSON: {"latency_ns": [...], "elapsed_ns": N}: each measured request's latency (after the
--warmup ones), and the wall time of the measured loop (start-up excluded)."""

from __future__ import annotations

import argparse
import json
import os
import time

from dbtier.devices import native


def run(path: str, op: str, random: bool, block: int, span: int, count: int, warmup: int, seed: int) -> tuple[list[int], int]:
    offsets = native.pattern_offsets(seed, random, span, block, warmup + count).tolist()
    fd = os.open(path, os.O_RDWR)
    buf = b"\xa5" * block
    clock = time.perf_counter_ns
    lat = []
    try:
        do = (lambda off: os.pread(fd, block, off)) if op == "read" else (lambda off: os.pwrite(fd, buf, off))
        start = None
        for i, off in enumerate(offsets):
            t = clock()
            if i == warmup:
                start = t
            do(off)
            if i >= warmup:
                lat.append(clock() - t)
        elapsed = clock() - start if start is not None else 0
    finally:
        os.close(fd)
    return lat, elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--op", choices=("read", "write"), default="read")
    ap.add_argument("--random", action="store_true")
    ap.add_argument("--block", type=int, default=8192)
    ap.add_argument("--span", type=int, default=1 << 30)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()
    lat, elapsed = run(a.file, a.op, a.random, a.block, a.span, a.count, a.warmup, a.seed)
    print(json.dumps({"latency_ns": lat, "elapsed_ns": elapsed}))


if __name__ == "__main__":
    main()
