"""fio as the engine (psync, one file per job, the files dbtier laid out), through the same emulation."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from dbtier import lifecycle
from dbtier.devices.bench.jobs import Figures, Job
from dbtier.errors import UserError


def available() -> bool:
    return shutil.which("fio") is not None


def command(job: Job, directory: Path) -> list[str]:
    cmd = ["fio", "--name=iobench", f"--directory={directory}", "--filename_format=iobench.$jobnum",
           f"--rw={job.rw}", f"--bs={job.bs}", f"--size={job.size}", f"--numjobs={job.jobs}", "--ioengine=psync",
           f"--runtime={job.runtime}", "--time_based", "--group_reporting", "--output-format=json",
           "--randrepeat=0", "--invalidate=1", f"--direct={int(job.mode == 'direct')}"]
    if job.mode == "dsync":
        cmd.append("--sync=1")
    return cmd


def run(job: Job, directory: Path, env: dict[str, str], begin=None) -> Figures:
    """`begin()` runs just before fio starts (its own start-up is counted in what follows)."""
    if not available():
        raise UserError("--engine fio: fio is not installed (apt-get install fio)")
    if begin is not None:
        begin()
    proc = subprocess.run(lifecycle.dies_with_us(command(job, directory)), env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise UserError(f"fio failed: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
    doc = json.loads(proc.stdout[proc.stdout.index("{"):])
    side = doc["jobs"][0]["read" if job.is_read else "write"]
    pct = side["clat_ns"].get("percentile", {})
    return Figures(int(side["total_ios"]), side["bw_bytes"] / 1048576, side["iops"], side["lat_ns"]["mean"] / 1e3,
                   pct.get("50.000000", 0) / 1e3, pct.get("99.000000", 0) / 1e3,
                   side["runtime"] / 1e3 if side.get("runtime") else job.runtime)
