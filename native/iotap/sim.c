/* The offline face of the device models, for Python (ctypes): a model on the heap to submit
 * requests to, QD1 patterns, the state file's creation and dump, the replay. The same devmodel.c
 * serves the interposer; nothing here has physics of its own. What the library describes to Python
 * (the option table, the shared layouts) is border.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devmodel.h"
#include "emulate.h"
#include "mix.h"
#include "statefile.h"
#include "replay.h"
#include "trace.h"

#define EXPORT __attribute__((visibility("default")))

/* The library and the Python package must agree on the device ops, the state file and the trace's
 * record layout: a handshake, checked when Python loads the library. (The layouts themselves Python
 * reads from dbt_layout_json, border.c.) */
EXPORT int dbt_abi_version(void) { return DBT_OPS_VERSION * 1000000 + DBT_STATE_VERSION * 1000 + DBT_TRACE_FORMAT; }


EXPORT void dbt_free(void *p) { free(p); }

/* A model on the heap for one device spec (its name and directory are not a model's). Returns NULL
 * with a message in err. */
EXPORT struct dbt_model_state *dbt_sim_new(uint32_t spec_version, const struct dbt_device_spec *spec, char *err,
                                           size_t errlen) {
    if (spec_version != DBT_SPEC_VERSION) {
        snprintf(err, errlen, "a device spec of version %u; this library takes version %d", spec_version,
                 DBT_SPEC_VERSION);
        return NULL;
    }
    struct dbt_params p;
    if (dbt_spec_params(spec, &p, err, errlen) != 0) return NULL;
    struct dbt_model_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    dbt_model_init(st, spec->kind, &p);
    return st;
}

EXPORT void dbt_sim_free(struct dbt_model_state *st) { free(st); }

/* Its burst credits (a capped kind's) set to `fraction` of a full bucket, refill counted from `at`. */
EXPORT void dbt_sim_set_credits(struct dbt_model_state *st, double fraction, uint64_t at) {
    dbt_model_set_credits(st, fraction, at);
}

EXPORT uint64_t dbt_sim_submit(struct dbt_model_state *st, uint64_t arrival, int op, uint64_t addr, uint32_t len,
                               uint64_t *start, uint32_t *flags) {
    struct dbt_request rq = {arrival, addr, len, (uint8_t)op};
    struct dbt_result res;
    dbt_model_submit(st, &rq, &res);
    if (start) *start = res.start_ns;
    if (flags) *flags = res.flags;
    return res.complete_ns;
}

/* The offsets of a QD1 pattern: n blocks of `block` bytes within `span`, random (uniform, aligned,
 * splitmix64 from seed) or sequential from 0. One generator for the simulator and the live tests. */
/* The k-th offset of a pattern: random blocks from a splitmix64 sequence at state *x, or in order. */
static uint64_t pattern_next(uint64_t *x, int random, uint64_t blocks, uint32_t block, uint64_t k) {
    return (random ? dbt_splitmix64(x) % blocks : k % blocks) * block;
}

EXPORT void dbt_pattern_offsets(uint64_t seed, int random, uint64_t span, uint32_t block, uint64_t n, uint64_t *out) {
    uint64_t blocks = span / block, x = seed;
    for (uint64_t i = 0; i < n; i++) out[i] = pattern_next(&x, random, blocks, block, i);
}

/* Closed-loop workers on one model, in simulated time: each worker issues its next request when its
 * previous one completed (plus its think time). On a queueing drive a request waits in the drive's
 * queue until the drive chooses it, and the choices are made at their times, after the requests
 * issued by then (as the replay does). */
enum { MAX_JOBS = 1024 };

struct closed_loop {
    /* the worker's next request; returns 0 when the worker stops */
    int (*next)(void *ctx, int worker, uint64_t t, struct dbt_request *rq);
    /* a request completed, issued at `issued`; returns the worker's think time before its next */
    uint64_t (*done)(void *ctx, int worker, const struct dbt_request *rq, uint64_t issued, uint64_t complete);
    void *ctx;
};

static void run_closed(struct dbt_model_state *st, int jobs, const struct closed_loop *cl) {
    uint64_t t[MAX_JOBS], ticket[MAX_JOBS];
    struct dbt_request rq[MAX_JOBS];
    int live[MAX_JOBS];
    for (int w = 0; w < jobs; w++) t[w] = 0, ticket[w] = 0, live[w] = 1;
    int queueing = dbt_model_queueing(st);
    for (;;) {
        int w = -1;
        for (int j = 0; j < jobs; j++) { /* the earliest; at one instant, issues before asks */
            if (!live[j]) continue;
            if (w < 0 || t[j] < t[w] || (t[j] == t[w] && !ticket[j] && ticket[w])) w = j;
        }
        if (w < 0) return;
        struct dbt_result res;
        int reordered;
        if (!ticket[w]) {
            if (!cl->next(cl->ctx, w, t[w], &rq[w])) {
                live[w] = 0;
                continue;
            }
            rq[w].arrival_ns = t[w];
            if (queueing) {
                (void)dbt_model_run(st, t[w], NULL, NULL);
                ticket[w] = dbt_model_enqueue(st, &rq[w]);
            }
            if (!ticket[w]) {
                dbt_model_submit_now(st, &rq[w], &res, NULL, NULL);
            } else {
                uint64_t next = dbt_model_run(st, t[w], NULL, NULL);
                if (dbt_model_take(st, ticket[w], &res, &reordered) == 0) {
                    t[w] = next;
                    continue;
                }
            }
        } else {
            uint64_t next = dbt_model_run(st, t[w], NULL, NULL);
            if (dbt_model_take(st, ticket[w], &res, &reordered) == 0) {
                t[w] = next;
                continue;
            }
        }
        ticket[w] = 0;
        uint64_t think = cl->done(cl->ctx, w, &rq[w], rq[w].arrival_ns, res.complete_ns);
        t[w] = (res.complete_ns > rq[w].arrival_ns ? res.complete_ns : rq[w].arrival_ns + 1) + think;
    }
}

struct pattern_loop {
    int op, random;
    uint32_t block;
    uint64_t span, blocks, until_ns, cap, nsec, n, *lat, *per_s, *moved;
    uint64_t x[MAX_JOBS], k[MAX_JOBS];
};

static int pattern_request(void *ctx, int w, uint64_t t, struct dbt_request *rq) {
    struct pattern_loop *p = ctx;
    if (t >= p->until_ns) return 0;
    uint64_t addr = (uint64_t)w * p->span + pattern_next(&p->x[w], p->random, p->blocks, p->block, p->k[w]++);
    *rq = (struct dbt_request){t, addr, p->block, (uint8_t)p->op};
    return 1;
}

static uint64_t pattern_done(void *ctx, int w, const struct dbt_request *rq, uint64_t issued, uint64_t done) {
    struct pattern_loop *p = ctx;
    (void)w, (void)rq;
    if (done > p->until_ns) return 0;
    if (p->n < p->cap) p->lat[p->n] = done - issued;
    if (done / 1000000000ull < p->nsec) p->per_s[done / 1000000000ull]++;
    p->n++;
    *p->moved += p->block;
    return 0;
}

/* iobench's loop through the model alone, in simulated time: `jobs` workers at queue depth 1, worker
 * w on its own file of `span` bytes at address w * span with the pattern seeded seed0 + w, issuing
 * until until_ns. Keeps the first `cap` latencies (ns) and counts completions per second in
 * per_s[0..nsec). Returns the requests completed by until_ns; *moved their bytes. */
EXPORT uint64_t dbt_sim_pattern(struct dbt_model_state *st, int op, int random, uint32_t block, uint64_t span,
                                int jobs, uint64_t seed0, uint64_t until_ns, uint64_t *lat, uint64_t cap,
                                uint64_t *per_s, uint64_t nsec, uint64_t *moved) {
    *moved = 0;
    uint64_t blocks = block ? span / block : 0;
    if (jobs < 1 || jobs > MAX_JOBS || blocks == 0) return 0;
    struct pattern_loop *p = calloc(1, sizeof *p);
    if (!p) return 0;
    *p = (struct pattern_loop){op, random, block, span, blocks, until_ns, cap, nsec, 0, lat, per_s, moved, {0}, {0}};
    for (int w = 0; w < jobs; w++) p->x[w] = seed0 + (uint64_t)w;
    for (uint64_t s = 0; s < nsec; s++) per_s[s] = 0;
    struct closed_loop cl = {pattern_request, pattern_done, p};
    run_closed(st, jobs, &cl);
    uint64_t n = p->n;
    free(p);
    return n;
}

EXPORT void dbt_sim_qd1(struct dbt_model_state *st, int op, const uint64_t *offsets, uint64_t n, uint32_t block,
                        uint64_t base_addr, uint64_t t0, uint64_t gap_ns, uint64_t *lat) {
    uint64_t t = t0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t done = dbt_sim_submit(st, t, op, base_addr + offsets[i], block, NULL, NULL);
        lat[i] = done - t;
        t = done + gap_ns;
    }
}

struct list_loop {
    uint64_t n, i;
    const uint8_t *op;
    const uint64_t *addr, *gap;
    const uint32_t *len;
    uint64_t *issue, *done;
    uint64_t which[MAX_JOBS]; /* the request each worker has */
};

static int list_request(void *ctx, int w, uint64_t t, struct dbt_request *rq) {
    struct list_loop *p = ctx;
    if (p->i >= p->n) return 0;
    uint64_t i = p->i++;
    p->which[w] = i;
    *rq = (struct dbt_request){t, p->addr[i], p->len[i], p->op[i]};
    return 1;
}

static uint64_t list_done(void *ctx, int w, const struct dbt_request *rq, uint64_t issued, uint64_t done) {
    struct list_loop *p = ctx;
    (void)rq;
    p->issue[p->which[w]] = issued;
    p->done[p->which[w]] = done;
    return p->gap ? p->gap[p->which[w]] : 0;
}

/* A request list served by `jobs` closed-loop workers: each takes the next request in the list
 * gap[i] ns after its previous one completed (gap of the request it completed, 0 at first). Writes
 * each request's issue and completion times (ns). */
EXPORT void dbt_sim_closed(struct dbt_model_state *st, uint64_t n, const uint8_t *op, const uint64_t *addr,
                           const uint32_t *len, const uint64_t *gap, int jobs, uint64_t *issue, uint64_t *done) {
    if (jobs < 1) jobs = 1;
    if (jobs > MAX_JOBS) jobs = MAX_JOBS;
    struct list_loop *p = calloc(1, sizeof *p);
    if (!p) return;
    p->n = n, p->op = op, p->addr = addr, p->gap = gap, p->len = len, p->issue = issue, p->done = done;
    struct closed_loop cl = {list_request, list_done, p};
    run_closed(st, jobs, &cl);
    free(p);
}

/* The bytes a state file takes with a page cache of pc_bytes (0: none): what a run needs in its
 * workspace, read from the one layout calculation rather than copied into Python. */
EXPORT uint64_t dbt_state_bytes(uint64_t pc_bytes) {
    struct dbt_state_layout layout;
    dbt_state_layout(pc_bytes, &layout);
    return layout.size;
}

EXPORT int dbt_create_state(const char *state_path, uint32_t spec_version, const struct dbt_device_spec *devs,
                            uint32_t n, const struct dbt_pc_config *pc, char *err, size_t errlen) {
    return dbt_state_create(state_path, spec_version, devs, n, pc, err, errlen);
}

/* For C callers that build specs by name (the tests, through dlopen). */
EXPORT int dbt_device_spec_init(struct dbt_device_spec *spec, const char *name, const char *kind, const char *dir,
                                char *err, size_t errlen) {
    return dbt_spec_init(spec, name, kind, dir, err, errlen);
}

EXPORT int dbt_device_spec_set(struct dbt_device_spec *spec, const char *param, double value, char *err,
                               size_t errlen) {
    return dbt_spec_set(spec, param, value, err, errlen);
}

EXPORT int dbt_set_paused(const char *state_path, int paused, char *err, size_t errlen) {
    return dbt_state_set_paused(state_path, paused, err, errlen);
}

EXPORT int dbt_set_fault(const char *state_path, int devno, unsigned nth, int pg_class, const char *suffix, char *err,
                         size_t errlen) {
    return dbt_state_set_fault(state_path, devno, nth, pg_class, suffix, err, errlen);
}

EXPORT int dbt_set_durlog(const char *state_path, int on, char *err, size_t errlen) {
    return dbt_state_set_durlog(state_path, on, err, errlen);
}

EXPORT int dbt_set_undilated(const char *state_path, uint32_t pid, char *err, size_t errlen) {
    return dbt_state_set_undilated(state_path, pid, err, errlen);
}

EXPORT int dbt_clear_page_cache(const char *state_path, char *err, size_t errlen) {
    return dbt_state_clear_page_cache(state_path, err, errlen);
}

EXPORT int dbt_set_credits(const char *state_path, double fraction, uint64_t at_ns, char *err, size_t errlen) {
    return dbt_state_set_credits(state_path, fraction, at_ns, err, errlen);
}

/* Also in the layout document's constants; kept as a call for the callers that ask it so. */
EXPORT int dbt_max_devices(void) { return DBT_MAX_DEVICES; }

EXPORT int64_t dbt_chunk_map(const char *state_path, uint64_t *out, uint64_t cap, uint64_t *cursors, char *err,
                             size_t errlen) {
    return dbt_state_chunk_map(state_path, out, cap, cursors, err, errlen);
}

EXPORT char *dbt_dump_state(const char *state_path, char *err, size_t errlen) {
    struct dbt_state *s = dbt_state_attach(state_path, err, errlen);
    if (!s) return NULL;
    dbt_emulate_settle(s); /* the writeback still queued is the interval's */
    munmap(s, s->size);
    return dbt_state_json(state_path, err, errlen);
}

/* iobench's own engine: a time-based loop of requests at queue depth 1 on an open fd, each timed,
 * written in C so that the engine's own cost per request is fio's order (a Python loop adds
 * microseconds). random: offsets uniform over `blocks` blocks (splitmix64 from seed), else in order,
 * wrapping. Stores up to `cap` latencies (ns); returns the requests made (-errno on failure) and the
 * bytes moved and loop time through the pointers. */
EXPORT int64_t dbt_bench_loop(int fd, int reading, void *buf, uint64_t bs, uint64_t blocks, int random, uint64_t seed,
                              uint64_t runtime_ns, uint64_t *lat, uint64_t cap, uint64_t *bytes, uint64_t *elapsed) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t start = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, now = start;
    uint64_t n = 0, moved = 0, x = seed;
    while (now - start < runtime_ns && n < cap) {
        uint64_t block = random ? dbt_splitmix64(&x) % blocks : n % blocks;
        uint64_t t = now;
        ssize_t r = reading ? pread(fd, buf, bs, (off_t)(block * bs)) : pwrite(fd, buf, bs, (off_t)(block * bs));
        if (r < 0) return -errno;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        lat[n++] = now - t;
        moved += (uint64_t)r;
    }
    *bytes = moved;
    *elapsed = now - start;
    return (int64_t)n;
}

/* ---- the offline replay (replay.c) on a state file of its own ------------------------------- */

EXPORT struct dbt_state *dbt_replay_attach(const char *state_path, char *err, size_t errlen) {
    return dbt_state_attach(state_path, err, errlen);
}

EXPORT void dbt_replay_detach(struct dbt_state *s) {
    if (s) munmap(s, s->size);
}

/* files: (file index, device, dsync scope) rows; chunks: (file index, device, chunk, address) rows. */
EXPORT int dbt_replay_layout(struct dbt_state *s, const uint64_t *files, uint64_t nfiles, const uint64_t *chunks,
                             uint64_t nchunks, char *err, size_t errlen) {
    for (uint64_t i = 0; i < nfiles; i++)
        dbt_state_put_file(s, (int64_t)files[3 * i], (int)files[3 * i + 1], (int)files[3 * i + 2]);
    for (uint64_t i = 0; i < nchunks; i++) {
        const uint64_t *c = &chunks[4 * i];
        if (dbt_state_put_chunk(s, (int)c[1], (int64_t)c[0], c[2], c[3]) != 0) {
            snprintf(err, errlen, "the file layout does not fit the replay's chunk table (%u chunks per device)",
                     DBT_CHUNK_CAP / (s->ndev ? s->ndev : 1));
            return -1;
        }
    }
    return 0;
}

/* PostgreSQL's file-name grammar (pgpath.c), for Python's attribution and the replay's dsync rule. */
EXPORT void dbt_pg_path(const char *path, struct dbt_pg_path *out) { dbt_pg_path_classify(path, out); }


/* cancel: an int the caller's other thread sets to stop the replay (it returns -2 then). place,
 * same_devices, objects (may be NULL): dbt_replay_options; requests NULL: none collected. */
EXPORT int dbt_replay_run(struct dbt_state *s, const struct dbt_replay_event *ev, uint64_t n, uint64_t recorded_from,
                          uint64_t replay_from, double cpu_scale, int place, uint32_t same_devices,
                          struct dbt_objio *objects, const atomic_int *cancel, uint64_t *start, uint64_t *end,
                          uint8_t *flags, struct dbt_replay_request **requests, uint64_t *nrequests, char *err,
                          size_t errlen) {
    struct dbt_replay_result r = {start, end, flags, NULL, 0};
    struct dbt_replay_options opt = {place, same_devices, requests != NULL, objects};
    int rc = dbt_replay_with(s, ev, n, recorded_from, replay_from, cpu_scale, &opt, cancel, &r, err, errlen);
    if (requests) {
        *requests = r.requests;
        *nrequests = r.nrequests;
    }
    return rc;
}

/* The replay's events of trace records (replay.h). */
EXPORT void dbt_replay_events(const struct dbt_trace_rec *r, uint64_t n, const int64_t *stream, const int64_t *dep,
                              const int64_t *guard, struct dbt_replay_event *out) {
    dbt_replay_events_of(r, n, stream, dep, guard, out);
}

/* ---- per-object I/O (objio.c): a replay's, or a live run's from its trace's records ------------ */

EXPORT struct dbt_objio *dbt_objio_create(void) { return dbt_objio_new(); }
EXPORT void dbt_objio_destroy(struct dbt_objio *o) { dbt_objio_free(o); }
EXPORT void dbt_objio_clear(struct dbt_objio *o) { dbt_objio_reset(o); }
EXPORT void dbt_objio_add_records(struct dbt_objio *o, const struct dbt_trace_rec *r, uint64_t n) {
    dbt_objio_records(o, r, n);
}
/* The rows (at most cap of them, in their order) and how many there are; -1 when memory ran out. */
EXPORT int64_t dbt_objio_table(struct dbt_objio *o, struct dbt_objio_row *out, uint64_t cap) {
    uint64_t n = dbt_objio_rows(o, out, cap);
    return dbt_objio_failed(o) ? -1 : (int64_t)n;
}
