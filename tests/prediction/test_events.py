"""The replay's events of trace records: each field as native/iotap/replay.h says a replay takes it."""

import numpy as np

from dbtier.devices import native
from dbtier.measure import trace
from dbtier.prediction import events


def test_a_record_becomes_the_event_the_replay_takes():
    rec = np.zeros(4, dtype=trace.RECORD)
    rec["kind"] = [trace.CALL, trace.CALL, trace.CALL, trace.SYNC]
    rec["op"] = [trace.READ, trace.READ, trace.FLUSH, trace.SLEEP]
    rec["submit_ns"] = [1000, 2000, 3000, 4000]
    rec["start_ns"] = [1300, 1900, 3100, 4000]     # the host call's end (the second: before its start)
    rec["complete_ns"] = [1800, 0, 3500, 0]        # what it waited for
    rec["end_ns"] = [1850, 2100, 3400, 3000]       # returned: 50 ns late; 100 ns late; not late; a reversed sync
    rec["offset"], rec["len"], rec["file"], rec["dev"] = 8192, 8192, [3, 4, -1, -1], [1, 2, 1, 1]
    rec["aux"] = [10, trace.SIZE_UNKNOWN, 7, 9]    # a read's size in pages (unknown); fsync's flags
    rec["flags"] = [trace.FLAGS["direct"] | trace.FLAGS["page_cache"], trace.FLAGS["dsync"], 0,
                    trace.SYNC_SEM | events.CLIENT]
    ev = native.replay_events(rec, np.array([0, 0, 1, 1]), np.array([-1, -1, -1, 0]), np.array([-1, -1, -1, -1]))
    assert list(ev["t0"]) == [1000, 2000, 3000, 4000] and list(ev["t1"]) == [1850, 2100, 3400, 4000]
    assert list(ev["host_ns"]) == [300, 0, 100, 0]
    assert list(ev["late_ns"]) == [50, 100, 0, 0]
    assert list(ev["file_size"]) == [10 * trace.SIZE_PAGE, 2**64 - 1, 2**64 - 1, 2**64 - 1]
    assert list(ev["aux"]) == [0, 0, 7, 0] and list(ev["dev"]) == [1, 2, 1, 0]
    assert list(ev["flags"]) == [trace.FLAGS["direct"], trace.FLAGS["dsync"], 0, trace.SYNC_SEM | events.CLIENT]
    assert list(ev["stream"]) == [0, 0, 1, 1] and list(ev["dep"]) == [-1, -1, -1, 0]
    assert list(ev["file"]) == [3, 4, -1, -1] and list(ev["kind"]) == list(rec["kind"])
    assert (ev["off"] == 8192).all() and (ev["len"] == 8192).all() and (ev["nudge_ns"] == 0).all()


def records(rows: list[tuple]) -> np.ndarray:
    """Trace records of (kind, op, flags, tid, submit, end, offset, len, aux, complete), one process."""
    rec = np.zeros(len(rows), dtype=trace.RECORD)
    for i, (kind, op, flags, tid, submit, end, offset, length, aux, complete) in enumerate(rows):
        rec[i] = 0
        rec["kind"][i], rec["op"][i], rec["flags"][i], rec["tid"][i] = kind, op, flags, tid
        rec["submit_ns"][i], rec["start_ns"][i], rec["end_ns"][i], rec["complete_ns"][i] = submit, submit, end, complete
        rec["offset"][i], rec["len"][i], rec["aux"][i] = offset, length, aux
    rec["pid"], rec["file"] = 7, [0 if k == trace.CALL else -1 for k in rec["kind"]]
    return rec


CALL, SYNC, WAKE, SLEEP = trace.CALL, trace.SYNC, trace.WAKE, trace.SLEEP
FUTEX, COND, AIO = trace.SYNC_FUTEX, trace.SYNC_COND, trace.SYNC_AIO


def test_a_pool_workers_tasks_are_streams_of_their_own_and_a_buffered_reap_waits_for_its_call():
    """Thread 2 (a pool worker) reaps a buffered read thread 1 made at once in io_submit (an ordinary
    call: the reap names its end), then wakes thread 1's futex (a page latch: the read's, so thread 1
    waits for it whoever held it); later a timer (thread 3) signals the worker, whose task then wakes
    thread 1 again (a lock the task held: guarded by the task's wake)."""
    rec = records([
        (CALL, trace.READ, 0, 1, 100, 900, 0, 16384, 0, 900),        # 0: the read, done at once
        (SYNC, SLEEP, FUTEX, 1, 950, 2000, 0xA0, 1, 1, 2000),        # 1: thread 1 waits on the page's latch
        (SYNC, SLEEP, AIO, 2, 50, 1000, 0xC0, 1, 0, 900),            # 2: the worker's reap: the read's end
        (SYNC, WAKE, FUTEX, 2, 1500, 1510, 0xA0, 1, 1, 1510),        # 3: it releases the latch
        (SYNC, WAKE, COND, 3, 3000, 3010, 0xB0, 0, 1, 3010),         # 4: the timer signals the worker
        (SYNC, SLEEP, COND, 2, 1600, 3100, 0xB0, 1, 1, 3100),        # 5: the worker's wait for a task
        (SYNC, SLEEP, FUTEX, 1, 3050, 3300, 0xA8, 1, 1, 3300),       # 6: thread 1 waits on a lock
        (SYNC, WAKE, FUTEX, 2, 3200, 3210, 0xA8, 1, 1, 3210),        # 7: the task releases it
    ])
    rec = rec[np.argsort(rec["submit_ns"], kind="stable")]
    s = events.prepare(rec, pooled={2})
    ev, recs = s.events, s.records
    at = {(int(r["tid"]), int(r["submit_ns"])): i for i, r in enumerate(recs)}
    # the worker's two tasks (from each of its sleeps on) are two streams; thread 1 is one
    assert len({int(ev["stream"][i]) for i in (at[2, 50], at[2, 1500])}) == 1
    assert ev["stream"][at[2, 1600]] != ev["stream"][at[2, 50]]
    assert ev["stream"][at[2, 3200]] == ev["stream"][at[2, 1600]]
    # the reap waits for the read thread 1 made at once; the latch's sleeper for the latch's wake,
    # whoever held it (the waker had just reaped an I/O); the lock's sleeper only if the task had begun
    assert ev["dep"][at[2, 50]] == at[1, 100]
    assert ev["dep"][at[1, 950]] == at[2, 1500] and ev["guard"][at[1, 950]] == -1
    assert ev["dep"][at[2, 1600]] == at[3, 3000] and ev["guard"][at[2, 1600]] == -1  # a condition variable's
    assert ev["dep"][at[1, 3050]] == at[2, 3200] and ev["guard"][at[1, 3050]] == at[2, 1600]
    # a private futex is its process's own: the same address in another process is another futex
    other = rec.copy()
    other["pid"][other["tid"] == 2] = 8
    o = events.prepare(other[np.argsort(other["submit_ns"], kind="stable")])
    assert (o.events["dep"][(o.records["flags"] & FUTEX) != 0] == -1).all()


def test_a_wait_that_timed_out_is_a_timers_and_cuts_a_pool_workers_task():
    """A pool worker (thread 2) waits on its queue's condition variable with a timeout, and the wait times
    out (len 0: nobody woke it) though thread 1 signalled the same variable meanwhile (for another
    waiter); it then runs a task that wakes thread 1's futex. The timed-out wait is tied to nothing, and
    the task after it is a stream of its own: the worker's gap is a sleep, not work kept at its pace
    (a MariaDB TPC-C's worker slept 3.1 s so, which a replay on flash kept as CPU time)."""
    rec = records([
        (SYNC, SLEEP, COND, 2, 100, 3100, 0xB0, 0, 1, 3100),         # 0: the worker's wait, timed out
        (SYNC, WAKE, COND, 1, 2000, 2010, 0xB0, 0, 1, 2010),         # 1: a signal of the same variable
        (SYNC, SLEEP, FUTEX, 1, 2500, 3300, 0xA0, 1, 1, 3300),       # 2: thread 1 waits on a lock
        (SYNC, WAKE, FUTEX, 2, 3200, 3210, 0xA0, 1, 1, 3210),        # 3: the task releases it
    ])
    s = events.prepare(rec, pooled={2})
    sleep = np.flatnonzero((s.records["op"] == SLEEP) & ((s.records["flags"] & COND) != 0))
    (woken,) = np.flatnonzero((s.records["op"] == SLEEP) & ((s.records["flags"] & FUTEX) != 0))
    assert s.events["dep"][sleep].tolist() == [-1]
    (release,) = np.flatnonzero((s.records["op"] == WAKE) & ((s.records["flags"] & FUTEX) != 0))
    assert s.events["dep"][woken] == release
    assert s.events["stream"][sleep[0]] == s.events["stream"][release]  # the task begins at the wait's end
    # the same wait woken (len 1) would be the signal's
    rec["len"][0] = 1
    w = events.prepare(rec, pooled={2})
    (signal,) = np.flatnonzero((w.records["op"] == WAKE) & ((w.records["flags"] & COND) != 0))
    assert w.events["dep"][sleep].tolist() == [signal]
