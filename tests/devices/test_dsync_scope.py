"""A dsync device (the seeds' ASE `dsync` option) writes its database files through; a server's other
files (temp files, the relation cache's init file) stay buffered. Checked from the interposer's
counters, and the rule the replay uses is the same C function."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dbtier.devices import native
from dbtier.devices.pagecache import PageCache
from dbtier.devices.profile import load
from dbtier.devices.session import Device, Session

#: 20 buffered 8 KiB writes to each file named on the command line
WRITER = """
import os, sys
for name in sys.argv[1:]:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o600)
    for i in range(20):
        os.pwrite(fd, b"x" * 8192, i * 8192)
    os.close(fd)
"""


@pytest.mark.parametrize("name, scoped", [
    ("16384", True), ("16384_fsm", True), ("16384_vm", True), ("16384_init", True), ("16384.2", True),
    ("000000010000000000000003", True), ("0000", True),
    ("pgsql_tmp1234.0", False), ("pg_internal.init", False), ("pg_filenode.map", False), ("16384_x", False),
    ("16384.", False), ("postmaster.pid", False), ("", False),
])
def test_the_rule(name, scoped):
    assert native.dsync_scope(f"/srv/base/5/{name}") is scoped


@pytest.mark.parametrize("path", ["/srv/ts/PG_18_202506291/pgsql_tmp/pgsql_tmp18207.0.fileset/1.0",
                                  "/srv/base/pgsql_tmp/pgsql_tmp99.3"])
def test_temp_files_named_like_segments_are_temp_files(path):
    """A sort's shared file set names its files 0.0, 1.0, ... inside pgsql_tmp: not relation segments."""
    assert native.dsync_scope(path) is False


def test_only_database_files_are_written_through(shm_dir, tmp_path):
    files = [shm_dir / "16384", shm_dir / "pgsql_tmp99.0", shm_dir / "pg_internal.init"]
    session = Session([Device("d", shm_dir, load("ssd-sata-mlc"))], tmp_path / "s",
                      page_cache=PageCache(64 << 20, dsync_data=True))
    session.create()
    subprocess.run([sys.executable, "-c", WRITER, *map(str, files)], env=session.env(), check=True)
    counters = session.snapshot()["devices"][0]
    # the relation file's 20 writes each went to the device with a flush; the other 40 stayed in memory
    assert counters["writes"] == 20 and counters["flushes"] == 20, counters
    assert counters["write_bytes"] == 20 * 8192
