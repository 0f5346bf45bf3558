/* Offline replay through the emulation core. See replay.h. */
#define _GNU_SOURCE
#include "replay.h"

#include "aioq.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct heap_item {
    uint64_t ready;
    uint32_t stream;
    uint32_t resume; /* 1: the stream's call waits in a drive's queue and asks again (after the calls
                        due at the same instant, which a live drive's choice then would have seen) */
};

struct heap {
    struct heap_item *a;
    uint32_t n;
};

static int before(const struct heap_item *x, const struct heap_item *y) {
    if (x->ready != y->ready) return x->ready < y->ready;
    if (x->resume != y->resume) return x->resume < y->resume;
    return x->stream < y->stream;
}

static void heap_push(struct heap *h, uint64_t ready, uint32_t stream, uint32_t resume) {
    uint32_t i = h->n++;
    h->a[i] = (struct heap_item){ready, stream, resume};
    while (i && before(&h->a[i], &h->a[(i - 1) / 2])) {
        struct heap_item t = h->a[i];
        h->a[i] = h->a[(i - 1) / 2];
        h->a[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

/* The item at the top moves down to its place. */
static void sift_down(struct heap *h) {
    for (uint32_t i = 0;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && before(&h->a[l], &h->a[m])) m = l;
        if (r < h->n && before(&h->a[r], &h->a[m])) m = r;
        if (m == i) break;
        struct heap_item t = h->a[i];
        h->a[i] = h->a[m];
        h->a[m] = t;
        i = m;
    }
}

/* The top taken off; or taken off and another put in, in one pass (a stream's next event mostly goes
 * back near the top). A stream has at most one item in the heap, and so has an asynchronous call a
 * drive has yet to choose (its item's stream: the number of streams plus its slot), so no two items
 * tie: the order in which items come off does not depend on how they were put in. */
static void heap_drop_top(struct heap *h) {
    h->a[0] = h->a[--h->n];
    sift_down(h);
}

static void heap_replace_top(struct heap *h, uint64_t ready, uint32_t stream, uint32_t resume) {
    h->a[0] = (struct heap_item){ready, stream, resume};
    sift_down(h);
}

/* An asynchronous call whose request waits in a queueing drive's queue: asked again when due. */
struct pending {
    uint64_t event;
    struct dbt_outcome o;
    uint32_t asked;
};

/* Event i has ended: the processes parked on it (sleeps that depend on it) are ready again. */
static void finished(struct heap *h, uint64_t i, uint8_t *done, const uint8_t *awaited, uint32_t *parked_head,
                     const uint32_t *parked_next, const uint64_t *ready) {
    done[i] = 1;
    if ((awaited[i / 8] >> (i % 8)) & 1u) {
        for (uint32_t p = parked_head[i]; p; p = parked_next[p - 1]) heap_push(h, ready[p - 1], p - 1, 0);
        parked_head[i] = 0;
    }
}

/* Where the core's device requests go: counted against their objects, and kept for the caller. */
struct collector {
    struct dbt_replay_request *buf;
    uint64_t n, cap;
    uint64_t event;
    int keep, oom;
    struct dbt_objio *objects;
    uint64_t issued; /* requests so far: each one's order for the objects' count */
};

static void collect(void *ctx, const struct dbt_request_event *ev) {
    struct collector *c = ctx;
    if (c->objects) dbt_objio_request(c->objects, ev, c->issued++);
    if (!c->keep) return;
    if (c->n == c->cap) {
        uint64_t cap = c->cap ? 2 * c->cap : 4096;
        void *p = realloc(c->buf, cap * sizeof *c->buf);
        if (!p) {
            c->oom = 1;
            return;
        }
        c->buf = p;
        c->cap = cap;
    }
    c->buf[c->n++] = (struct dbt_replay_request){*ev, c->event};
}

/* The device a call goes to: where its file is laid out in the state, when the replay places the
 * calls itself (a file not laid out stays on its recorded device); else the event's own. */
static inline uint8_t device_of(struct dbt_state *s, const struct dbt_replay_event *e, int place) {
    if (!place || e->file < 0 || e->file >= (int64_t)DBT_FILE_CAP) return e->dev;
    struct dbt_file_entry *f = &dbt_files(s)[e->file];
    if (!atomic_load_explicit(&f->key, memory_order_acquire) || f->device >= s->ndev) return e->dev;
    return (uint8_t)f->device;
}

/* The recorded lateness a call keeps: all of it when the events are placed already; else only on
 * the device it was recorded on, and only if that device keeps its recorded profile. */
static inline uint64_t lateness_of(const struct dbt_replay_event *e, uint8_t dev, const struct dbt_replay_options *opt) {
    if (!opt->place) return e->late_ns;
    return dev == e->dev && e->dev < 32 && ((opt->same_devices >> e->dev) & 1u) ? e->late_ns : 0;
}

/* When the core hears of an event that starts at `start`: a call, once its host call returned (the
 * interposer asks the core then, for a request that arrived at the call's start), so concurrent
 * processes reach the devices' models in the order they did live; a nudged call, that much later or
 * earlier (only the order among processes moves: a stream's next event comes once this one is done). */
static uint64_t asked_at(const struct dbt_replay_event *e, uint64_t start) {
    if (e->kind != DBT_TK_CALL) return start;
    uint64_t returned = start + e->host_ns;
    if (e->nudge_ns >= 0) return returned + (uint64_t)e->nudge_ns;
    uint64_t earlier = (uint64_t)(-(int64_t)e->nudge_ns);
    return returned > earlier ? returned - earlier : 0;
}

static inline int is_async(const struct dbt_replay_event *e) {
    return e->kind == DBT_TK_CALL && (e->flags & DBT_TF_ASYNC);
}

static inline struct dbt_call call_of(struct dbt_state *s, const struct dbt_replay_event *e, uint64_t start,
                                      int place) {
    return (struct dbt_call){start, start + e->host_ns, e->off, e->len, e->file_size, e->file, e->aux, e->op,
                             device_of(s, e, place), (uint8_t)(e->flags & (DBT_TF_DIRECT | DBT_TF_DSYNC))};
}

static uint64_t scaled(uint64_t gap, double k) { return k == 1.0 ? gap : (uint64_t)((double)gap * k + 0.5); }

/* The gap the process spent between its previous event and this one (its own CPU time). */
static uint64_t gap_before(const struct dbt_replay_event *ev, uint64_t i, uint64_t first, uint64_t origin) {
    uint64_t prev_end = i == first ? origin : ev[i - 1].t1;
    return ev[i].t0 > prev_end ? ev[i].t0 - prev_end : 0;
}

/* What one event may ask of the core (see replay.h): beyond these a trace is damaged, and a single
 * such call could keep the page cache's loops busy for hours. */
static const char *event_problem(const struct dbt_replay_event *e) {
    if (e->t0 > DBT_REPLAY_MAX_TIME || e->t1 > DBT_REPLAY_MAX_TIME || e->t1 < e->t0)
        return "its times are out of range or reversed";
    if (e->host_ns > DBT_REPLAY_MAX_TIME || e->late_ns > DBT_REPLAY_MAX_TIME) return "its host time is out of range";
    if (e->kind == DBT_TK_SYNC) return e->op == DBT_SYNC_WAKE || e->op == DBT_SYNC_SLEEP ? NULL : "an unknown sync";
    if (e->kind != DBT_TK_CALL) return "an unknown kind";
    if (e->op < DBT_TOP_READ || e->op > DBT_TOP_ADVISE) return "an unknown operation";
    if (e->file < -1 || e->file >= (int64_t)DBT_FILE_CAP) return "a file index beyond the file table";
    if (e->len > DBT_REPLAY_MAX_LEN) return "more bytes than one call moves";
    if ((e->op == DBT_TOP_READ || e->op == DBT_TOP_ADVISE) && e->len > DBT_REPLAY_MAX_READ)
        return "more bytes than one read moves";
    if (e->off > DBT_REPLAY_MAX_END - e->len) return "bytes beyond the largest file";
    return NULL;
}

void dbt_replay_events_of(const struct dbt_trace_rec *r, uint64_t n, const int64_t *stream, const int64_t *dep,
                          const int64_t *guard, struct dbt_replay_event *out) {
    for (uint64_t i = 0; i < n; i++) {
        const struct dbt_trace_rec *x = &r[i];
        int call = x->kind == DBT_TK_CALL;
        uint64_t host_end = x->start_ns > x->submit_ns ? x->start_ns : x->submit_ns;
        uint64_t waited_until = x->complete_ns > host_end ? x->complete_ns : host_end;
        int size_known = call && x->op == DBT_TOP_READ && x->aux != DBT_TRACE_SIZE_UNKNOWN;
        /* an asynchronous call's process went on when its host call returned: its reap's lateness is
         * the reap's (a sleep's recorded time), not the call's */
        int async = call && (x->flags & DBT_TF_ASYNC);
        uint64_t returned = async ? host_end : x->end_ns;
        out[i] = (struct dbt_replay_event){
            .t0 = x->submit_ns,
            .t1 = returned > x->submit_ns ? returned : x->submit_ns,
            .host_ns = call ? host_end - x->submit_ns : 0,
            .late_ns = call && !async && x->end_ns > waited_until ? x->end_ns - waited_until : 0,
            .done_ns = async ? waited_until : 0,
            .off = x->offset,
            .len = x->len,
            .file_size = size_known ? (uint64_t)x->aux * DBT_TRACE_SIZE_PAGE : UINT64_MAX,
            .file = x->file,
            .dep = dep[i],
            .guard = guard[i],
            .stream = (uint32_t)stream[i],
            .aux = call && x->op != DBT_TOP_READ ? x->aux : 0,
            .kind = x->kind,
            .op = x->op,
            .dev = call ? x->dev : 0,
            .flags = call ? (uint8_t)(x->flags & (DBT_TF_DIRECT | DBT_TF_DSYNC | DBT_TF_ASYNC)) : x->flags,
        };
    }
}

int dbt_replay(struct dbt_state *s, const struct dbt_replay_event *ev, uint64_t n, uint64_t recorded_from,
               uint64_t replay_from, double cpu_scale, const atomic_int *cancel, struct dbt_replay_result *out,
               char *err, size_t errlen) {
    return dbt_replay_with(s, ev, n, recorded_from, replay_from, cpu_scale, NULL, cancel, out, err, errlen);
}

int dbt_replay_with(struct dbt_state *s, const struct dbt_replay_event *ev, uint64_t n, uint64_t recorded_from,
                    uint64_t replay_from, double cpu_scale, const struct dbt_replay_options *options,
                    const atomic_int *cancel, struct dbt_replay_result *out, char *err, size_t errlen) {
    static const struct dbt_replay_options as_given = {0, 0, 1, NULL};
    const struct dbt_replay_options *opt = options ? options : &as_given;
    out->requests = NULL;
    out->nrequests = 0;
    if (!(cpu_scale > 0) || cpu_scale > DBT_REPLAY_MAX_CPU_SCALE) {
        snprintf(err, errlen, "the CPU scale must be above 0 and at most %g", DBT_REPLAY_MAX_CPU_SCALE);
        return -1;
    }
    if (recorded_from > DBT_REPLAY_MAX_TIME || replay_from > DBT_REPLAY_MAX_TIME) {
        snprintf(err, errlen, "the interval's start is out of range");
        return -1;
    }
    uint64_t *first = NULL, *next = NULL, *ready = NULL;
    uint32_t *parked_next = NULL, *parked_head = NULL, *asked = NULL;
    uint8_t *done = NULL, *awaited = NULL;
    struct dbt_outcome *waiting = NULL;
    struct pending *pending = NULL;
    struct heap h = {NULL, 0};
    struct collector col = {NULL, 0, 0, 0, opt->requests != 0, 0, opt->objects, 0};
    int rc = -1;
    /* per event, a bit: a wake some sleep depends on (only those can have processes parked on them) */
    awaited = calloc(n / 8 + 1, 1);
    /* streams are contiguous runs of one stream id: where each begins (and, last, the end), found as
     * the events are checked */
    uint32_t nstreams = 0, cap = 64;
    uint64_t nasync = 0, slots = 0; /* asynchronous calls; those given a slot while a drive chooses */
    first = malloc(cap * sizeof *first);
    if (!awaited || !first) {
        snprintf(err, errlen, "out of memory for %llu events", (unsigned long long)n);
        goto out;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (i == 0 || ev[i].stream != ev[i - 1].stream) {
            if (nstreams + 1 == cap) { /* room for this one and the end */
                void *p = cap < UINT32_MAX / 2 ? realloc(first, 2 * (uint64_t)cap * sizeof *first) : NULL;
                if (!p) {
                    snprintf(err, errlen, "out of memory for %llu events", (unsigned long long)n);
                    goto out;
                }
                first = p;
                cap *= 2;
            }
            first[nstreams++] = i;
        }
        if (ev[i].kind == DBT_TK_CALL && device_of(s, &ev[i], opt->place) >= s->ndev) {
            snprintf(err, errlen, "event %llu names device %u; the replay has %u", (unsigned long long)i,
                     device_of(s, &ev[i], opt->place), s->ndev);
            goto out;
        }
        const char *why = event_problem(&ev[i]);
        if (why) {
            snprintf(err, errlen, "event %llu cannot be replayed: %s", (unsigned long long)i, why);
            goto out;
        }
        if (ev[i].guard >= (int64_t)n || (ev[i].guard >= 0 && ev[i].dep < 0)) {
            snprintf(err, errlen, "event %llu has a guard %lld beyond the events, or without a dependency",
                     (unsigned long long)i, (long long)ev[i].guard);
            goto out;
        }
        const struct dbt_replay_event *d = ev[i].dep >= 0 && ev[i].dep < (int64_t)n ? &ev[ev[i].dep] : NULL;
        int wake = d && d->kind == DBT_TK_SYNC && d->op == DBT_SYNC_WAKE && d->stream != ev[i].stream;
        /* a reap may wait for a request done at once in io_submit (a buffered one): an ordinary call */
        int reaped = d && (is_async(d) || (d->kind == DBT_TK_CALL && (ev[i].flags & DBT_SF_AIO)));
        if (ev[i].dep >= (int64_t)n || (d && (ev[i].kind != DBT_TK_SYNC || ev[i].op != DBT_SYNC_SLEEP ||
                                              !(wake || (reaped && ev[i].guard < 0))))) {
            snprintf(err, errlen, "event %llu depends on event %lld, which is neither another process's wake nor "
                     "an asynchronous call", (unsigned long long)i, (long long)ev[i].dep);
            goto out;
        }
        if (is_async(&ev[i])) nasync++;
        if (ev[i].dep >= 0) awaited[ev[i].dep / 8] |= (uint8_t)(1u << (ev[i].dep % 8));
    }
    next = calloc(nstreams + 1, sizeof *next);
    ready = calloc(nstreams + 1, sizeof *ready);
    parked_next = calloc(nstreams + 1, sizeof *parked_next);
    parked_head = calloc(n + 1, sizeof *parked_head); /* per wake: the first parked stream + 1 */
    done = calloc(n + 1, 1);
    asked = calloc(nstreams + 1, sizeof *asked); /* per stream: its call's resumes so far */
    waiting = calloc(nstreams + 1, sizeof *waiting); /* a call's outcome while queued */
    pending = calloc(nasync + 1, sizeof *pending); /* per slot: an asynchronous call a drive has yet to choose */
    h.a = nstreams + nasync < UINT32_MAX ? calloc(nstreams + nasync + 1, sizeof(struct heap_item)) : NULL;
    if (!next || !ready || !parked_next || !parked_head || !done || !asked || !waiting || !pending || !h.a) {
        snprintf(err, errlen, "out of memory for %llu events", (unsigned long long)n);
        goto out;
    }
    first[nstreams] = n;
    for (uint32_t st = 0; st < nstreams; st++) {
        next[st] = first[st];
        /* a process that begins asleep, waiting for another, begins when the interval does: when
         * it wakes depends only on that other process (its recorded start is the interval's edge) */
        const struct dbt_replay_event *e0 = &ev[first[st]];
        int waits = e0->kind == DBT_TK_SYNC && e0->op == DBT_SYNC_SLEEP && e0->dep >= 0;
        ready[st] = replay_from + (waits ? 0 : gap_before(ev, first[st], first[st], recorded_from));
        heap_push(&h, asked_at(&ev[first[st]], ready[st]), st, 0);
    }
    struct dbt_emulate_hooks hooks = {col.keep || col.objects ? collect : NULL, NULL, &col};
    uint64_t handled = 0;
    while (h.n) {
        /* Ctrl-C reaches the caller's thread, which sets the flag: looked at before every event (one
         * load; an event may cost a whole 1 GiB read through the page cache, a fraction of a second) */
        if (cancel && atomic_load_explicit(cancel, memory_order_relaxed)) {
            snprintf(err, errlen, "interrupted");
            rc = -2;
            goto out;
        }
        struct heap_item it = h.a[0]; /* taken off, or replaced by its stream's next, below */
        if (it.stream >= nstreams) { /* an asynchronous call's request, asked again by its drive */
            struct pending *p = &pending[it.stream - nstreams];
            const struct dbt_replay_event *e = &ev[p->event];
            struct dbt_call c = call_of(s, e, out->start[p->event], opt->place);
            col.event = p->event;
            dbt_emulate_resume(s, &c, &hooks, it.ready, &p->o);
            if (p->o.ticket) {
                if (++p->asked > DBT_REPLAY_MAX_RESUMES) {
                    snprintf(err, errlen, "event %llu waited in a drive's queue through %u of its choices",
                             (unsigned long long)p->event, DBT_REPLAY_MAX_RESUMES);
                    goto out;
                }
                heap_replace_top(&h, p->o.complete > it.ready ? p->o.complete : it.ready, it.stream, 1);
                continue;
            }
            heap_drop_top(&h);
            out->end[p->event] = dbt_aio_completion(&p->o, c.host_end);
            if (out->flags) out->flags[p->event] = p->o.flags;
            finished(&h, p->event, done, awaited, parked_head, parked_next, ready);
            handled++;
            continue;
        }
        uint32_t st = it.stream;
        uint64_t i = next[st];
        const struct dbt_replay_event *e = &ev[i];
        uint64_t start = ready[st], end, goes_on; /* the event ends; its process goes on */
        uint8_t flags = 0;
        struct pending *later = NULL; /* an asynchronous call a drive has yet to choose */
        /* the waker was still asleep when this process came (it pops first: nothing earlier is left) */
        int unheld = e->kind == DBT_TK_SYNC && e->op == DBT_SYNC_SLEEP && e->dep >= 0 && e->guard >= 0 &&
                     (!done[e->guard] || out->end[e->guard] > start);
        if (e->kind == DBT_TK_SYNC && e->op == DBT_SYNC_SLEEP && e->dep >= 0 && !unheld && !done[e->dep]) {
            parked_next[st] = parked_head[e->dep]; /* wait for the waker to get there */
            parked_head[e->dep] = st + 1;
            heap_drop_top(&h);
            continue;
        }
        if (is_async(e)) { /* its process goes on once the real I/O is done; its request completes later */
            struct dbt_call c = call_of(s, e, start, opt->place);
            struct dbt_outcome o;
            col.event = i;
            dbt_emulate(s, &c, &hooks, &o);
            goes_on = c.host_end;
            if (o.ticket) {
                later = &pending[slots];
                *later = (struct pending){i, o, 0};
                end = 0;
            } else {
                end = dbt_aio_completion(&o, c.host_end);
                flags = o.flags;
            }
        } else if (e->kind == DBT_TK_CALL) {
            uint8_t dev = device_of(s, e, opt->place);
            struct dbt_call c = call_of(s, e, start, opt->place);
            struct dbt_outcome o;
            col.event = i;
            if (it.resume) {
                o = waiting[st];
                dbt_emulate_resume(s, &c, &hooks, it.ready, &o);
            } else {
                dbt_emulate(s, &c, &hooks, &o);
            }
            if (o.ticket) { /* its request waits for the drive's choice: ask again when it is due */
                if (++asked[st] > DBT_REPLAY_MAX_RESUMES) { /* no drive keeps a request that long */
                    snprintf(err, errlen, "event %llu waited in a drive's queue through %u of its choices",
                             (unsigned long long)i, DBT_REPLAY_MAX_RESUMES);
                    goto out;
                }
                waiting[st] = o;
                heap_replace_top(&h, o.complete > it.ready ? o.complete : it.ready, st, 1);
                continue;
            }
            end = start + e->host_ns;
            if (o.wait && o.complete > end) end = o.complete;
            end += lateness_of(e, dev, opt);
            flags = o.flags;
            if (col.objects && (flags & DBT_TF_PAGE_CACHE))
                dbt_objio_call(col.objects, e->file, dev, e->op, flags, (1ull << 63) | i); /* where the placement put it */
            goes_on = end;
        } else if (e->op == DBT_SYNC_SLEEP && e->dep >= 0 && ev[e->dep].kind == DBT_TK_CALL) {
            /* a reap: once its request completed here, as long after as the recorded reap took after the
             * later of its start and that request's recorded completion (one done at once: its call's end) */
            const struct dbt_replay_event *c = &ev[e->dep];
            uint64_t done = is_async(c) ? c->done_ns : c->t1;
            uint64_t recorded = e->t0 > done ? e->t0 : done;
            uint64_t from = out->end[e->dep] > start ? out->end[e->dep] : start;
            end = goes_on = from + (e->t1 > recorded ? e->t1 - recorded : 0);
        } else if (e->op == DBT_SYNC_SLEEP && e->dep >= 0 && unheld) {
            end = goes_on = start;
        } else if (e->op == DBT_SYNC_SLEEP && e->dep >= 0) {
            /* woken by another process: at its wake in the replay, plus the recorded wake-up delay */
            const struct dbt_replay_event *w = &ev[e->dep];
            uint64_t delay = e->t1 > w->t0 ? e->t1 - w->t0 : 0;
            end = out->start[e->dep] + delay;
            if (end < start) end = start;
            goes_on = end;
        } else {
            end = goes_on = start + (e->t1 > e->t0 ? e->t1 - e->t0 : 0);
        }
        out->start[i] = start;
        out->end[i] = end;
        if (out->flags) out->flags[i] = flags;
        asked[st] = 0;
        if (++next[st] < first[st + 1]) {
            ready[st] = goes_on + scaled(gap_before(ev, next[st], first[st], recorded_from), cpu_scale);
            heap_replace_top(&h, asked_at(&ev[next[st]], ready[st]), st, 0);
        } else {
            heap_drop_top(&h);
        }
        if (later) { /* pushed once its stream's item is in place (a push may take the top) */
            heap_push(&h, later->o.complete > start ? later->o.complete : start, nstreams + (uint32_t)slots++, 1);
            continue;
        }
        finished(&h, i, done, awaited, parked_head, parked_next, ready);
        handled++;
    }
    if (col.oom || (col.objects && dbt_objio_failed(col.objects))) {
        snprintf(err, errlen, "out of memory for the replay's device requests%s", col.oom ? "" : " per object");
        goto out;
    }
    if (handled != n) { /* only a wake that never came could leave a process parked */
        snprintf(err, errlen, "%llu events could not be replayed: a process waits for a wake that never comes",
                 (unsigned long long)(n - handled));
        goto out;
    }
    out->requests = col.buf;
    out->nrequests = col.n;
    col.buf = NULL;
    rc = 0;
out:
    free(col.buf);
    free(first);
    free(next);
    free(ready);
    free(parked_next);
    free(parked_head);
    free(done);
    free(asked);
    free(waiting);
    free(pending);
    free(h.a);
    free(awaited);
    return rc;
}
