/* The offline replay (replay.c) drives the emulation core as the interposer does.
 *
 * 1. Same requests live and offline: a sequence of calls (buffered and direct reads and writes,
 *    fsync, fadvise, truncate, on two files of a disk with a page cache) is emulated call by call as
 *    the interposer would (each call when the previous one returned plus a gap), its device
 *    requests collected; the same calls, as recorded events, are replayed on a fresh state with the
 *    same file layout. Every device request must be the same: op, file, offset, length, arrival,
 *    start and completion.
 * 2. A hand-computed replay: process A reads (direct) then wakes B; B slept until A's wake. On a RAM
 *    device of latency L, B's last call ends at a time worked out by hand; with 2L, later by the
 *    two reads' difference only (B's wait follows A's read; the recorded gaps stay).
 *
 * 4. A queueing drive, hand-computed (see ncq_reorders).
 * 5. Bounds: a call beyond what one call moves or beyond the largest file, or with reversed times,
 *    is refused before anything is replayed; a replay whose cancel flag is set stops early (-2).
 * 6. A replay that places the calls itself: each on its file's device in the state's layout, its
 *    recorded lateness kept only where it stays on a device that keeps its profile.
 * 7. Per-object I/O: counted in arrival order whatever order it comes in, the files in the order first
 *    met; a replay counts what its requests and its page-cache hits say.
 * 8. No events replay as nothing; hundreds of processes each replay.
 * 9. Asynchronous calls (libaio), hand-computed as test_aioq's queues: 32 reads submitted together on
 *    4 flash channels complete as the channels and the interface serve them, their process never held,
 *    and the reap that waited for the last (another thread) ends at its completion plus the time the
 *    recorded reap took after it; on a queueing drive, three reaps end at R0's, the near one's and
 *    the far one's completions, the drive choosing while the submitter went on.
 *
 *   test_replay [WORKDIR]  (default: a fresh folder under /tmp, removed at the end) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "dev_hdd.h"
#include "devmodel.h"
#include "emulate.h"
#include "objio.h"
#include "replay.h"
#include "state.h"
#include "workdir.h"

static const struct test_device RAM = {"ram", "ram", "/nonexistent/ram", {{0}}};

struct reqs {
    struct dbt_request_event ev[4096];
    int n;
};

static void collect(void *ctx, const struct dbt_request_event *ev) {
    struct reqs *r = ctx;
    if (r->n < 4096) r->ev[r->n++] = *ev;
}

#define NCALLS 400

static void same_requests_live_and_offline(void) {
    const struct test_device disk = {"disk", "hdd", "/nonexistent/disk", {{0}}};
    const struct dbt_pc_config pc = {1048576, 128, 10, 20, 0};
    struct dbt_state *live = make_state("live", disk, &pc);
    int64_t files[2];
    files[0] = dbt_state_file_index(live, 0, 1, 100, "/nonexistent/disk/base/5/16384", 4 << 20);
    files[1] = dbt_state_file_index(live, 0, 1, 101, "/nonexistent/disk/pg_wal/000000010000000000000001", 0);
    CHECK(files[0] >= 0 && files[1] >= 0, "files registered: %lld %lld", (long long)files[0], (long long)files[1]);

    /* the program's calls, made live: each when the previous returned plus a gap */
    static struct dbt_replay_event ev[NCALLS];
    struct reqs *live_reqs = calloc(1, sizeof *live_reqs);
    struct dbt_emulate_hooks hooks = {collect, NULL, live_reqs};
    uint64_t t = 1000000000ull, x = 42;
    for (int i = 0; i < NCALLS; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int which = (int)((x >> 33) % 10);
        struct dbt_call c = {t, t, 0, 8192, 4u << 20, files[0], 0, DBT_TOP_READ, 0, 0};
        if (which < 4) {
            c.off = ((x >> 40) % 512) * 8192; /* random buffered read */
        } else if (which < 6) {
            c.off = (uint64_t)(i % 512) * 8192; /* sequential reads: read-ahead */
        } else if (which == 6) {
            c.op = DBT_TOP_WRITE, c.file = files[1], c.off = (uint64_t)i * 8192; /* WAL write, then its flush */
        } else if (which == 7) {
            c.op = DBT_TOP_FLUSH, c.file = files[1], c.len = 0;
        } else if (which == 8) {
            c.op = DBT_TOP_READ, c.flags = DBT_TF_DIRECT, c.off = ((x >> 20) % 512) * 8192;
        } else {
            c.op = DBT_TOP_ADVISE, c.aux = POSIX_FADV_DONTNEED, c.off = 0, c.len = 1 << 20;
        }
        c.host_end = t + 3000; /* the host's call took 3 us */
        struct dbt_outcome o;
        dbt_emulate(live, &c, &hooks, &o);
        uint64_t end = c.host_end;
        if (o.wait && o.complete > end) end = o.complete;
        end += 700; /* woke 0.7 us late */
        ev[i] = (struct dbt_replay_event){.t0 = t, .t1 = end, .host_ns = 3000, .late_ns = 700, .off = c.off,
                                          .len = c.len, .file_size = c.file_size, .file = c.file, .dep = -1,
                                          .guard = -1, .aux = c.aux, .kind = DBT_TK_CALL, .op = c.op,
                                          .flags = c.flags};
        t = end + 20000 + (x % 50000); /* the process's own CPU time before its next call */
    }

    /* offline: a fresh state, the files laid out where the live run put them */
    struct dbt_state *off = make_state("offline", disk, &pc);
    for (int f = 0; f < 2; f++) {
        dbt_state_put_file(off, files[f], 0, dbt_files(live)[files[f]].dsync_scope);
        for (uint64_t c = 0; c < 4; c++)
            CHECK(dbt_state_put_chunk(off, 0, files[f], c, dbt_state_addr(live, 0, files[f], c * DBT_CHUNK_BYTES)) == 0,
                  "chunk placed");
    }
    static uint64_t start[NCALLS], end[NCALLS];
    struct dbt_replay_result res = {start, end, NULL, NULL, 0};
    char err[256];
    CHECK(dbt_replay(off, ev, NCALLS, ev[0].t0, ev[0].t0, 1.0, NULL, &res, err, sizeof err) == 0, "replay: %s", err);
    CHECK(res.nrequests == (uint64_t)live_reqs->n, "requests: %llu offline, %d live",
          (unsigned long long)res.nrequests, live_reqs->n);
    int differ = 0;
    for (int i = 0; i < live_reqs->n && (uint64_t)i < res.nrequests; i++) {
        const struct dbt_request_event *a = &live_reqs->ev[i], *b = &res.requests[i].ev;
        if (a->op != b->op || a->file != b->file || a->off != b->off || a->len != b->len ||
            a->arrival != b->arrival || a->start != b->start || a->complete != b->complete || a->flags != b->flags) {
            if (!differ++)
                printf("request %d: live op %u file %lld off %llu len %llu at %llu..%llu; offline op %u file %lld "
                       "off %llu len %llu at %llu..%llu\n", i, a->op, (long long)a->file, (unsigned long long)a->off,
                       (unsigned long long)a->len, (unsigned long long)a->arrival, (unsigned long long)a->complete,
                       b->op, (long long)b->file, (unsigned long long)b->off, (unsigned long long)b->len,
                       (unsigned long long)b->arrival, (unsigned long long)b->complete);
        }
    }
    CHECK(differ == 0, "%d device requests differ between live and offline", differ);
    for (int i = 0; i < NCALLS; i++) CHECK(start[i] == ev[i].t0 && end[i] == ev[i].t1, "call %d keeps its times", i);
    CHECK(live_reqs->n > NCALLS / 4, "the sequence reached the device (%d requests)", live_reqs->n);
    free(res.requests);

    /* again on a fresh state, counting per object as it runs: what the requests say, file by file */
    struct dbt_state *again = make_state("objects", disk, &pc);
    for (int f = 0; f < 2; f++) {
        dbt_state_put_file(again, files[f], 0, dbt_files(live)[files[f]].dsync_scope);
        for (uint64_t c = 0; c < 4; c++)
            (void)dbt_state_put_chunk(again, 0, files[f], c, dbt_state_addr(live, 0, files[f], c * DBT_CHUNK_BYTES));
    }
    static uint8_t flags[NCALLS];
    struct dbt_objio *o = dbt_objio_new();
    struct dbt_replay_options opt = {0, 0, 0, o};
    struct dbt_replay_result counted = {start, end, flags, NULL, 0};
    CHECK(dbt_replay_with(again, ev, NCALLS, ev[0].t0, ev[0].t0, 1.0, &opt, NULL, &counted, err, sizeof err) == 0 &&
          !counted.requests, "replay counting per object (no requests kept): %s", err);
    struct dbt_objio_row rows[4];
    uint64_t nrows = dbt_objio_rows(o, rows, 4);
    CHECK(nrows == 2 && rows[0].file == live_reqs->ev[0].file, "one row per file, the first requested first (%llu)",
          (unsigned long long)nrows);
    for (uint64_t r = 0; r < nrows && r < 4; r++) {
        struct dbt_objio_row want = {rows[r].file, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        uint64_t last_end = UINT64_MAX, last_arrival = 0;
        for (int i = 0; i < live_reqs->n; i++) { /* a single process: its requests arrive in order */
            const struct dbt_request_event *q = &live_reqs->ev[i];
            if (q->file != want.file) continue;
            want.reads += q->op == DBT_OP_READ, want.writes += q->op == DBT_OP_WRITE;
            want.flushes += q->op == DBT_OP_FLUSH;
            want.read_bytes += q->op == DBT_OP_READ ? q->len : 0, want.write_bytes += q->op == DBT_OP_WRITE ? q->len : 0;
            want.device_ns += q->complete - q->arrival;
            if (q->op == DBT_OP_FLUSH) continue;
            want.async += (q->flags & DBT_TF_ASYNC) != 0;
            CHECK(q->arrival >= last_arrival, "request %d arrives in order", i);
            want.sequential += q->off == last_end;
            last_end = q->off + q->len, last_arrival = q->arrival;
        }
        for (int i = 0; i < NCALLS; i++)
            want.cached_reads += ev[i].file == want.file && ev[i].op == DBT_TOP_READ && (flags[i] & DBT_TF_PAGE_CACHE);
        CHECK(rows[r].reads == want.reads && rows[r].read_bytes == want.read_bytes && rows[r].writes == want.writes &&
              rows[r].write_bytes == want.write_bytes && rows[r].flushes == want.flushes &&
              rows[r].async == want.async && rows[r].sequential == want.sequential &&
              rows[r].device_ns == want.device_ns && rows[r].cached_reads == want.cached_reads && rows[r].dev == 0,
              "file %lld: counted %llu reads %llu writes %llu flushes %llu cached %llu sequential, the requests say "
              "%llu %llu %llu %llu %llu", (long long)want.file, (unsigned long long)rows[r].reads,
              (unsigned long long)rows[r].writes, (unsigned long long)rows[r].flushes,
              (unsigned long long)rows[r].cached_reads, (unsigned long long)rows[r].sequential,
              (unsigned long long)want.reads, (unsigned long long)want.writes, (unsigned long long)want.flushes,
              (unsigned long long)want.cached_reads, (unsigned long long)want.sequential);
        CHECK(want.file != files[0] || (want.cached_reads && want.sequential && want.async),
              "the data file's reads hit the page cache, run on and read ahead");
    }
    dbt_objio_free(o);
    free(live_reqs);
    munmap(again, again->size);
    munmap(live, live->size);
    munmap(off, off->size);
}

/* The completion of one 8 KiB read on a fresh RAM device of this latency, from the model itself. */
static uint64_t ram_read_ns(double latency_us) {
    struct dbt_params p;
    dbt_params_defaults(&p, DBT_KIND_RAM);
    p.k.ram.latency_us = latency_us;
    struct dbt_model_state m;
    dbt_model_init(&m, DBT_KIND_RAM, &p);
    struct dbt_request rq = {0, 0, 8192, DBT_OP_READ};
    struct dbt_result r;
    dbt_model_submit(&m, &rq, &r);
    return r.complete_ns;
}

static uint64_t b_finishes(double latency_us) {
    struct test_device ram = {"ram", "ram", "/nonexistent/ram", {{"latency_us", latency_us}}};
    struct dbt_state *s = make_state(latency_us < 200 ? "ram1" : "ram2", ram, NULL);
    dbt_state_put_file(s, 0, 0, 0);
    const uint64_t T = 5000000; /* recorded: A reads 100 us, wakes B 10 us later; B wakes 30 us after that */
    struct dbt_replay_event ev[4] = {
        /* A (stream 0): a direct read, then the wake */
        {T, T + 100000, 0, 0, 0, 0, 8192, UINT64_MAX, 0, -1, -1, 0, 0, DBT_TK_CALL, DBT_TOP_READ, 0, DBT_TF_DIRECT, 0},
        {T + 110000, T + 111000, 0, 0, 0, 0, 0, 0, -1, -1, -1, 0, 0, DBT_TK_SYNC, DBT_SYNC_WAKE, 0, DBT_SF_KILL, 0},
        /* B (stream 1): asleep from T until A's wake ended it, then 5 us of CPU, then its own read */
        {T, T + 140000, 0, 0, 0, 0, 0, 0, -1, 1, -1, 1, 0, DBT_TK_SYNC, DBT_SYNC_SLEEP, 0, DBT_SF_EPOLL, 0},
        {T + 145000, T + 245000, 0, 0, 0, 8192, 8192, UINT64_MAX, 0, -1, -1, 1, 0, DBT_TK_CALL, DBT_TOP_READ, 0,
         DBT_TF_DIRECT, 0},
    };
    uint64_t start[4], end[4];
    struct dbt_replay_result res = {start, end, NULL, NULL, 0};
    char err[256];
    int rc = dbt_replay(s, ev, 4, T, T, 1.0, NULL, &res, err, sizeof err);
    CHECK(rc == 0, "replay: %s", err);
    free(res.requests);
    munmap(s, s->size);
    return end[3];
}

static void hand_computed(void) {
    const uint64_t T = 5000000;
    for (double lat = 50; lat <= 400; lat *= 8) {
        uint64_t L = ram_read_ns(lat);
        /* A: read [T, T+L]; wake at +10 us; B: up 30 us after the wake, 5 us of CPU, its read takes L */
        uint64_t expected = T + L + 10000 + 30000 + 5000 + L;
        uint64_t got = b_finishes(lat);
        CHECK(got == expected, "latency %g us: B ends at %llu, by hand %llu", lat, (unsigned long long)got,
              (unsigned long long)expected);
    }
    CHECK(b_finishes(400) - b_finishes(50) == 2 * (ram_read_ns(400) - ram_read_ns(50)),
          "a slower device delays B by its two reads' difference: B's wait follows A's read");
}

static void refuses_bad_events(void) {
    struct dbt_state *s = make_state("bad", RAM, NULL);
    struct dbt_replay_event ev[2] = {
        {0, 10, 0, 0, 0, 0, 0, 0, -1, 1, -1, 0, 0, DBT_TK_SYNC, DBT_SYNC_SLEEP, 0, DBT_SF_EPOLL, 0},
        {0, 10, 0, 0, 0, 0, 0, 0, -1, -1, -1, 1, 0, DBT_TK_SYNC, DBT_SYNC_SLEEP, 0, DBT_SF_EPOLL, 0},
    };
    uint64_t start[2], end[2];
    struct dbt_replay_result res = {start, end, NULL, NULL, 0};
    char err[256] = "";
    CHECK(dbt_replay(s, ev, 2, 0, 0, 1.0, NULL, &res, err, sizeof err) != 0 && strstr(err, "neither another process's wake"),
          "a sleep tied to something not a wake is refused: %s", err);
    ev[0].dep = -1;
    ev[0].kind = DBT_TK_CALL, ev[0].dev = 3;
    CHECK(dbt_replay(s, ev, 2, 0, 0, 1.0, NULL, &res, err, sizeof err) != 0 && strstr(err, "names device 3"),
          "a call on a device the replay lacks is refused: %s", err);
    munmap(s, s->size);
}

static void refuses_unbounded_events(void) {
    struct dbt_state *s = make_state("bounds", RAM, NULL);
    dbt_state_put_file(s, 0, 0, 0);
    struct dbt_replay_event ok = {0, 10, 0, 0, 0, 0, 8192, UINT64_MAX, 0, -1, -1, 0, 0, DBT_TK_CALL, DBT_TOP_READ, 0,
                                  DBT_TF_DIRECT, 0};
    struct {
        const char *what, *expect;
        struct dbt_replay_event ev;
    } cases[7];
    for (int k = 0; k < 7; k++) cases[k].ev = ok;
    cases[0].what = "a write of 1 GiB and a byte", cases[0].expect = "more bytes than one call moves";
    cases[0].ev.len = DBT_REPLAY_MAX_LEN + 1, cases[0].ev.op = DBT_TOP_WRITE;
    cases[6].what = "a read of 16 MiB and a page", cases[6].expect = "more bytes than one read moves";
    cases[6].ev.len = DBT_REPLAY_MAX_READ + 4096;
    cases[1].what = "a call at offset 2^63", cases[1].expect = "beyond the largest file";
    cases[1].ev.off = 1ull << 63;
    cases[2].what = "a call ending past 2^48", cases[2].expect = "beyond the largest file";
    cases[2].ev.off = DBT_REPLAY_MAX_END - 4096;
    cases[3].what = "a call that ended before it began", cases[3].expect = "out of range or reversed";
    cases[3].ev.t0 = 100, cases[3].ev.t1 = 10;
    cases[4].what = "an unknown operation", cases[4].expect = "an unknown operation";
    cases[4].ev.op = 99;
    cases[5].what = "a file index beyond the file table", cases[5].expect = "beyond the file table";
    cases[5].ev.file = (int64_t)DBT_FILE_CAP;
    uint64_t start[1], end[1];
    for (int k = 0; k < 7; k++) {
        struct dbt_replay_result res = {start, end, NULL, NULL, 0};
        char err[256] = "";
        int rc = dbt_replay(s, &cases[k].ev, 1, 0, 0, 1.0, NULL, &res, err, sizeof err);
        CHECK(rc == -1 && strstr(err, cases[k].expect) && !res.requests, "%s is refused: rc %d, %s", cases[k].what,
              rc, err);
    }
    struct dbt_replay_result res = {start, end, NULL, NULL, 0};
    char err[256] = "";
    CHECK(dbt_replay(s, &ok, 1, 0, 0, 1.0, NULL, &res, err, sizeof err) == 0, "the same call in bounds replays: %s",
          err);
    free(res.requests);
    munmap(s, s->size);
}

/* A RAM device with file 0 laid out on it. */
static struct dbt_state *ram_with_a_file(const char *name) {
    struct dbt_state *s = make_state(name, RAM, NULL);
    dbt_state_put_file(s, 0, 0, 0);
    return s;
}

/* A direct 8 KiB read of file 0 at off, by process `stream`, recorded from t0 to t1. */
static struct dbt_replay_event direct_read(uint64_t t0, uint64_t t1, uint64_t off, uint32_t stream) {
    return (struct dbt_replay_event){.t0 = t0, .t1 = t1, .off = off, .len = 8192, .file_size = UINT64_MAX,
                                     .dep = -1, .guard = -1, .stream = stream, .kind = DBT_TK_CALL,
                                     .op = DBT_TOP_READ, .flags = DBT_TF_DIRECT};
}

/* A long replay stops once its cancel flag is set (another thread sets it on Ctrl-C); unset, the same
 * events replay whole. */
static void cancel_stops_a_replay(void) {
    enum { N = 100000 };
    struct dbt_state *s = ram_with_a_file("cancel");
    static struct dbt_replay_event ev[N];
    static uint64_t start[N], end[N];
    for (uint64_t i = 0; i < N; i++) ev[i] = direct_read(1000 * i, 1000 * i + 500, 8192 * (i % 64), 0);
    atomic_int cancel = 1;
    struct dbt_replay_result res = {start, end, NULL, NULL, 0};
    char err[256] = "";
    int rc = dbt_replay(s, ev, N, 0, 0, 1.0, &cancel, &res, err, sizeof err);
    CHECK(rc == -2 && strstr(err, "interrupted") && !res.requests, "a cancelled replay returns -2: rc %d, %s", rc, err);
    atomic_store(&cancel, 0);
    rc = dbt_replay(s, ev, N, 0, 0, 1.0, &cancel, &res, err, sizeof err);
    CHECK(rc == 0 && res.nrequests == N, "not cancelled, every call is replayed: rc %d, %llu requests, %s", rc,
          (unsigned long long)res.nrequests, err);
    free(res.requests);
    munmap(s, s->size);
}

/* 3. Paced and merged writeback, hand-computed. A RAM device of 100 us and 100 MB/s (a 4 KiB page
 *    moves in 40,960 ns) under a 1,024-page cache whose flusher starts past 102 dirty pages and
 *    writes the oldest down to 51. 256 buffered 8 KiB writes, 1 us apart, cross that line at calls
 *    51 (pages 0-52 go), 77, 103, 129, 155, 181, 207 and 233 (the next 52 pages each). The first
 *    request's turn has come by call 77, so it is sent; the next six wait behind it in the block
 *    layer, and each joins the one before (contiguous), up to 312 pages (1,248 KiB: another 52
 *    would pass the 1,280 KiB cap); call 233's waits alone. A direct 8 KiB read at call 256's time
 *    waits only for the first one's transfer; the two merged requests follow it, each sent when the
 *    one before completed. Sent all at once, unpaced, the read waited for all of them (17 ms). */
static void writeback_is_paced(void) {
    const struct test_device ram = {"ram", "ram", "/nonexistent/ram", {{"latency_us", 100}, {"interface_mb_s", 100}}};
    const struct dbt_pc_config pc = {4194304, 128, 10, 90, 0};
    struct dbt_state *s = make_state("paced", ram, &pc);
    int64_t data = dbt_state_file_index(s, 0, 1, 200, "/nonexistent/ram/base/5/16385", 0);
    int64_t other = dbt_state_file_index(s, 0, 1, 201, "/nonexistent/ram/base/5/16386", 1 << 20);
    struct reqs *r = calloc(1, sizeof *r);
    struct dbt_emulate_hooks hooks = {collect, NULL, r};
    const uint64_t T0 = 1000000000ull, page_ns = 40960, lat = 100000;
    struct dbt_outcome o;
    for (int i = 0; i < 256; i++) {
        uint64_t t = T0 + (uint64_t)i * 1000;
        struct dbt_call c = {t, t, (uint64_t)i * 8192, 8192, UINT64_MAX, data, 0, DBT_TOP_WRITE, 0, 0};
        dbt_emulate(s, &c, &hooks, &o);
    }
    uint64_t q51 = T0 + 51 * 1000, w1_xfer_end = q51 + 53 * page_ns;
    CHECK(r->n == 1 && r->ev[0].op == DBT_OP_WRITE && r->ev[0].arrival == q51 && r->ev[0].len == 53 * 4096,
          "the first writeback went at its turn (%d requests sent)", r->n);
    CHECK(r->ev[0].complete == w1_xfer_end + lat, "it completed at %llu", (unsigned long long)r->ev[0].complete);
    CHECK(s->dev[0].pend_count == 2, "two merged requests wait (%u)", s->dev[0].pend_count);
    struct dbt_pending_write *w = &s->dev[0].pend[s->dev[0].pend_head];
    CHECK(w[0].off == 53 * 4096ull && w[0].len == 312 * 4096ull && w[0].queued == T0 + 77 * 1000,
          "the first waiting is pages 53-364, queued at call 77 (%llu + %llu)", (unsigned long long)w[0].off,
          (unsigned long long)w[0].len);
    uint64_t t = T0 + 256 * 1000;
    struct dbt_call rd = {t, t, 0, 8192, 1 << 20, other, 0, DBT_TOP_READ, 0, DBT_TF_DIRECT};
    dbt_emulate(s, &rd, &hooks, &o);
    CHECK(r->n == 2 && r->ev[1].op == DBT_OP_READ && o.complete == w1_xfer_end + 2 * page_ns,
          "the read waited for that transfer only: done at %llu, expected %llu", (unsigned long long)o.complete,
          (unsigned long long)(w1_xfer_end + 2 * page_ns));
    CHECK(s->dev[0].pend_count == 2, "two still wait (%u)", s->dev[0].pend_count);
    int n = r->n;
    dbt_emulate_settle(s);
    CHECK(r->n == n && s->dev[0].pend_count == 0, "a snapshot's settle sends the rest, reported to no call");
    CHECK(s->dev[0].c.writes == 3 && s->dev[0].c.write_bytes == 417 * 4096ull,
          "three writes of 417 pages counted (%llu, %llu)", (unsigned long long)s->dev[0].c.writes,
          (unsigned long long)s->dev[0].c.write_bytes);
    /* each was sent when the one before completed: the last completes 417 pages' transfers and three
     * latencies after call 51 (the read's transfer fitted in the first one's latency) */
    uint64_t last = q51 + 417 * page_ns + 3 * lat;
    CHECK(s->dev[0].last_ns == last, "the last writeback completed at %llu, expected %llu",
          (unsigned long long)s->dev[0].last_ns, (unsigned long long)last);
    free(r);
}


/* 4. Command queueing. An HDD (no read-ahead, no write cache) reads R0 at the start of the disk;
 *    while it does, R1 (far: 5 GB in) and then R2 (near: 10 MiB in) arrive. One command at a time,
 *    the drive serves R1 then R2; with a queue of 4 it chooses, when R0 ends, the one it reaches
 *    first: R2, then R1. Each completion is worked out from the model's own media access (seek,
 *    rotation, transfer) from where the head was. A flush arriving meanwhile is no queued command:
 *    it completes after both. The same three processes replayed offline get the same completions. */
static struct dbt_state *ncq_state(const char *name, int depth, int64_t *file) {
    struct test_device disk = {"disk", "hdd", "/nonexistent/ncq",
                               {{"capacity_gb", 10}, {"cache_mib", 0}, {"write_cache", 0}, {"queue_depth", depth}}};
    struct dbt_state *s = make_state(name, disk, NULL);
    *file = dbt_state_file_index(s, 0, 1, 300, "/nonexistent/ncq/base/5/16390", 6000ull << 20);
    return s;
}

static uint64_t media_from(const struct dbt_hdd_derived *d, uint64_t prev_end, uint64_t t, uint64_t addr) {
    return dbt_hdd_media(d, dbt_hdd_cyl_of(d, prev_end), t, addr, 8192, 0);
}

static void ncq_reorders(void) {
    const uint64_t T0 = 1000000000ull, FAR = 5000ull << 20, NEAR = 10ull << 20;
    for (int depth = 1; depth <= 4; depth += 3) {
        char name[32];
        snprintf(name, sizeof name, "ncq%d", depth);
        int64_t file;
        struct dbt_state *s = ncq_state(name, depth, &file);
        const struct dbt_hdd_derived *d = &s->dev[0].model.drive[0].u.hdd.d;
        uint64_t a0 = dbt_state_addr(s, 0, file, 0), a1 = dbt_state_addr(s, 0, file, FAR),
                 a2 = dbt_state_addr(s, 0, file, NEAR);
        CHECK(a0 == 0 && a1 == FAR && a2 == NEAR, "the file lies in order: %llu %llu %llu", (unsigned long long)a0,
              (unsigned long long)a1, (unsigned long long)a2);
        struct reqs *r = calloc(1, sizeof *r);
        struct dbt_emulate_hooks hooks = {collect, NULL, r};
        struct dbt_call c0 = {T0, T0, 0, 8192, UINT64_MAX, file, 0, DBT_TOP_READ, 0, DBT_TF_DIRECT};
        struct dbt_call c1 = {T0 + 1000, T0 + 1000, FAR, 8192, UINT64_MAX, file, 0, DBT_TOP_READ, 0, DBT_TF_DIRECT};
        struct dbt_call c2 = {T0 + 2000, T0 + 2000, NEAR, 8192, UINT64_MAX, file, 0, DBT_TOP_READ, 0, DBT_TF_DIRECT};
        struct dbt_outcome o0, o1, o2;
        dbt_emulate(s, &c0, &hooks, &o0);
        uint64_t done0 = media_from(d, 0, T0, 0);
        CHECK(o0.ticket == 0 && o0.complete == done0, "depth %d: R0 starts at once, done at %llu (expected %llu)",
              depth, (unsigned long long)o0.complete, (unsigned long long)done0);
        dbt_emulate(s, &c1, &hooks, &o1);
        dbt_emulate(s, &c2, &hooks, &o2);
        uint64_t first_done, second_done;
        if (depth == 1) {
            first_done = media_from(d, 8192, done0, FAR);
            second_done = media_from(d, FAR + 8192, first_done, NEAR);
        } else {
            first_done = media_from(d, 8192, done0, NEAR);
            second_done = media_from(d, NEAR + 8192, first_done, FAR);
        }
        if (depth == 1) { /* one command at a time: answered at once, in arrival order */
            CHECK(o1.ticket == 0 && o2.ticket == 0, "depth 1 answers at once");
            CHECK(o1.complete == first_done && o2.complete == second_done,
                  "depth 1: far %llu (expected %llu), near %llu (expected %llu)", (unsigned long long)o1.complete,
                  (unsigned long long)first_done, (unsigned long long)o2.complete, (unsigned long long)second_done);
        } else {
            CHECK(o1.ticket && o2.ticket && o1.complete == done0 && o2.complete == done0,
                  "depth 4: both wait for the choice when R0 ends (%llu, %llu; R0 %llu)",
                  (unsigned long long)o1.complete, (unsigned long long)o2.complete, (unsigned long long)done0);
            struct dbt_outcome early = o1;
            dbt_emulate_resume(s, &c1, &hooks, done0 - 1, &early);
            CHECK(early.ticket && early.complete == done0, "asked before the choice is due, it still waits");
            dbt_emulate_resume(s, &c1, &hooks, done0, &o1);
            dbt_emulate_resume(s, &c2, &hooks, done0, &o2);
            CHECK(o1.ticket && o1.complete == first_done && o2.ticket == 0,
                  "when R0 ends the drive starts the near one; the far one is chosen when that ends (%llu)",
                  (unsigned long long)o1.complete);
            dbt_emulate_resume(s, &c1, &hooks, o1.complete, &o1);
            CHECK(o1.ticket == 0, "then it is answered");
            CHECK(o2.complete == first_done && o1.complete == second_done,
                  "depth 4: near first %llu (expected %llu), far %llu (expected %llu)", (unsigned long long)o2.complete,
                  (unsigned long long)first_done, (unsigned long long)o1.complete, (unsigned long long)second_done);
            CHECK(s->dev[0].c.reordered == 1, "one request taken before an older one (%llu)",
                  (unsigned long long)s->dev[0].c.reordered);
            CHECK(s->dev[0].model.q_count == 0 && s->dev[0].model.q_waiting == 0, "the queue is empty");
        }
        CHECK(r->n == 3 && s->dev[0].c.reads == 3, "three requests reported and counted (%d)", r->n);
        uint64_t far_done = o1.complete, near_done = o2.complete;
        munmap(s, s->size);

        /* a flush while both wait: the drive finishes its queue first */
        s = ncq_state(name, depth, &file);
        d = &s->dev[0].model.drive[0].u.hdd.d;
        r->n = 0;
        dbt_emulate(s, &c0, &hooks, &o0);
        dbt_emulate(s, &c1, &hooks, &o1);
        dbt_emulate(s, &c2, &hooks, &o2);
        struct dbt_call fl = {T0 + 3000, T0 + 3000, 0, 0, UINT64_MAX, file, 0, DBT_TOP_FLUSH, 0, DBT_TF_DIRECT};
        struct dbt_outcome of;
        dbt_emulate(s, &fl, &hooks, &of);
        dbt_emulate_resume(s, &c1, &hooks, T0 + 3000, &o1);
        dbt_emulate_resume(s, &c2, &hooks, T0 + 3000, &o2);
        CHECK(o1.ticket == 0 && o2.ticket == 0 && o1.complete == far_done && o2.complete == near_done,
              "depth %d: the flush started both, in the drive's order", depth);
        CHECK(of.complete >= second_done, "depth %d: the flush completes after both (%llu, %llu)", depth,
              (unsigned long long)of.complete, (unsigned long long)second_done);
        munmap(s, s->size);

        /* offline: three processes, one call each */
        s = ncq_state(name, depth, &file);
        struct dbt_replay_event ev[3];
        const struct dbt_call *calls[3] = {&c0, &c1, &c2};
        memset(ev, 0, sizeof ev);
        for (int i = 0; i < 3; i++) {
            ev[i].t0 = ev[i].t1 = calls[i]->t0;
            ev[i].off = calls[i]->off, ev[i].len = 8192, ev[i].file_size = UINT64_MAX, ev[i].file = file;
            ev[i].dep = ev[i].guard = -1;
            ev[i].stream = (uint32_t)i, ev[i].kind = DBT_TK_CALL, ev[i].op = DBT_TOP_READ;
            ev[i].flags = DBT_TF_DIRECT;
        }
        uint64_t start[3], end[3];
        struct dbt_replay_result res = {start, end, NULL, NULL, 0};
        char err[256];
        CHECK(dbt_replay(s, ev, 3, 0, 0, 1.0, NULL, &res, err, sizeof err) == 0, "replayed: %s", err);
        CHECK(end[0] == done0 && end[1] == far_done && end[2] == near_done,
              "depth %d offline: %llu %llu %llu, live %llu %llu %llu", depth, (unsigned long long)end[0],
              (unsigned long long)end[1], (unsigned long long)end[2], (unsigned long long)done0,
              (unsigned long long)far_done, (unsigned long long)near_done);
        free(res.requests);
        munmap(s, s->size);
        free(r);
    }
}

/* A drive that takes one command at a time serves what it hears of in the order it hears: the far
 * read (made at T0 + 1,000) and the near one (T0 + 2,000), each from its own process while R0 runs.
 * Nudged, a call reaches the core later or earlier than its host call's return: the near one heard
 * first is served first, no process's own times moved. */
static uint64_t nudged_ends(int32_t far_nudge, int32_t near_nudge, uint64_t end[3]) {
    const uint64_t T0 = 1000000000ull, FAR = 5000ull << 20, NEAR = 10ull << 20;
    int64_t file;
    struct dbt_state *s = ncq_state("nudge", 1, &file);
    uint64_t at[3] = {T0, T0 + 1000, T0 + 2000}, off[3] = {0, FAR, NEAR};
    int32_t nudge[3] = {0, far_nudge, near_nudge};
    struct dbt_replay_event ev[3];
    memset(ev, 0, sizeof ev);
    for (int i = 0; i < 3; i++) {
        ev[i].t0 = ev[i].t1 = at[i];
        ev[i].host_ns = 100;
        ev[i].off = off[i], ev[i].len = 8192, ev[i].file_size = UINT64_MAX, ev[i].file = file;
        ev[i].dep = ev[i].guard = -1;
        ev[i].stream = (uint32_t)i, ev[i].kind = DBT_TK_CALL, ev[i].op = DBT_TOP_READ;
        ev[i].flags = DBT_TF_DIRECT, ev[i].nudge_ns = nudge[i];
    }
    uint64_t start[3];
    struct dbt_replay_result res = {start, end, NULL, NULL, 0};
    char err[256];
    CHECK(dbt_replay(s, ev, 3, 0, 0, 1.0, NULL, &res, err, sizeof err) == 0, "replayed: %s", err);
    CHECK(start[1] == at[1] && start[2] == at[2], "a nudge moves no process's start");
    free(res.requests);
    munmap(s, s->size);
    return end[0];
}

static void nudges_reorder(void) {
    const uint64_t FAR = 5000ull << 20, NEAR = 10ull << 20;
    int64_t file;
    struct dbt_state *s = ncq_state("nudge-model", 1, &file);
    const struct dbt_hdd_derived d = s->dev[0].model.drive[0].u.hdd.d;
    munmap(s, s->size);
    uint64_t end[3];
    uint64_t done0 = nudged_ends(0, 0, end);
    CHECK(done0 == media_from(&d, 0, 1000000000ull, 0), "R0 served at once (%llu)", (unsigned long long)done0);
    uint64_t far_first = media_from(&d, 8192, done0, FAR), then_near = media_from(&d, FAR + 8192, far_first, NEAR);
    uint64_t near_first = media_from(&d, 8192, done0, NEAR), then_far = media_from(&d, NEAR + 8192, near_first, FAR);
    CHECK(end[0] == done0 && end[1] == far_first && end[2] == then_near,
          "as recorded: far %llu (expected %llu), near %llu (expected %llu)", (unsigned long long)end[1],
          (unsigned long long)far_first, (unsigned long long)end[2], (unsigned long long)then_near);
    nudged_ends(2000, 0, end); /* the far one heard at T0 + 3,100, after the near one */
    CHECK(end[2] == near_first && end[1] == then_far, "far heard later: near %llu (expected %llu), far %llu "
          "(expected %llu)", (unsigned long long)end[2], (unsigned long long)near_first, (unsigned long long)end[1],
          (unsigned long long)then_far);
    nudged_ends(0, -1500, end); /* the near one heard at T0 + 600, before the far one */
    CHECK(end[2] == near_first && end[1] == then_far, "near heard earlier: near %llu, far %llu",
          (unsigned long long)end[2], (unsigned long long)end[1]);
    nudged_ends(-900, 0, end); /* the far one heard at T0 + 200: after R0, before the near one, as recorded */
    CHECK(end[1] == far_first && end[2] == then_near, "far heard earlier, the order kept: far %llu, near %llu",
          (unsigned long long)end[1], (unsigned long long)end[2]);
}

/* Two RAM devices, fast and slow; one process's direct read of file 0, recorded on the fast one and
 * returned 700 ns late. Placed by the replay: on the device the state lays the file out on, the late
 * part kept only where the call stays on its device and that device keeps its profile. */
static uint64_t placed_read_ends(int file_on, int place, uint32_t same, uint64_t *reads_on_slow) {
    const struct test_device two[2] = {{"fast", "ram", "/nonexistent/fast", {{"latency_us", 50}}},
                                       {"slow", "ram", "/nonexistent/slow", {{"latency_us", 400}}}};
    struct dbt_state *s = make_states("placed", two, 2, NULL);
    dbt_state_put_file(s, 0, file_on, 0);
    struct dbt_replay_event ev = {.t1 = 60000, .late_ns = 700, .len = 8192, .file_size = UINT64_MAX, .dep = -1,
                                  .guard = -1, .kind = DBT_TK_CALL, .op = DBT_TOP_READ, .flags = DBT_TF_DIRECT};
    uint64_t start[1], end[1];
    struct dbt_replay_options opt = {place, same, 1, NULL};
    struct dbt_replay_result res = {start, end, NULL, NULL, 0};
    char err[256] = "";
    CHECK(dbt_replay_with(s, &ev, 1, 0, 0, 1.0, &opt, NULL, &res, err, sizeof err) == 0, "replayed: %s", err);
    CHECK(res.nrequests == 1 && res.requests[0].ev.dev == (place ? file_on : 0), "the request went to device %u",
          res.nrequests ? res.requests[0].ev.dev : 99);
    *reads_on_slow = s->dev[1].c.reads;
    free(res.requests);
    munmap(s, s->size);
    return end[0];
}

static void places_calls(void) {
    uint64_t fast = ram_read_ns(50), slow = ram_read_ns(400), on_slow;
    CHECK(placed_read_ends(1, 1, 1u, &on_slow) == slow && on_slow == 1, "moved to the slow device: its read, no lateness");
    CHECK(placed_read_ends(0, 1, 1u, &on_slow) == fast + 700 && on_slow == 0, "kept where it was: its lateness too");
    CHECK(placed_read_ends(0, 1, 0u, &on_slow) == fast, "on a device given another profile: no lateness");
    CHECK(placed_read_ends(1, 0, 0u, &on_slow) == fast + 700 && on_slow == 0, "not placed: as the event says");
}

/* An interval with no events replays (nothing); one of many processes (more than the first guess of
 * how many streams there are) replays each. */
static void replays_nothing_and_many_processes(void) {
    enum { N = 300 };
    struct dbt_state *s = ram_with_a_file("many");
    static struct dbt_replay_event ev[N];
    uint64_t start[N], end[N];
    struct dbt_replay_result res = {start, end, NULL, NULL, 0};
    char err[256] = "";
    CHECK(dbt_replay(s, ev, 0, 0, 0, 1.0, NULL, &res, err, sizeof err) == 0 && res.nrequests == 0,
          "no events: nothing replayed (%s)", err);
    free(res.requests);
    for (uint32_t i = 0; i < N; i++) ev[i] = direct_read(1000, 2000, 8192 * (uint64_t)i, i);
    CHECK(dbt_replay(s, ev, N, 0, 0, 1.0, NULL, &res, err, sizeof err) == 0 && res.nrequests == N,
          "%d processes: each read replayed (%llu requests, %s)", N, (unsigned long long)res.nrequests, err);
    int late = 0;
    for (int i = 0; i < N; i++) late += start[i] != 1000 || end[i] <= start[i];
    CHECK(late == 0, "each process starts when it did and ends after (%d do not)", late);
    free(res.requests);
    munmap(s, s->size);
}

/* The counting rules on their own: a file's transfers in arrival order (ties as given), the files in
 * the order first met, each file's devices in order; a reset empties it. */
static void counts_per_object(void) {
    struct dbt_objio *o = dbt_objio_new();
    for (int round = 0; round < 2; round++) {
        /* given out of arrival order: in arrival order they run on from 0 to 32 KiB, 3 sequential (as
         * given 2, with the tie the other way round none) */
        const uint64_t arrival[4] = {30, 10, 20, 20}, off[4] = {24576, 0, 8192, 16384};
        dbt_objio_call(o, 7, 1, DBT_TOP_READ, DBT_TF_PAGE_CACHE, 0); /* a cached read, met first */
        for (int i = 0; i < 4; i++) {
            struct dbt_request_event q = {arrival[i], arrival[i], arrival[i] + 100, off[i], 8192, 7, DBT_OP_READ, 0,
                                          i == 0 ? DBT_TF_ASYNC : 0};
            dbt_objio_request(o, &q, (uint64_t)i + 1);
        }
        struct dbt_request_event flush = {40, 40, 90, 0, 0, 7, DBT_OP_FLUSH, 0, 0};
        dbt_objio_request(o, &flush, 5);
        dbt_objio_call(o, 9, 1, DBT_TOP_WRITE, DBT_TF_PAGE_CACHE, 6); /* a write: a row, nothing counted */
        dbt_objio_call(o, 7, 1, DBT_TOP_READ, 0, 7);                   /* a read that missed: not cached */
        struct dbt_objio_row r[3];
        CHECK(dbt_objio_rows(o, r, 3) == 3 && !dbt_objio_failed(o), "three rows");
        CHECK(r[0].file == 7 && r[0].dev == 0 && r[1].file == 7 && r[1].dev == 1 && r[2].file == 9,
              "file 7 first (on devices 0, 1), then 9: %lld/%u %lld/%u %lld/%u", (long long)r[0].file, r[0].dev,
              (long long)r[1].file, r[1].dev, (long long)r[2].file, r[2].dev);
        CHECK(r[0].reads == 4 && r[0].read_bytes == 4 * 8192 && r[0].flushes == 1 && r[0].async == 1 &&
              r[0].sequential == 3 && r[0].device_ns == 4 * 100 + 50 && r[0].cached_reads == 0,
              "file 7 on device 0: %llu reads, %llu sequential, %llu ns", (unsigned long long)r[0].reads,
              (unsigned long long)r[0].sequential, (unsigned long long)r[0].device_ns);
        CHECK(r[1].cached_reads == 1 && r[1].reads == 0 && r[2].writes == 0 && r[2].cached_reads == 0,
              "only a read the page cache served whole is a cached read");
        dbt_objio_reset(o);
        CHECK(dbt_objio_rows(o, r, 3) == 0, "a reset empties it");
    }
    dbt_objio_free(o);
}

static struct dbt_replay_event async_read(uint64_t t, int64_t file, uint64_t off, uint64_t len, uint64_t done,
                                          uint32_t stream) {
    return (struct dbt_replay_event){.t0 = t, .t1 = t, .done_ns = done, .off = off, .len = len,
                                     .file_size = UINT64_MAX, .file = file, .dep = -1, .guard = -1, .stream = stream,
                                     .kind = DBT_TK_CALL, .op = DBT_TOP_READ, .flags = DBT_TF_DIRECT | DBT_TF_ASYNC};
}

static struct dbt_replay_event reap(uint64_t t0, uint64_t t1, int64_t dep, uint32_t stream) {
    return (struct dbt_replay_event){.t0 = t0, .t1 = t1, .dep = dep, .guard = -1, .stream = stream,
                                     .kind = DBT_TK_SYNC, .op = DBT_SYNC_SLEEP, .flags = DBT_SF_AIO};
}

static void async_flash_32(void) {
    struct test_device ssd = {"ssd", "ssd", "/nonexistent/ssd",
                              {{"channels", 4}, {"read_latency_us", 100}, {"channel_read_mb_s", 100000},
                               {"interface_mb_s", 100000}, {"page_kib", 16}}};
    struct dbt_state *s = make_state("aioflash", ssd, NULL);
    int64_t file = dbt_state_file_index(s, 0, 1, 200, "/nonexistent/ssd/ibdata1", 64 << 20);
    const uint64_t T = 1000000000ull, PAGE = 16384;
    uint64_t expect[32];
    for (int i = 0; i < 32; i++) expect[i] = T + (uint64_t)(i / 4 + 1) * 100163 + 163 * (uint64_t)(i % 4 + 1);
    /* stream 0 submits 32 reads at T, then reads once more (synchronously) 2 us later; stream 1, asleep
     * in io_getevents from T, returned 500 ns after the last one's recorded completion, then a wake */
    struct dbt_replay_event ev[36];
    for (int i = 0; i < 32; i++) ev[i] = async_read(T, file, (uint64_t)i * PAGE * 7, PAGE, expect[i] + 900000, 0);
    ev[32] = async_read(T + 2000, file, 0, PAGE, 0, 0);
    ev[32].flags = DBT_TF_DIRECT, ev[32].t1 = T + 300000;
    ev[33] = reap(T, expect[31] + 900000 + 500, 31, 1);
    ev[34] = (struct dbt_replay_event){.t0 = ev[33].t1 + 1000, .t1 = ev[33].t1 + 2000, .dep = -1, .guard = -1,
                                       .stream = 1, .kind = DBT_TK_SYNC, .op = DBT_SYNC_WAKE, .flags = DBT_SF_KILL};
    uint64_t start[35], end[35];
    struct dbt_replay_result res = {start, end, NULL, NULL, 0};
    char err[256] = "";
    CHECK(dbt_replay(s, ev, 35, T, T, 1.0, NULL, &res, err, sizeof err) == 0, "replayed: %s", err);
    int at = 0;
    for (int i = 0; i < 32; i++) at += start[i] == T && end[i] == expect[i];
    CHECK(at == 32, "each of the 32 submitted at T and completed as the channels serve it (%d of 32)", at);
    CHECK(start[32] == T + 2000, "the submitter was not held: its next call at %llu (expected %llu)",
          (unsigned long long)start[32], (unsigned long long)(T + 2000));
    CHECK(end[33] == expect[31] + 500, "the reap ends at the last one's completion plus 500 ns: %llu (expected %llu)",
          (unsigned long long)end[33], (unsigned long long)(expect[31] + 500));
    CHECK(start[34] == end[33] + 1000, "and its thread goes on from there (%llu)", (unsigned long long)start[34]);
    CHECK(res.nrequests == 33, "33 device requests (%llu)", (unsigned long long)res.nrequests);
    free(res.requests);
    /* a dependency on an asynchronous call is a sleep's, and never a lock's (guarded) */
    ev[33].kind = DBT_TK_CALL, ev[33].op = DBT_TOP_READ, ev[33].flags = DBT_TF_DIRECT, ev[33].file = file;
    CHECK(dbt_replay(s, ev, 35, T, T, 1.0, NULL, &res, err, sizeof err) != 0 && strstr(err, "neither"),
          "a call depending on another is refused: %s", err);
    ev[33] = reap(T, expect[31] + 900000 + 500, 31, 1);
    ev[33].guard = 0;
    CHECK(dbt_replay(s, ev, 35, T, T, 1.0, NULL, &res, err, sizeof err) != 0 && strstr(err, "neither"),
          "a guarded reap is refused: %s", err);
    /* a buffered request is done at once in io_submit (an ordinary call of its submitter): a reap that
     * waited for it ends as long after that call's end in the replay (the drive still busy with the
     * reads above) as it did after the recorded one (recorded: 300 us, the reap 500 ns after) */
    struct dbt_replay_event once[2] = {async_read(T, file, 0, PAGE, 0, 0), reap(T, T + 300000 + 500, 0, 1)};
    once[0].flags = 0, once[0].t1 = T + 300000;
    uint64_t s2[2], e2[2];
    struct dbt_replay_result r2 = {s2, e2, NULL, NULL, 0};
    CHECK(dbt_replay(s, once, 2, T, T, 1.0, NULL, &r2, err, sizeof err) == 0, "replayed: %s", err);
    CHECK(e2[0] > s2[0] && e2[1] == e2[0] + 500, "the reap ends 500 ns after the read's replayed end (%llu, %llu)",
          (unsigned long long)e2[0], (unsigned long long)e2[1]);
    free(r2.requests);
    once[1].flags = 0;  /* a plain sleep may not wait for a call */
    CHECK(dbt_replay(s, once, 2, T, T, 1.0, NULL, &r2, err, sizeof err) != 0 && strstr(err, "neither"),
          "a sleep that is no reap waiting for a call is refused: %s", err);
    munmap(s, s->size);
}

static void async_ncq(void) {
    struct test_device disk = {"disk", "hdd", "/nonexistent/ncq",
                               {{"capacity_gb", 10}, {"cache_mib", 0}, {"write_cache", 0}, {"queue_depth", 4}}};
    struct dbt_state *s = make_state("aioncq", disk, NULL);
    int64_t file = dbt_state_file_index(s, 0, 1, 300, "/nonexistent/ncq/ibdata1", 6000ull << 20);
    const struct dbt_hdd_derived *d = &s->dev[0].model.drive[0].u.hdd.d;
    const uint64_t T = 1000000000ull, FAR = 5000ull << 20, NEAR = 10ull << 20;
    uint64_t done0 = dbt_hdd_media(d, dbt_hdd_cyl_of(d, 0), T, 0, 8192, 0);
    uint64_t near = dbt_hdd_media(d, dbt_hdd_cyl_of(d, 8192), done0, NEAR, 8192, 0);
    uint64_t far = dbt_hdd_media(d, dbt_hdd_cyl_of(d, NEAR + 8192), near, FAR, 8192, 0);
    /* one thread: R0, a far R1 and a near R2 submitted 1 us apart, then three reaps, each recorded as
     * returning the instant its request completed (the times recorded are another drive's: +1 ms) */
    struct dbt_replay_event ev[6] = {
        async_read(T, file, 0, 8192, T + 1000000, 0), async_read(T + 1000, file, FAR, 8192, T + 3000000, 0),
        async_read(T + 2000, file, NEAR, 8192, T + 2000000, 0), reap(T + 3000, T + 1000000, 0, 0),
        reap(T + 1000000, T + 2000000, 2, 0), reap(T + 2000000, T + 3000000, 1, 0),
    };
    uint64_t start[6], end[6];
    struct dbt_replay_result res = {start, end, NULL, NULL, 0};
    char err[256] = "";
    CHECK(dbt_replay(s, ev, 6, T, T, 1.0, NULL, &res, err, sizeof err) == 0, "replayed: %s", err);
    CHECK(start[1] == T + 1000 && start[2] == T + 2000 && start[3] == T + 3000,
          "the submitter went on while the drive held its requests");
    CHECK(end[0] == done0 && end[2] == near && end[1] == far, "R0 at %llu, near at %llu, far at %llu (by hand: %llu, "
          "%llu, %llu)", (unsigned long long)end[0], (unsigned long long)end[2], (unsigned long long)end[1],
          (unsigned long long)done0, (unsigned long long)near, (unsigned long long)far);
    CHECK(end[3] == done0 && end[4] == near && end[5] == far, "each reap ends at its request's completion");
    free(res.requests);
    munmap(s, s->size);
}

int main(int argc, char **argv) {
    if (work_begin(argc, argv, "dbtier-test-replay") != 0) return 1;
    same_requests_live_and_offline();
    hand_computed();
    refuses_bad_events();
    refuses_unbounded_events();
    cancel_stops_a_replay();
    writeback_is_paced();
    ncq_reorders();
    nudges_reorder();
    places_calls();
    counts_per_object();
    replays_nothing_and_many_processes();
    async_flash_32();
    async_ncq();
    work_done();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
