"""Crash states of a small program run on emulated devices, against what each cut must have kept:
the durability log and the trace joined, bytes exactly as the device model made them durable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dbtier.crash import image, states
from dbtier.devices import profile as profiles
from dbtier.devices.pagecache import PageCache
from dbtier.devices.session import Device, Session

PAGE = 4096
#: the program: B over a's first page, fsync; C over its second page, left in the page cache; a new
#: file of D, fsync, renamed; E over b's first two pages, fsync; then (with FINAL) a's fsync, after
#: which everything is durable
PROGRAM = """
import os, sys
dev = sys.argv[1]
a = os.open(os.path.join(dev, "a"), os.O_RDWR)
os.pwrite(a, b"B" * 4096, 0)
os.fsync(a)
os.pwrite(a, b"C" * 4096, 4096)
n = os.open(os.path.join(dev, "new"), os.O_RDWR | os.O_CREAT, 0o600)
os.pwrite(n, b"D" * 8192, 0)
os.fsync(n)
os.close(n)
os.rename(os.path.join(dev, "new"), os.path.join(dev, "renamed"))
b = os.open(os.path.join(dev, "b"), os.O_RDWR)
os.pwrite(b, b"E" * 8192, 0)
os.fsync(b)
os.close(b)
if sys.argv[2] == "final":
    os.fsync(a)
os.close(a)
"""


#: the program under an injected fsync error: B over a's first page, its fsync fails (EIO); a second
#: fsync succeeds; C over the second page, fsync
FAILED_FSYNC = """
import os, sys
a = os.open(os.path.join(sys.argv[1], "a"), os.O_RDWR)
os.pwrite(a, b"B" * 4096, 0)
try:
    os.fsync(a)
    print("no error")
except OSError as e:
    print(e.errno)
os.fsync(a)
os.pwrite(a, b"C" * 4096, 4096)
os.fsync(a)
"""


def run(tmp: Path, spec: str, final: bool, program: str = PROGRAM, before=lambda session: None):
    folder = tmp / "dev"
    folder.mkdir()
    (folder / "a").write_bytes(b"A" * 4 * PAGE)
    (folder / "b").write_bytes(b"F" * 4 * PAGE)
    device = Device("d", folder.resolve(), profiles.load(spec))
    session = Session([device], tmp / "work", trace_dir=tmp / "work" / "trace", page_cache=PageCache(64 << 20),
                      durlog_dir=tmp / "work" / "durlog")
    session.create()
    base_inodes = image.take_base([device], tmp / "base")
    session.keep_durability_log()
    before(session)
    proc = subprocess.run([sys.executable, "-c", program, str(folder), "final" if final else "-"], env=session.env(),
                          check=True, capture_output=True, text=True)
    assert session.gaps(session.snapshot()) == []
    builder = image.builder(session, tmp / "base", base_inodes, tmp / "scratch")
    builder.output = proc.stdout
    builder.fault = session.snapshot()["fault"]
    return folder, builder


def state_at(builder, tmp: Path, at_ns: int, name: str, **kw) -> Path:
    out = builder.build(states.Cut(1, 0, kw.pop("kind", "random"), at_ns, **kw), tmp / name)
    return out / "0"


def test_every_byte_where_the_model_left_it(tmp_path):
    folder, builder = run(tmp_path, "ssd-sata-mlc", final=True)
    tl = builder.tl
    try:
        # at the end, after the last fsync, the state is the live files exactly
        end = state_at(builder, tmp_path, tl.end_ns, "end")
        assert sorted(p.name for p in end.iterdir()) == ["a", "b", "renamed"]
        for name in ("a", "b", "renamed"):
            assert (end / name).read_bytes() == (folder / name).read_bytes()
        # before anything: the base
        start = state_at(builder, tmp_path, tl.start_ns - 1, "start")
        assert sorted(p.name for p in start.iterdir()) == ["a", "b"]
        assert (start / "a").read_bytes() == b"A" * 4 * PAGE
        # just after the first flush: B is durable, C is not, the new file not yet
        first = state_at(builder, tmp_path, int(tl.flushes[0]), "first")
        assert (first / "a").read_bytes() == b"B" * PAGE + b"A" * 3 * PAGE
        assert sorted(p.name for p in first.iterdir()) == ["a", "b"]
        # after the second flush (the new file's), before the rename, and after it
        second = state_at(builder, tmp_path, int(tl.flushes[1]), "second")
        assert (second / "new").read_bytes() == b"D" * 2 * PAGE
        assert (second / "a").read_bytes() == b"B" * PAGE + b"A" * 3 * PAGE, "C waits in the page cache"
        renamed_at = int(tl.log.entries["t0"][tl.log.entries["kind"] == 4][0])
        after = state_at(builder, tmp_path, renamed_at, "renamed")
        assert sorted(p.name for p in after.iterdir()) == ["a", "b", "renamed"]
        # the states were built forward; one at an earlier instant starts again from the base
        again = state_at(builder, tmp_path, int(tl.flushes[0]), "again")
        assert (again / "a").read_bytes() == (first / "a").read_bytes()
    finally:
        builder.close()


def test_a_volatile_cache_that_ignores_flushes_keeps_nothing(tmp_path):
    folder, builder = run(tmp_path, "ssd-sata-mlc{flush_honoured=0}", final=True)
    try:
        end = state_at(builder, tmp_path, builder.tl.end_ns, "end")
        assert (end / "a").read_bytes() == b"A" * 4 * PAGE, "64 MiB of cache held every write"
        assert (end / "renamed").read_bytes() == b"", "the new file exists (its name is durable at once), its bytes do not"
        assert (folder / "a").read_bytes()[:PAGE] == b"B" * PAGE
    finally:
        builder.close()


def test_no_volatile_cache_keeps_what_completed(tmp_path):
    _folder, builder = run(tmp_path, "ebs-gp3", final=False)
    try:
        tl = builder.tl
        done = state_at(builder, tmp_path, tl.end_ns, "end")
        assert (done / "a").read_bytes() == b"B" * PAGE + b"A" * 3 * PAGE, "C never left the page cache"
        assert (done / "renamed").read_bytes() == b"D" * 2 * PAGE
        assert (done / "b").read_bytes() == b"E" * 2 * PAGE + b"F" * 2 * PAGE
        # a torn write of b's 8 KiB, in 4 KiB units: the first unit kept, the second lost
        rows = [k for k in range(len(tl.requests.len)) if tl.requests.len[k] == 2 * PAGE]
        row = max(rows, key=lambda k: int(tl.requests.arrival[k]))  # b's, after the new file's
        at = int(tl.requests.arrival[row])
        torn = state_at(builder, tmp_path, at, "torn", kind="torn", torn=(row, (0,)))
        assert (torn / "b").read_bytes() == b"E" * PAGE + b"F" * 3 * PAGE
        # a torn write never grows its file: the new file's, before any of it was durable, left it empty
        row = min(rows, key=lambda k: int(tl.requests.arrival[k]))
        torn = state_at(builder, tmp_path, int(tl.requests.arrival[row]), "torn-new", kind="torn", torn=(row, (0,)))
        assert (torn / "new").read_bytes() == b""
    finally:
        builder.close()


def test_a_failed_fsync_leaves_its_pages_clean_and_never_written(tmp_path):
    """An injected fsync error, as Linux reports one: EIO once, the file's dirty page marked clean, so
    the next fsync succeeds and writes nothing of it: B is in the live file and never on the media,
    while C, written after, is."""
    folder, builder = run(tmp_path, "ebs-gp3", final=False, program=FAILED_FSYNC,
                          before=lambda session: session.fail_fsync(0, 1))
    try:
        assert builder.output.split() == ["5"], "the first fsync failed with EIO"
        fault = builder.fault
        assert fault["fired"] == 1 and fault["pages"] == 1 and fault["device"] == 0 and fault["seen"] == 1
        assert builder.tl.start_ns <= fault["at_ns"] <= builder.tl.end_ns
        assert (folder / "a").read_bytes() == b"B" * PAGE + b"C" * PAGE + b"A" * 2 * PAGE
        end = state_at(builder, tmp_path, builder.tl.end_ns, "end")
        assert (end / "a").read_bytes() == b"A" * PAGE + b"C" * PAGE + b"A" * 2 * PAGE
        # B, written before the failure, on no media at the end; C, after it, is
        assert builder.never_written(fault["file"], fault["at_ns"]) == PAGE
        assert builder.never_written(fault["file"], builder.tl.end_ns) == PAGE
    finally:
        builder.close()


FAILED_TABLE_FSYNC = """
import os, sys
for name in ("a", "t.ibd"):
    n = os.open(os.path.join(sys.argv[1], name), os.O_RDWR | os.O_CREAT, 0o600)
    os.pwrite(n, b"G" * 4096, 0)
    try:
        os.fsync(n)
        print("ok")
    except OSError as e:
        print(e.errno)
"""


def test_a_failed_fsync_can_be_of_a_file_named_so(tmp_path):
    """Armed for files whose names end with .ibd (InnoDB's tables: pgpath.h classes PostgreSQL's
    files only), the fault passes the other file's fsync and fails the table's."""
    _folder, builder = run(tmp_path, "ebs-gp3", final=False, program=FAILED_TABLE_FSYNC,
                          before=lambda session: session.fail_fsync(0, 1, suffix=".ibd"))
    try:
        assert builder.output.split() == ["ok", "5"]
        fault = builder.fault
        assert fault["fired"] == 1 and fault["seen"] == 1 and fault["pages"] == 1
        assert builder.tl.files[fault["file"]][1].endswith("/t.ibd")
    finally:
        builder.close()


SMALL_FILE = """
import os, sys
n = os.open(os.path.join(sys.argv[1], "small"), os.O_RDWR | os.O_CREAT, 0o600)
os.write(n, b"12345678")
os.fsync(n)
"""


def test_a_file_smaller_than_a_page_keeps_its_size(tmp_path):
    """The device writes the file's whole page, but the file is 8 bytes: its state is too (a page's
    tail of zeros in a state once made PostgreSQL read a replorigin_checkpoint of garbage records)."""
    _folder, builder = run(tmp_path, "ssd-sata-mlc", final=False, program=SMALL_FILE)
    try:
        assert int(builder.tl.requests.len.max()) == PAGE
        end = state_at(builder, tmp_path, builder.tl.end_ns, "end")
        assert (end / "small").read_bytes() == b"12345678"
    finally:
        builder.close()


def test_a_real_folder_cannot_be_cut(tmp_path):
    from dbtier.crash.devices import of
    from dbtier.errors import UserError
    with pytest.raises(UserError, match="cannot be cut"):
        of("d", profiles.load("real"))
