/* The emulation core. See emulate.h. */
#define _GNU_SOURCE
#include "emulate.h"

#include <fcntl.h>
#include <stdatomic.h>

#define ADD(field, v) atomic_fetch_add_explicit(&(field), (v), memory_order_relaxed)

struct core {
    struct dbt_state *s;
    const struct dbt_emulate_hooks *hooks;
};

static void count_latency(struct dbt_counters *c, int op, uint64_t len, uint64_t lat, uint64_t queued) {
    if (op == DBT_OP_READ) {
        ADD(c->reads, 1);
        ADD(c->read_bytes, len);
        ADD(c->read_ns, lat);
    } else if (op == DBT_OP_WRITE) {
        ADD(c->writes, 1);
        ADD(c->write_bytes, len);
        ADD(c->write_ns, lat);
    } else {
        ADD(c->flushes, 1);
        ADD(c->flush_ns, lat);
    }
    ADD(c->queue_ns, queued);
}

/* iostat's busy time (the union of [arrival, completion]) and the device's first and last request,
 * as the model starts each request; the device's lock held. */
static void busy_locked(void *ctx, const struct dbt_request *rq, const struct dbt_result *res) {
    struct dbt_device_slot *d = ctx;
    uint64_t from = rq->arrival_ns > d->busy_mark ? rq->arrival_ns : d->busy_mark;
    if (res->complete_ns > from) d->busy_ns += res->complete_ns - from;
    if (res->complete_ns > d->busy_mark) d->busy_mark = res->complete_ns;
    if (!d->first_ns || rq->arrival_ns < d->first_ns) d->first_ns = rq->arrival_ns;
    if (res->complete_ns > d->last_ns) d->last_ns = res->complete_ns;
    if (!(d->caps & DBT_CAP_LIMITED)) return;
    for (int k = 0; k < DBT_LIMITS; k++) { /* a limit's waits end in admission order: their union as busy's */
        if (res->held_to[k] <= res->held_from[k]) continue;
        uint64_t since = res->held_from[k] > d->held_mark[k] ? res->held_from[k] : d->held_mark[k];
        if (res->held_to[k] > since) ADD(d->c.held_ns[k], res->held_to[k] - since);
        if (res->held_to[k] > d->held_mark[k]) d->held_mark[k] = res->held_to[k];
        ADD(d->c.held[k], 1);
    }
}

/* One request through the device's model, the device's lock held. A `real` device's request
 * completes when the host's call did. */
static void model_request_locked(struct dbt_device_slot *d, int op, uint64_t addr, uint64_t len, uint64_t arrival,
                                 uint64_t host_end, struct dbt_result *res) {
    struct dbt_request rq = {arrival, addr, (uint32_t)(len > UINT32_MAX ? UINT32_MAX : len), (uint8_t)op};
    if (d->caps & DBT_CAP_HOST_TIME) {
        res->start_ns = arrival;
        res->complete_ns = host_end;
        res->flags = 0;
        uint64_t from = arrival > d->busy_mark ? arrival : d->busy_mark;
        if (host_end > from) d->busy_ns += host_end - from;
        if (host_end > d->busy_mark) d->busy_mark = host_end;
        if (!d->first_ns || arrival < d->first_ns) d->first_ns = arrival;
        if (host_end > d->last_ns) d->last_ns = host_end;
    } else {
        dbt_model_submit_now(&d->model, &rq, res, busy_locked, d);
    }
}

/* Counts and reports one device request the model answered. */
static inline __attribute__((always_inline)) void
report(struct core *k, int devno, int64_t file, int op, uint64_t off, uint64_t len, uint64_t arrival,
       const struct dbt_result *res, uint8_t flags) {
    struct dbt_device_slot *d = &k->s->dev[devno];
    count_latency(&d->c, op, len, res->complete_ns - arrival, res->start_ns - arrival);
    if (res->flags & DBT_RES_CACHE_HIT) {
        ADD(d->c.cache_hits, 1);
        flags |= DBT_TF_CACHE_HIT;
    }
    if (res->flags & DBT_RES_STREAM) {
        ADD(d->c.streams, 1);
        flags |= DBT_TF_STREAM;
    }
    if (k->hooks && k->hooks->request) {
        struct dbt_request_event ev = {arrival, res->start_ns, res->complete_ns, op == DBT_OP_FLUSH ? 0 : off,
                                       op == DBT_OP_FLUSH ? 0 : len, file, (uint8_t)op, (uint8_t)devno, flags};
        k->hooks->request(k->hooks->ctx, &ev);
    }
}

/* Issues, counts and reports one device request; returns its completion. Inlined: it is the
 * interposer's hot path. locked: the caller holds the device's lock. */
static inline __attribute__((always_inline)) uint64_t
issue(struct core *k, int devno, int64_t file, int op, uint64_t off, uint64_t len, uint64_t arrival,
      uint64_t host_end, uint8_t flags, int locked) {
    struct dbt_device_slot *d = &k->s->dev[devno];
    /* a chunk first seen here (writeback of pages the program's call did not start in) gets its
     * space under the lock the caller may hold already */
    uint64_t addr = !((d->caps & DBT_CAP_ADDRESSED) && op != DBT_OP_FLUSH) ? off
                    : locked ? dbt_state_addr_locked(k->s, devno, file, off) : dbt_state_addr(k->s, devno, file, off);
    struct dbt_result res;
    if (!locked) dbt_dev_lock(d);
    model_request_locked(d, op, addr, len, arrival, host_end, &res);
    if (!locked) dbt_dev_unlock(d);
    report(k, devno, file, op, off, len, arrival, &res, flags);
    return res.complete_ns;
}

/* ---- Background writeback, paced as the kernel sends it. The flusher's requests wait in the block
 * layer and go to the device one at a time, each when the last one completed; a program's own
 * request (a read, a synchronous write) goes before those still waiting, as Linux's I/O schedulers
 * prefer them. So they are queued here and sent lazily: before each request the device gets, every
 * waiting one whose turn came before it. */

/* Some writeback waits: a hint read without the lock (the hot path pays one load), acted on under it. */
static inline int waiting(struct core *k, int devno) {
    return __atomic_load_n(&k->s->dev[devno].pend_count, __ATOMIC_RELAXED) != 0;
}

/* Sends, the device's lock held, the waiting writeback whose turn comes before `until` (all of it:
 * until = UINT64_MAX). Returns when the last one sent completes. */
static uint64_t send_locked(struct core *k, int devno, uint64_t until) {
    struct dbt_device_slot *d = &k->s->dev[devno];
    while (d->pend_count) {
        struct dbt_pending_write w = d->pend[d->pend_head];
        uint64_t turn = w.queued > d->pend_done ? w.queued : d->pend_done;
        if (turn >= until && until != UINT64_MAX) break;
        d->pend_head = (d->pend_head + 1) % DBT_PENDING_WRITES;
        d->pend_count--;
        d->pend_done = issue(k, devno, w.file, DBT_OP_WRITE, w.off, w.len, turn, turn, DBT_TF_ASYNC, 1);
    }
    return d->pend_done;
}

static uint64_t pending_send(struct core *k, int devno, uint64_t until) {
    struct dbt_device_slot *d = &k->s->dev[devno];
    dbt_dev_lock(d);
    uint64_t done = send_locked(k, devno, until);
    dbt_dev_unlock(d);
    return done;
}

/* The block layer's merge: a request adjacent to one still waiting (not yet sent) joins it, at its
 * end or its start, while the two fit in one request of DBT_BLOCK_MAX_REQUEST bytes. */
static int merge_locked(struct dbt_device_slot *d, int64_t file, uint64_t off, uint64_t len) {
    for (uint32_t i = 0; i < d->pend_count; i++) {
        struct dbt_pending_write *w = &d->pend[(d->pend_head + i) % DBT_PENDING_WRITES];
        if (w->file != file || w->len + len > DBT_BLOCK_MAX_REQUEST) continue;
        if (w->off + w->len == off) {
            w->len += len;
            return 1;
        }
        if (off + len == w->off) {
            w->off = off;
            w->len += len;
            return 1;
        }
    }
    return 0;
}

static void pending_queue(struct core *k, int devno, int64_t file, uint64_t off, uint64_t len, uint64_t queued) {
    struct dbt_device_slot *d = &k->s->dev[devno];
    dbt_dev_lock(d);
    (void)send_locked(k, devno, queued); /* what went to the device before now can merge no more */
    if (!merge_locked(d, file, off, len)) {
        if (d->pend_count == DBT_PENDING_WRITES) { /* a full queue: its oldest goes now */
            struct dbt_pending_write w = d->pend[d->pend_head];
            uint64_t turn = w.queued > d->pend_done ? w.queued : d->pend_done;
            d->pend_head = (d->pend_head + 1) % DBT_PENDING_WRITES;
            d->pend_count--;
            d->pend_done = issue(k, devno, w.file, DBT_OP_WRITE, w.off, w.len, turn, turn, DBT_TF_ASYNC, 1);
        }
        d->pend[(d->pend_head + d->pend_count) % DBT_PENDING_WRITES] = (struct dbt_pending_write){off, len, queued, file};
        d->pend_count++;
    }
    dbt_dev_unlock(d);
}

/* A request from a program's call: the writeback whose turn came first goes before it. */
static inline __attribute__((always_inline)) uint64_t device_request(struct core *k, int devno, int64_t file, int op,
                                                                     uint64_t off, uint64_t len, uint64_t arrival,
                                                                     uint64_t host_end, uint8_t flags) {
    if (waiting(k, devno)) (void)pending_send(k, devno, arrival);
    return issue(k, devno, file, op, off, len, arrival, host_end, flags, 0);
}

/* fsync and sync_file_range's wait: the writeback already handed to the block layer completes first
 * (Linux waits for the file's pages under writeback; the queue is sent in order, so all of it). */
static uint64_t pending_drain(struct core *k, int devno, uint64_t t) {
    if (!waiting(k, devno)) return t;
    uint64_t done = pending_send(k, devno, UINT64_MAX);
    return done > t ? done : t;
}

/* The page cache's way to the devices (called with its lock held): a miss, read-ahead or writeback. */
static uint64_t pc_device_io(void *ctx, int op, int64_t file, uint64_t off, uint64_t len, uint64_t arrival,
                             int async) {
    struct core *k = ctx;
    int devno = dbt_state_file_device(k->s, file); /* the file came from a page key in shared memory */
    if (devno < 0) return arrival;
    if (async && op == DBT_OP_WRITE && !(k->s->dev[devno].caps & DBT_CAP_HOST_TIME)) {
        pending_queue(k, devno, file, off, len, arrival);
        return arrival;
    }
    return device_request(k, devno, file, op, off, len, arrival, arrival, async ? DBT_TF_ASYNC : 0);
}

void dbt_emulate_settle(struct dbt_state *s) {
    struct core k = {s, NULL};
    for (uint32_t i = 0; i < s->ndev && i < DBT_MAX_DEVICES; i++)
        if (waiting(&k, (int)i)) (void)pending_send(&k, (int)i, UINT64_MAX);
}

/* (An atomic add costs a locked instruction even when it adds nothing: most calls find all they read
 * in memory, and add to one of these only.) */
static void add_pc_stats(struct dbt_counters *c, const struct dbt_pc_stats *st) {
    if (st->hit_pages) ADD(c->pc_hit_pages, st->hit_pages);
    if (st->miss_pages) ADD(c->pc_miss_pages, st->miss_pages);
    if (st->readahead_bytes) ADD(c->pc_readahead_bytes, st->readahead_bytes);
    if (st->writeback_bytes) ADD(c->pc_writeback_bytes, st->writeback_bytes);
}

/* A buffered call through the emulated page cache: what it finds in memory costs nothing; what it
 * must fetch, write through or write back costs the device's time. */
static void buffered(struct core *k, struct dbt_pc *pc, const struct dbt_call *c, struct dbt_outcome *out) {
    struct dbt_device_slot *d = &k->s->dev[c->dev];
    struct dbt_pc_stats st = {0, 0, 0, 0};
    int write_through = (c->flags & DBT_TF_DSYNC) || dbt_state_file_dsync(k->s, c->file);
    uint64_t complete;
    if (c->op == DBT_TOP_READ) {
        uint64_t size = k->hooks && k->hooks->file_size ? k->hooks->file_size(k->hooks->ctx) : c->file_size;
        complete = dbt_pc_read(pc, c->file, c->off, c->len, size, c->t0, pc_device_io, k, &st);
    }
    else if (c->op == DBT_TOP_WRITE)
        complete = dbt_pc_write(pc, c->file, c->off, c->len, c->t0, write_through, pc_device_io, k, &st);
    else /* fsync, fdatasync: the file's dirty pages, then the device's cache */
        complete = dbt_pc_writeback(pc, c->file, 0, 0, c->t0, 1, pc_device_io, k, &st);
    if (c->op == DBT_TOP_FLUSH) complete = pending_drain(k, c->dev, complete);
    if (c->op == DBT_TOP_FLUSH || (c->op == DBT_TOP_WRITE && write_through))
        complete = device_request(k, c->dev, c->file, DBT_OP_FLUSH, 0, 0, complete, complete, c->flags);
    add_pc_stats(&d->c, &st);
    out->complete = complete;
    out->wait = complete > c->t0;
    if (c->op == DBT_TOP_READ && !st.miss_pages) out->flags |= DBT_TF_PAGE_CACHE;
}

/* Takes a queued call's request once the drive started it: counted and reported as issue() does.
 * Returns 0 while it waits. */
static int collect(struct core *k, const struct dbt_call *c, struct dbt_outcome *out) {
    struct dbt_device_slot *d = &k->s->dev[c->dev];
    struct dbt_result res;
    int reordered = 0;
    dbt_dev_lock(d);
    int got = dbt_model_take(&d->model, out->ticket, &res, &reordered);
    dbt_dev_unlock(d);
    if (got == 0) return 0;
    out->ticket = 0;
    if (got < 0) { /* taken back as stale: only by a caller that stopped waiting for it */
        out->complete = c->host_end;
        return 1;
    }
    if (reordered) ADD(d->c.reordered, 1);
    report(k, c->dev, c->file, c->op, c->off, c->len, c->t0, &res, c->flags);
    out->complete = res.complete_ns;
    return 1;
}

/* A plain direct read or write on a queueing drive joins its queue (an O_DSYNC write's flush and a
 * flush are not queued commands). The call waits: out->ticket names its request and out->complete
 * says when to ask again (dbt_emulate_resume). Decisions are made once their time has passed, among
 * the requests come by then (live, the waiting issuers make them as they wake; offline, the replay
 * asks at their times), so the drive sees what a real one would have. */
static int queued(struct core *k, const struct dbt_call *c, struct dbt_outcome *out) {
    struct dbt_device_slot *d = &k->s->dev[c->dev];
    if (!(d->caps & DBT_CAP_REORDERS) || !dbt_model_queueing(&d->model) || c->file < 0 ||
        (c->op != DBT_TOP_READ && c->op != DBT_TOP_WRITE) || (c->flags & DBT_TF_DSYNC))
        return 0;
    if (waiting(k, c->dev)) (void)pending_send(k, c->dev, c->t0);
    uint64_t addr = dbt_state_addr(k->s, c->dev, c->file, c->off);
    struct dbt_request rq = {c->t0, addr, (uint32_t)(c->len > UINT32_MAX ? UINT32_MAX : c->len), c->op};
    dbt_dev_lock(d);
    (void)dbt_model_run(&d->model, c->host_end, busy_locked, d); /* the choices made while the host call ran */
    uint64_t ticket = dbt_model_enqueue(&d->model, &rq);
    uint64_t next = ticket ? dbt_model_run(&d->model, c->host_end, busy_locked, d) : 0;
    dbt_dev_unlock(d);
    if (!ticket) return 0; /* the queue is full: answered at once, behind it */
    out->ticket = ticket;
    out->complete = next;
    out->wait = 1;
    (void)collect(k, c, out);
    return 1;
}

/* A transfer or flush that goes straight to the device: O_DIRECT, a `real` device, or no page cache. */
static void direct(struct core *k, const struct dbt_call *c, struct dbt_outcome *out) {
    struct dbt_device_slot *d = &k->s->dev[c->dev];
    if (queued(k, c, out)) return;
    uint64_t at = c->op == DBT_TOP_FLUSH ? pending_drain(k, c->dev, c->t0) : c->t0;
    uint64_t complete = device_request(k, c->dev, c->file, c->op, c->off, c->len, at, c->host_end, c->flags);
    if (c->op == DBT_TOP_WRITE && (c->flags & DBT_TF_DSYNC)) /* O_DSYNC: the write carries a flush */
        complete = device_request(k, c->dev, c->file, DBT_OP_FLUSH, 0, 0, complete, complete, c->flags);
    out->complete = complete;
    out->wait = !(d->caps & DBT_CAP_HOST_TIME); /* a real device's wait was the host call itself */
}

void dbt_emulate_resume(struct dbt_state *s, const struct dbt_call *c, const struct dbt_emulate_hooks *hooks,
                        uint64_t now, struct dbt_outcome *out) {
    struct core k = {s, hooks};
    struct dbt_device_slot *d = &s->dev[c->dev];
    if (!out->ticket) return;
    dbt_dev_lock(d);
    uint64_t next = dbt_model_run(&d->model, now, busy_locked, d);
    dbt_dev_unlock(d);
    if (!collect(&k, c, out)) out->complete = next;
}

/* Calls that move no data: their page-cache part (advice, writeback hints, truncation), counted. */
static void other(struct core *k, struct dbt_pc *pc, const struct dbt_call *c, struct dbt_outcome *out) {
    struct dbt_device_slot *d = &k->s->dev[c->dev];
    struct dbt_pc_stats st = {0, 0, 0, 0};
    uint64_t done = c->t0;
    if (pc && c->file >= 0 && !(d->caps & DBT_CAP_HOST_TIME)) {
        if (c->op == DBT_TOP_TRUNCATE) {
            dbt_pc_drop(pc, c->file, c->off, 0, 1);
        } else if (c->op == DBT_TOP_ADVISE && c->aux == POSIX_FADV_DONTNEED) {
            dbt_pc_writeback(pc, c->file, c->off, c->len, c->t0, 0, pc_device_io, k, &st); /* started, as Linux */
            dbt_pc_drop(pc, c->file, c->off, c->len, 0);
        } else if (c->op == DBT_TOP_ADVISE && c->aux == POSIX_FADV_WILLNEED) {
            dbt_pc_willneed(pc, c->file, c->off, c->len, c->t0, pc_device_io, k, &st);
        } else if (c->op == DBT_TOP_SYNC_RANGE && (c->aux & SYNC_FILE_RANGE_WRITE)) {
            int wait = (c->aux & SYNC_FILE_RANGE_WAIT_AFTER) != 0;
            done = dbt_pc_writeback(pc, c->file, c->off, c->len, c->t0, wait, pc_device_io, k, &st);
            if (wait) done = pending_drain(k, c->dev, done);
        }
        add_pc_stats(&d->c, &st);
    }
    ADD(d->c.other_ops, 1);
    out->complete = done;
    out->wait = done > c->t0;
}

void dbt_emulate(struct dbt_state *s, const struct dbt_call *c, const struct dbt_emulate_hooks *hooks,
                 struct dbt_outcome *out) {
    struct core k = {s, hooks};
    struct dbt_device_slot *d = &s->dev[c->dev];
    int transfer = c->op == DBT_TOP_READ || c->op == DBT_TOP_WRITE;
    *out = (struct dbt_outcome){c->t0, 0, 0, 0, 0};
    /* A file gets its device space where the program first touches it, paused or not, so that the
     * measured part finds the layout the preparation left. */
    if ((d->caps & DBT_CAP_ADDRESSED) && transfer) (void)dbt_state_addr(s, c->dev, c->file, c->off);
    if (atomic_load_explicit(&s->paused, memory_order_relaxed)) return;
    out->charged = 1;
    struct dbt_pc *pc = dbt_state_pc(s);
    if (!transfer && c->op != DBT_TOP_FLUSH) {
        other(&k, pc, c, out);
        return;
    }
    if (pc && c->file >= 0 && !(d->caps & DBT_CAP_HOST_TIME)) {
        if (!(c->flags & DBT_TF_DIRECT)) {
            buffered(&k, pc, c, out);
            return;
        }
        if (c->op == DBT_TOP_WRITE) dbt_pc_drop(pc, c->file, c->off, c->len, 1); /* direct writes invalidate */
    }
    direct(&k, c, out);
}
