"""Waits between threads that a program makes on its own futexes (MariaDB's locks and its group
commit: syscall(SYS_futex), which the interposer sees) and on condition variables (its row locks,
its thread pool's task queue) are traced as a sleep and the wake that ended it, and a replay ties the
two: the waiting thread goes on when the thread that woke it gets there, so that a slower device for
the waker's I/O delays the waiter too."""

import numpy as np
import pytest

from tests.conftest import compiled, dbtier

#: a waiter sleeps on a futex word of its process (or a condition variable) until the main thread, after
#: an fsync'd write on the emulated device, sets it and wakes it (signals it); ROUNDS times. The main
#: thread wakes it only once /proc says it is asleep (a wake that finds nobody asleep is not recorded).
PROGRAM = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 6
static _Atomic int word;
static int use_cond;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static _Atomic int waiter_tid;

/* whether the waiter is asleep (in its wait: it does nothing else), so that every wake finds it so */
static int waiter_asleep(void) {
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", atomic_load(&waiter_tid));
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = 0;
    char *end = strrchr(stat, ')');
    return end && end[1] == ' ' && end[2] == 'S';
}

static void *waiter(void *arg) {
    (void)arg;
    atomic_store(&waiter_tid, (int)syscall(SYS_gettid));
    for (int round = 1; round <= ROUNDS; round++) {
        if (use_cond) {
            pthread_mutex_lock(&mu);
            while (atomic_load(&word) < round) pthread_cond_wait(&cv, &mu);
            pthread_mutex_unlock(&mu);
        } else {
            while (atomic_load(&word) < round)
                syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, round - 1, NULL, NULL, 0);
        }
    }
    return NULL;
}

/* waits nobody ends: a condition variable's and a futex's, each timing out after 20 ms */
static int time_out(void) {
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at);
    at.tv_nsec += 20 * 1000 * 1000;
    if (at.tv_nsec >= 1000000000) at.tv_sec++, at.tv_nsec -= 1000000000;
    pthread_mutex_lock(&mu);
    int r = pthread_cond_timedwait(&cv, &mu, &at);
    pthread_mutex_unlock(&mu);
    struct timespec rel = {0, 20 * 1000 * 1000};
    long f = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &rel, NULL, 0);
    printf("%p %p\n", (void *)&cv, (void *)&word);
    return r == ETIMEDOUT && f == -1 ? 0 : 6;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    if (strcmp(argv[2], "timeout") == 0) return time_out();
    use_cond = strcmp(argv[2], "cond") == 0;
    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0600);
    if (fd < 0) return 3;
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    char page[8192] = {1};
    struct timespec pause = {0, 30 * 1000 * 1000};
    for (int round = 1; round <= ROUNDS; round++) {
        nanosleep(&pause, NULL);
        if (pwrite(fd, page, sizeof page, (off_t)round * 65536) != sizeof page || fdatasync(fd) != 0) return 4;
        struct timespec tick = {0, 1000 * 1000};
        while (!waiter_asleep()) nanosleep(&tick, NULL);
        if (use_cond) {
            pthread_mutex_lock(&mu);
            atomic_store(&word, round);
            pthread_cond_signal(&cv);
            pthread_mutex_unlock(&mu);
        } else {
            atomic_store(&word, round);
            syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        }
    }
    pthread_join(t, NULL);
    printf("%p\n", use_cond ? (void *)&cv : (void *)&word);
    return close(fd) == 0 ? 0 : 5;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    program, proc = compiled(tmp_path_factory.mktemp("futex"), "waits", PROGRAM, "-pthread")
    assert proc.returncode == 0, proc.stderr
    return program


@pytest.mark.parametrize("kind", ["futex", "cond"])
def test_a_wait_between_threads_is_traced_and_tied_to_the_wake_that_ended_it(program, shm_dir, tmp_path, kind):
    import pyarrow.parquet as pq

    from dbtier.measure import trace
    from dbtier.prediction import events

    def traced_run(attempt: int):
        traced = tmp_path / f"trace-{attempt}"
        proc = dbtier("exec", "-q", "--trace", str(traced), "-d", f"d=hdd-sata-7200:{shm_dir}", "--",
                      str(program), str(shm_dir / "f"), kind)
        assert proc.returncode == 0, proc.stderr
        out = tmp_path / f"t-{attempt}.parquet"
        assert dbtier("trace", "-q", "-o", str(out), str(traced)).returncode == 0
        return int(proc.stdout.split()[-1], 16), trace.from_table(pq.read_table(out))

    def woken_in_time(recs) -> bool:
        """Whether any sleep ended within the tie's window of its round's wake (else the host held the
        waiter back each time, and there is no tie to check); a run whose sleeps and wakes do not pair
        is checked (and fails) below."""
        sync = recs[(recs["kind"] == trace.SYNC) & ((recs["flags"] & flag) != 0)]
        ends, wakes = sync["end_ns"][sync["op"] == trace.SLEEP], sync["submit_ns"][sync["op"] == trace.WAKE]
        return len(ends) != len(wakes) or bool(((ends.astype(np.int64) - wakes.astype(np.int64))
                                                <= events.WAKE_WINDOW_NS).any())

    flag = trace.SYNC_FUTEX if kind == "futex" else trace.SYNC_COND
    for attempt in range(3):
        address, recs = traced_run(attempt)
        if woken_in_time(recs):
            break
    else:
        pytest.skip(f"in each of 3 runs every waiter woke more than {events.WAKE_WINDOW_NS / 1e6:g} ms after its "
                    "wake: this host is too loaded to check the tie now")
    sync = recs[(recs["kind"] == trace.SYNC) & ((recs["flags"] & flag) != 0)]
    sleeps, wakes = sync[sync["op"] == trace.SLEEP], sync[sync["op"] == trace.WAKE]
    # every wake woke the waiter, asleep since before the main thread's write (30 ms of pause, then a
    # disk's fsync): six of each, all on the program's own word (condition variable), marked as its own
    assert len(wakes) == 6 and len(sleeps) == 6, (len(wakes), len(sleeps))
    assert set(sync["offset"]) == {address} and set(sync["aux"]) == {1}
    assert set(wakes["len"]) == ({1} if kind == "futex" else {0})  # a futex's wake says whom it woke; a signal does not
    main_tid, waiter_tid = int(wakes["tid"][0]), int(sleeps["tid"][0])
    assert main_tid != waiter_tid and set(wakes["tid"]) == {main_tid} and set(sleeps["tid"]) == {waiter_tid}
    assert (sleeps["end_ns"] >= wakes["submit_ns"]).all() and (sleeps["submit_ns"] < wakes["submit_ns"]).all()

    # the replay's streams: each sleep depends on the wake that ended it (its round's, on the main thread's
    # stream), if it woke within events.WAKE_WINDOW_NS of it; one that woke later (a loaded host: three
    # test modules at once held one waiter back past it once) keeps its recorded length
    calls_and_syncs = recs[recs["kind"] != trace.REQUEST]
    streams = events.prepare(calls_and_syncs)
    ev, rec = streams.events, streams.records
    slept = np.flatnonzero((ev["kind"] == trace.SYNC) & (ev["op"] == trace.SLEEP) & ((rec["flags"] & flag) != 0))
    woke = np.flatnonzero((ev["kind"] == trace.SYNC) & (ev["op"] == trace.WAKE) & ((rec["flags"] & flag) != 0))
    assert len(slept) == len(woke) == 6
    for sleep, wake in zip(slept, woke):  # each in time order, a round's sleep and wake
        in_time = int(rec["end_ns"][sleep]) - int(rec["submit_ns"][wake]) <= events.WAKE_WINDOW_NS
        assert ev["dep"][sleep] == (wake if in_time else -1), (sleep, wake, ev["dep"][sleep])
    assert (ev["dep"][slept] >= 0).any()


def test_a_wait_that_timed_out_is_traced_as_a_timers(program, shm_dir, tmp_path):
    """A condition variable's timed wait and a futex's that time out (20 ms each) are sleeps nobody
    ended: traced with len 0, so that a replay keeps their length and a pool worker's next task begins
    at their end (events.py)."""
    import pyarrow.parquet as pq

    from dbtier.measure import trace

    traced = tmp_path / "trace"
    proc = dbtier("exec", "-q", "--trace", str(traced), "-d", f"d=hdd-sata-7200:{shm_dir}", "--",
                  str(program), str(shm_dir / "f"), "timeout")
    assert proc.returncode == 0, proc.stderr
    cond, word = (int(x, 16) for x in proc.stdout.split()[-2:])
    out = tmp_path / "t.parquet"
    assert dbtier("trace", "-q", "-o", str(out), str(traced)).returncode == 0
    recs = trace.from_table(pq.read_table(out))
    sleeps = recs[(recs["kind"] == trace.SYNC) & (recs["op"] == trace.SLEEP)]
    for flag, address in ((trace.SYNC_COND, cond), (trace.SYNC_FUTEX, word)):
        (s,) = sleeps[(sleeps["flags"] & flag) != 0]
        assert s["offset"] == address and s["len"] == 0 and s["aux"] == 1
        assert s["end_ns"] - s["submit_ns"] >= 19_000_000, s  # it slept its 20 ms
