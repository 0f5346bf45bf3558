"""One iobench worker: a time-based loop of requests at queue depth 1 on its own file, each timed
(the loop itself is C: native.bench_loop).

    python -m dbtier.devices.bench.worker FILE RW BS SIZE RUNTIME MODE SEED OUT [GATE_FD]
writes the latencies (ns, uint64) to OUT and prints {"bytes": N, "elapsed_ns": N}. With GATE_FD it
prints "ready" once set up and starts its loop when that pipe closes: every worker starts together,
when the engine says (after it set what the measurement starts with)."""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import sys

from dbtier.devices import native


def main() -> None:
    path, rw, bs, size, runtime, mode, seed, out = sys.argv[1:9]
    bs, size, runtime, seed = int(bs), int(size), float(runtime), int(seed)
    flags = os.O_RDWR | (os.O_DIRECT if mode == "direct" else 0) | (os.O_DSYNC if mode == "dsync" else 0)
    fd = os.open(path, flags)
    buf = mmap.mmap(-1, bs)  # page-aligned, as O_DIRECT needs
    buf.write(os.urandom(min(bs, 4096)) * (bs // min(bs, 4096)))
    address = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    if len(sys.argv) > 9:
        gate = int(sys.argv[9])
        print("ready", flush=True)
        while os.read(gate, 1):  # until the engine closes its end
            pass
        os.close(gate)
    cap = 64 << 20  # latencies kept: more than any device does in a bench's runtime
    cap = min(cap, int(runtime * 2_000_000) + 1024)  # at most 2 M requests/s
    try:
        lat, moved, elapsed = native.bench_loop(fd, rw in ("read", "randread"), address, bs, size // bs,
                                                rw.startswith("rand"), seed, runtime, cap)
    finally:
        os.close(fd)
    lat.tofile(out)
    print(json.dumps({"bytes": moved, "elapsed_ns": elapsed}))


if __name__ == "__main__":
    main()
