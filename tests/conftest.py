"""Shared fixtures: tmpfs space for emulated devices, and the dbtier command as a user runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SHM = Path("/dev/shm")


@pytest.fixture
def shm_dir():
    """A fresh directory on tmpfs: fast devices are emulated with their data in RAM."""
    base = SHM if SHM.is_dir() and os.access(SHM, os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="dbtier-test-", dir=base))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def gib_file():
    """A sparse 1 GiB file on tmpfs, the span of the standard QD1 patterns."""
    path = Path(tempfile.mkdtemp(prefix="dbtier-gib-", dir=SHM if SHM.is_dir() else None))
    f = path / "data"
    with open(f, "wb") as out:
        out.truncate(1 << 30)
    yield f
    shutil.rmtree(path, ignore_errors=True)


def dbtier(*args: str, check: bool = False, **kw) -> subprocess.CompletedProcess:
    """Runs `dbtier ARGS` in a subprocess, as a user would."""
    proc = subprocess.run([sys.executable, "-m", "dbtier", *args], capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"dbtier {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc
