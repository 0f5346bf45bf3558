"""An output folder that cannot take the results when the run ends (full, or turned read-only): the
measurement is not lost. The run says so in one line (exit 2) after printing its report, and keeps
its run directory in the workspace, named; the output folder holds nothing half-written.

A small file system of its own (tmpfs) plays the output folder, so this needs root (mount); as a
normal user it is skipped."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import dbtier

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small file system for the output needs root")


@pytest.fixture(params=["full", "read-only"])
def small_output(request, tmp_path):
    """A 16 kB tmpfs (a run directory's report alone is larger), or one mounted read-only after the
    run's checks passed: dbtier checks that it can write there before it starts."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k,mode=0755", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield request.param, mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _read_only_while_it_runs(args, mount: Path, root: Path) -> tuple[int, str, str]:
    """The output folder turns read-only while the lab runs: remounted while the lab's claim exists
    (the results are published only after the lab has gone). Should the lab come and go between two
    looks, the attempt does not count and is made again."""
    for _attempt in range(3):
        subprocess.run(["mount", "-o", "remount,rw", str(mount)], check=True)
        proc = subprocess.Popen([sys.executable, "-m", "dbtier", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        while proc.poll() is None and not list(root.glob("lab-*")):
            time.sleep(0.01)
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        during = bool(list(root.glob("lab-*")))
        out, err = proc.communicate(timeout=300)
        if during:
            return proc.returncode, out, err
        for leftover in mount.iterdir():
            pytest.fail(f"a run directory was published before the remount: {leftover}")
    pytest.fail("the lab never lasted long enough to remount the output folder under it")


def test_results_are_kept_in_the_workspace_when_the_output_cannot_take_them(small_output, shm_dir):
    how, mount = small_output
    args = ["run", "random-index", "--rows", "50", "-d", "d=ram-san", "--workspace", str(shm_dir), "-o", str(mount)]
    if how == "read-only":
        rc, out, err = _read_only_while_it_runs(args, mount, shm_dir / f"dbtier-{os.geteuid()}")
    else:
        done = dbtier(*args)
        rc, out, err = done.returncode, done.stdout, done.stderr
    assert rc == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    why = "No space left on device" if how == "full" else "Read-only file system"
    m = re.match(rf"dbtier: error: cannot write the results into {re.escape(str(mount))} \({why}\); they are kept "
                 r"in (?P<kept>\S+): copy them from there, then remove (?P<claim>\S+)$", lines[0])
    assert m, lines[0]
    kept = Path(m.group("kept"))
    assert f"run directory: {kept}" in out and "lookups" in out  # the report was printed all the same
    doc = json.loads((kept / "result.json").read_text())
    assert doc["kind"] == "run" and doc["elapsed_s"] > 0 and (kept / "report.html").is_file()
    assert [p.name for p in mount.iterdir()] == []  # nothing half-written
    # kept: the next command's reaper leaves it
    dbtier("exec", "--workspace", str(shm_dir), "-q", "-d", f"d=ram-san:{shm_dir}", "--", "true", check=True)
    assert (kept / "result.json").is_file()
    shutil.rmtree(m.group("claim"))
