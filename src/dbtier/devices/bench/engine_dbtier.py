"""dbtier's own engine: N worker processes (worker.py), each timing every request it makes."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from dbtier import lifecycle
from dbtier.devices.bench.jobs import Figures, Job


def run(job: Job, directory: Path, env: dict[str, str]) -> Figures:
    """The workers write their latencies beside the session's state (a folder the caller removes)."""
    with tempfile.TemporaryDirectory(prefix="lat-", dir=Path(env["DBTIER_IOTAP"]).parent) as tmp:
        procs = []
        for i in range(job.jobs):
            out = Path(tmp) / f"lat.{i}"
            cmd = [sys.executable, "-m", "dbtier.devices.bench.worker", str(directory / f"iobench.{i}"), job.rw,
                   str(job.bs), str(job.size), str(job.runtime), job.mode, str(1000 + i), str(out)]
            procs.append((subprocess.Popen(lifecycle.dies_with_us(cmd), env=env, stdout=subprocess.PIPE, text=True),
                          out))
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
