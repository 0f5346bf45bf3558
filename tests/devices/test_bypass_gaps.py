"""Session.gaps reads the interposer's bypass counters: a kind that grew in the interval is one phrase
naming the process and the file of the first of its kind, with what to use instead; a kind that did
not grow (counted before the interval, as a lab's preparation may) is not a gap of the interval."""

from pathlib import Path

from dbtier.devices.profile import load
from dbtier.devices.session import Device, Session, bypass_gaps


def state(**counts):
    kinds = ("mmap", "libaio", "posix_aio", "io_uring", "splice", "sendfile", "exec_env", "exec_static",
             "exec_foreign")
    out = {k: {"count": 0} for k in kinds}
    for kind, (n, program, path) in counts.items():
        out[kind] = {"count": n, "pid": 42, "program": program, "path": path}
    return {"untracked_calls": 0, "trace_failures": 0, "bypasses": out}


def test_a_grown_kind_is_one_phrase_with_its_process_file_and_remedy():
    after = state(libaio=(3, "fio", "/dev/shm/d/f"), exec_env=(1, "env", "/usr/bin/cat"))
    gaps = bypass_gaps(after)
    assert gaps == [
        "fio did I/O on a device file through io_submit (libaio) asking to be told of its completion through an "
        "eventfd, which the emulation does not do (/dev/shm/d/f) (3 calls); leave out IOCB_FLAG_RESFD and reap "
        "with io_getevents",
        "env started /usr/bin/cat without the interposer (LD_PRELOAD or DBTIER_IOTAP taken out of its "
        "environment), so its I/O went unseen; keep both in the environment of the programs it starts",
    ]


def test_only_what_grew_in_the_interval_counts(tmp_path):
    session = Session([Device("d", Path(tmp_path), load("ram-san"))], tmp_path / "w")
    before = state(mmap=(2, "postgres", "/x"))
    assert session.gaps(state(mmap=(2, "postgres", "/x")), before) == []
    gaps = session.gaps(state(mmap=(3, "postgres", "/x")), before)
    assert len(gaps) == 1 and gaps[0].startswith("postgres mapped a device file into memory (mmap)")
    assert "calls)" not in gaps[0]  # one in the interval


def test_a_record_without_details_still_makes_a_gap():
    """A process killed while it wrote the details leaves the count alone."""
    after = state()
    after["bypasses"]["splice"] = {"count": 1}
    assert bypass_gaps(after) == ["a process moved a device file's data with splice, inside the kernel where the "
                                  "emulation cannot see it (a file it had open); use read and write calls or libaio "
                                  "instead (fio: --ioengine=psync, pvsync2 or libaio)"]
