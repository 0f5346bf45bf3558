"""Emulation lateness per profile (actual minus modelled completion, measured inside each call),
and fio's own view of three profiles beside the model's. Run: python bench/lateness.py"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from dbtier.devices import patterns, profile
from dbtier.devices.session import run_on_device
from dbtier.measure import lateness

PROFILES = ["hdd-sata-7200", "hdd-sas-15k", "ssd-sata-mlc", "pcie-flash-mlc", "pcie-flash-slc", "ram-san", "nvme-gen4"]


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="dbtier-bench-", dir="/dev/shm"))
    try:
        data = work / "data"
        with open(data, "wb") as f:
            f.truncate(1 << 30)
        print("QD1 8 KiB random reads over 1 GiB through the interposer (Python driver):")
        print(f"  {'profile':16} {'model p50 us':>12} {'late p50 us':>12} {'late p99 us':>12} {'late max us':>12} {'overruns':>9}")
        for name in PROFILES:
            prof = profile.load(name)
            count = 200 if prof.kind == "hdd" else 2000
            cmd = [sys.executable, "-m", "dbtier.devices.ioload", str(data), "--random", "--count", str(count)]
            _, dev = run_on_device(prof, work, cmd)
            late = lateness.summary(dev)
            model = patterns.expected(prof, patterns.STANDARD[0])
            print(f"  {name:16} {model.p50_us:12.1f} {late['p50_us']:12.2f} {late['p99_us']:12.1f} "
                  f"{late['max_us']:12.1f} {late['overruns']:6}/{late['count']}")
        if not shutil.which("fio"):
            print("fio is not installed: skipping the fio comparison")
            return
        print("\nfio --ioengine=psync --rw=randread --bs=8k --size=1g, through `dbtier exec`-style emulation:")
        print(f"  {'profile':16} {'model mean':>10} {'fio mean':>10} {'model p50':>10} {'fio p50':>10} {'fio IOPS':>9}  (us)")
        for name, secs in (("hdd-sata-7200", 8), ("ssd-sata-mlc", 4), ("ram-san", 4)):
            prof = profile.load(name)
            cmd = ["fio", "--name=rr", f"--directory={work}", "--filename=data", "--ioengine=psync", "--rw=randread",
                   "--bs=8k", "--size=1g", f"--runtime={secs}", "--time_based", "--output-format=json"]
            out, _ = run_on_device(prof, work, cmd)
            read = json.loads(out)["jobs"][0]["read"]
            model = patterns.expected(prof, patterns.STANDARD[0])
            print(f"  {name:16} {model.mean_us:10.1f} {read['clat_ns']['mean'] / 1e3:10.1f} {model.p50_us:10.1f} "
                  f"{read['clat_ns']['percentile']['50.000000'] / 1e3:10.1f} {read['iops']:9.0f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
