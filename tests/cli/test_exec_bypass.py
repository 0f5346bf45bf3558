"""`dbtier exec` reports no figure the emulation did not make: I/O that goes around the interposer
(a device file mapped into memory, POSIX AIO, io_uring, splice, sendfile), a program started
where the interposer is not (its environment stripped, a static binary), and files changed in a
device folder without a call the interposer saw. Each ends in one line, exit status 2, no figures;
the engines the emulation does see still report."""

import functools
import json
import shutil
import subprocess
import sys

import pytest

from tests.conftest import compiled, dbtier

needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (make setup installs it as root)")


@functools.cache
def fio_engines() -> set[str]:
    out = subprocess.run(["fio", "--enghelp"], capture_output=True, text=True).stdout
    return {line.strip() for line in out.splitlines()[1:] if line.strip()}


SYNC_ENGINES = ("psync", "pvsync2")


def fio(directory, engine: str) -> list[str]:
    """A tiny fio job: a 4 MiB file laid out, then read and written at random, 8 KiB at a time (four at
    a time for the asynchronous engines)."""
    depth = [] if engine in SYNC_ENGINES else ["--iodepth=4"]
    return ["fio", "--name=b", f"--directory={directory}", f"--ioengine={engine}", "--rw=randrw", "--bs=8k",
            "--size=4m", *depth, "--output-format=json"]


def refused(proc, *words: str) -> str:
    """The run failed as a user error: exit 2, one line of dbtier's on stderr (the last), no figures."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    ours = [line for line in proc.stderr.splitlines() if line.startswith("dbtier")]
    assert len(ours) == 1 and proc.stderr.rstrip().endswith(ours[0]), proc.stderr
    line = ours[0]
    assert line.startswith("dbtier: error: "), line
    assert "Traceback" not in proc.stderr and "r_await" not in proc.stderr, proc.stderr
    for word in words:
        assert word in line, (word, line)
    return line


def run(shm_dir, *command: str, extra=()):
    return dbtier("exec", *extra, "-d", f"d=ram-san:{shm_dir}", "--", *command)


@needs_fio
@pytest.mark.parametrize("engine, says", [
    ("io_uring", "io_uring"),
    ("mmap", "mapped a device file into memory (mmap)"),
    ("posixaio", "POSIX AIO"),
    ("splice", "splice"),
])
def test_fio_engines_the_emulation_cannot_see_are_refused(engine, says, shm_dir):
    if engine not in fio_engines():
        pytest.skip(f"this fio has no {engine} engine (fio --enghelp)")
    proc = run(shm_dir, *fio(shm_dir, engine))
    line = refused(proc, "fio", says, "psync")
    if engine != "io_uring":  # io_uring's files are not seen at all; the others name the device file
        assert str(shm_dir) in line, line


@needs_fio
@pytest.mark.parametrize("engine", SYNC_ENGINES)
def test_fio_engines_the_emulation_sees_still_report(engine, shm_dir, tmp_path):
    out = tmp_path / "r.json"
    proc = dbtier("exec", "--json", str(out), "-d", f"d=ram-san:{shm_dir}", "--", *fio(shm_dir, engine))
    assert proc.returncode == 0, proc.stderr
    assert "r_await" in proc.stderr
    fio_doc = json.loads(proc.stdout)["jobs"][0]
    counters = json.loads(out.read_text())["devices"][0]["counters"]
    # every read and write fio timed went through the emulation (its layout pass writes more)
    assert counters["reads"] >= fio_doc["read"]["total_ios"] > 0
    assert counters["writes"] >= fio_doc["write"]["total_ios"] > 0


MMAP_WRITER = """
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 8192)
with mmap.mmap(fd, 8192) as m:
    m[:5] = b"hello"
"""

SENDFILE_READER = """
import os, sys
src, dst = os.open(sys.argv[1], os.O_RDONLY), os.open(os.devnull, os.O_WRONLY)
assert os.sendfile(dst, src, 0, 1 << 20) == 65536
"""


def test_python_writing_through_mmap_is_refused(shm_dir):
    target = shm_dir / "mapped"
    refused(run(shm_dir, sys.executable, "-c", MMAP_WRITER, str(target)), "mmap", str(target))
    assert target.read_bytes()[:5] == b"hello"  # the program's own work was not changed


def test_sendfile_from_a_device_file_is_refused(shm_dir):
    source = shm_dir / "data"
    source.write_bytes(b"x" * 65536)
    refused(run(shm_dir, sys.executable, "-c", SENDFILE_READER, str(source)), "sendfile", str(source))


def test_a_program_started_without_ld_preload_is_refused(shm_dir):
    (shm_dir / "f").write_text("data\n")
    proc = run(shm_dir, "env", "-u", "LD_PRELOAD", "cat", str(shm_dir / "f"))
    refused(proc, "env started", "/cat without the interposer", "LD_PRELOAD")
    assert proc.stdout == "data\n"


def test_a_program_whose_children_keep_the_environment_still_reports(shm_dir):
    """sh, then cat and wc through a pipe, all with the interposer: the figures stand."""
    (shm_dir / "f").write_text("data\n")
    proc = run(shm_dir, "sh", "-c", f"cat {shm_dir}/f | wc -c; exec cat {shm_dir}/f >/dev/null")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "5" and "r_await" in proc.stderr


@pytest.fixture(scope="module")
def static_writer(tmp_path_factory):
    """A statically linked program that writes its first argument's file (gcc -static)."""
    program, proc = compiled(tmp_path_factory.mktemp("static"), "w",
                             '#include <fcntl.h>\n#include <unistd.h>\n'
                             'int main(int c, char **v) { int fd = open(v[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);\n'
                             '  return c < 2 || fd < 0 || write(fd, "static\\n", 7) != 7; }\n', "-static")
    if proc.returncode != 0:
        pytest.skip(f"static linking is unavailable here (libc.a missing?): {proc.stderr.strip()[:200]}")
    return program


def test_a_static_command_is_refused_before_it_runs(static_writer, shm_dir):
    target = shm_dir / "out"
    line = refused(run(shm_dir, str(static_writer), str(target)), "statically linked", "cannot emulate")
    assert str(static_writer) in line
    assert not target.exists()  # refused before anything ran


def test_a_static_program_started_from_a_shell_is_refused(static_writer, shm_dir):
    target = shm_dir / "out"
    proc = run(shm_dir, "sh", "-c", f"{static_writer} {target}")
    line = refused(proc, "sh started", str(static_writer), "statically linked")
    assert str(target) in line  # and the file it wrote is named: the emulation never saw it
    assert target.read_text() == "static\n"


def test_a_script_run_by_a_static_interpreter_is_refused(static_writer, shm_dir, tmp_path):
    script = tmp_path / "script"
    script.write_text(f"#!{static_writer}\n")
    script.chmod(0o755)
    refused(run(shm_dir, str(script)), "a script run by", "statically linked")


SYSCALL_WRITER = """
import ctypes, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
libc = ctypes.CDLL(None, use_errno=True)
assert libc.syscall(1, fd, b"unseen", 6) == 6  # SYS_write, straight to the kernel
"""


def test_a_file_written_around_the_interposer_is_named(shm_dir):
    """A write made with a raw system call passes no interposed call: the folder's file changed, and
    the emulation's file table never registered it."""
    if not sys.platform.startswith("linux") or __import__("platform").machine() != "x86_64":
        pytest.skip("SYS_write is 1 on x86-64 only")
    (shm_dir / "untouched").write_text("same\n")
    target = shm_dir / "raw"
    line = refused(run(shm_dir, sys.executable, "-c", SYSCALL_WRITER, str(target)), "not through a call")
    assert str(target) in line and "untouched" not in line


def test_the_folder_walk_is_bounded_and_says_so(shm_dir, monkeypatch):
    from dbtier.devices import programs

    for i in range(30):
        (shm_dir / f"f{i}").write_text("x")
    walked = programs.folder_files([shm_dir], [], cap=10)
    assert walked.capped == [str(shm_dir)] and len(walked.files) <= 10
    full = programs.folder_files([shm_dir], [])
    assert not full.capped and len(full.files) == 30
    # a capped folder is left out of the comparison rather than judged on a partial walk
    (shm_dir / "f0").write_text("changed")
    assert programs.unseen_writes(walked, programs.folder_files([shm_dir], [], cap=10), {"files": []},
                                  [shm_dir]) == []
    assert programs.unseen_writes(full, programs.folder_files([shm_dir], []), {"files": []},
                                  [shm_dir]) == [str(shm_dir / "f0")]


def test_a_control_character_in_a_device_folder_is_refused(tmp_path):
    """A control character in a folder's name is refused before the state is built."""
    folder = tmp_path / "a\nb\tram\t"
    folder.mkdir()
    proc = dbtier("exec", "-d", f"d=ram-san:{folder}", "--", "true")
    assert proc.returncode == 2 and "control character" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.fixture
def foreign_program(tmp_path):
    """The start of a 32-bit x86 program (an ELF header and its PT_INTERP entry): one the 64-bit
    interposer cannot be loaded into, whatever ld.so does with it."""
    import platform
    import struct

    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("the test's foreign program is 32-bit x86: foreign to 64-bit hosts only")
    header = bytearray(52)
    header[:7] = b"\x7fELF\x01\x01\x01"  # 32-bit, little-endian, version 1
    struct.pack_into("<HHI", header, 16, 2, 3, 1)  # ET_EXEC, EM_386, EV_CURRENT
    struct.pack_into("<I", header, 28, 52)  # e_phoff
    struct.pack_into("<HH", header, 42, 32, 1)  # e_phentsize, e_phnum
    program = tmp_path / "x86prog"
    program.write_bytes(bytes(header) + struct.pack("<I", 3) + bytes(28))  # one PT_INTERP
    program.chmod(0o755)
    return program


def test_a_program_for_another_machine_is_refused(foreign_program, shm_dir):
    line = refused(run(shm_dir, str(foreign_program)), "cannot emulate", "built for x86 (32-bit)")
    assert "the interposer for" in line
    # started from a shell, the interposer in the shell names it (whether the kernel then runs it or not)
    refused(run(shm_dir, "sh", "-c", f"{foreign_program} 2>/dev/null; true"), "sh started", str(foreign_program),
            "another architecture")


@pytest.fixture(scope="module")
def uring_program(tmp_path_factory):
    """A program linked to liburing 2 that makes a ring through it, then writes its argument's file:
    liburing (2.2 on) makes its system calls and maps its rings itself, past libc, so the ring is seen
    only where the program calls liburing. The library: the system's, or the one dbtier fetches for
    MariaDB's server (it links it)."""
    from pathlib import Path
    lib = Path("/usr/lib/x86_64-linux-gnu/liburing.so.2")
    if not lib.exists():
        if shutil.which("apt-get") is None:
            pytest.skip("no liburing.so.2 here, and no apt-get to fetch MariaDB's")
        from dbtier.engines.mariadb import binaries
        lib = binaries.find().basedir / binaries.LIB_DIR / "liburing.so.2"
    program, proc = compiled(tmp_path_factory.mktemp("uring"), "u",
                             '#include <fcntl.h>\n#include <unistd.h>\n'
                             'int io_uring_queue_init(unsigned entries, void *ring, unsigned flags);\n'
                             'static char ring[4096] __attribute__((aligned(64)));  /* struct io_uring, with room */\n'
                             'int main(int c, char **v) { if (c < 2 || io_uring_queue_init(8, ring, 0) != 0) return 3;\n'
                             '  int fd = open(v[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);\n'
                             '  return fd < 0 || write(fd, "ring\\n", 5) != 5; }\n', str(lib), f"-Wl,-rpath,{lib.parent}")
    assert proc.returncode == 0, proc.stderr
    return program


def test_a_ring_made_through_liburing_is_refused(uring_program, shm_dir):
    """Without the interposer the program runs (a ring made, its file written); under it, the run is
    refused: the ring's I/O would go round the emulation."""
    plain = subprocess.run([str(uring_program), str(shm_dir / "plain")], capture_output=True, text=True)
    assert plain.returncode == 0, plain.stderr  # the kernel made the ring: the refusal below is the interposer's
    refused(run(shm_dir, str(uring_program), str(shm_dir / "out")), "io_uring")
