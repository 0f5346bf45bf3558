"""dbtier's own engine: N worker processes (worker.py), each timing every request it makes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from dbtier import lifecycle
from dbtier.devices.bench.jobs import Figures, Job


def run(job: Job, directory: Path, env: dict[str, str], begin=None) -> Figures:
    """The workers write their latencies beside the session's state (a folder the caller removes).
    They start their loops together, once all are set up and `begin()` (if given) has run."""
    with tempfile.TemporaryDirectory(prefix="lat-", dir=Path(env["DBTIER_IOTAP"]).parent) as tmp:
        procs = []
        gate_r, gate_w = os.pipe()
        try:
            for i in range(job.jobs):
                out = Path(tmp) / f"lat.{i}"
                cmd = [sys.executable, "-m", "dbtier.devices.bench.worker", str(directory / f"iobench.{i}"), job.rw,
                       str(job.bs), str(job.size), str(job.runtime), job.mode, str(1000 + i), str(out), str(gate_r)]
                procs.append((subprocess.Popen(lifecycle.dies_with_us(cmd), env=env, stdout=subprocess.PIPE, text=True,
                                               pass_fds=(gate_r,)), out))
            os.close(gate_r)
            gate_r = -1
            for proc, _out in procs:  # each set up (or gone: its failure is read below)
                proc.stdout.readline()
            if begin is not None:
                begin()
        finally:
            if gate_r >= 0:
                os.close(gate_r)
            os.close(gate_w)  # every worker starts
        lats, moved, elapsed = [], 0, 0.0
        for proc, out in procs:
            stdout, _ = proc.communicate()
            if proc.returncode != 0:
                raise RuntimeError(f"an iobench worker failed ({proc.returncode})")
            doc = json.loads(stdout)
            lats.append(np.fromfile(out, dtype=np.uint64))
            moved += doc["bytes"]
            elapsed = max(elapsed, doc["elapsed_ns"] / 1e9)
    return Figures.from_latencies(np.concatenate(lats), moved, elapsed)
