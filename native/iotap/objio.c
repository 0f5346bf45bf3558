/* Per-object I/O. See objio.h. */
#define _GNU_SOURCE
#include "objio.h"

#include <stdlib.h>
#include <string.h>

#include "mix.h"

/* A transfer, for the sequential count: kept in arrival order per file and device. */
struct transfer {
    uint64_t arrival, off, end;
};

struct entry {
    struct dbt_objio_row row;
    uint64_t first;      /* the smallest order given for anything of this file on this device */
    struct transfer *x;  /* in arrival order; the memory stays with the slot across resets */
    uint64_t nx, capx;
};

struct dbt_objio {
    struct entry *e; /* in the order made */
    uint64_t n, cap;
    uint32_t *slot; /* open addressing on (file, device): entry index + 1 */
    uint64_t nslots;
    uint64_t last; /* the entry last used + 1: consecutive records mostly touch the same file */
    int failed;
};

struct dbt_objio *dbt_objio_new(void) { return calloc(1, sizeof(struct dbt_objio)); }

void dbt_objio_free(struct dbt_objio *o) {
    if (!o) return;
    for (uint64_t i = 0; i < o->cap; i++) free(o->e[i].x);
    free(o->e);
    free(o->slot);
    free(o);
}

void dbt_objio_reset(struct dbt_objio *o) {
    for (uint64_t i = 0; i < o->n; i++) {
        memset(&o->e[i].row, 0, sizeof o->e[i].row);
        o->e[i].nx = 0;
    }
    if (o->slot) memset(o->slot, 0, o->nslots * sizeof *o->slot);
    o->n = o->last = 0;
    o->failed = 0;
}

int dbt_objio_failed(const struct dbt_objio *o) { return o->failed; }

static uint64_t slot_of(int64_t file, uint32_t dev, uint64_t nslots) {
    return dbt_mix64((uint64_t)file * 0x9e3779b97f4a7c15ull ^ dev) & (nslots - 1);
}

/* Room for one more entry, the table at most half full. */
static int grow(struct dbt_objio *o) {
    if (o->n == o->cap) {
        uint64_t cap = o->cap ? 2 * o->cap : 64;
        struct entry *e = realloc(o->e, cap * sizeof *e);
        if (!e) return -1;
        memset(e + o->cap, 0, (cap - o->cap) * sizeof *e);
        o->e = e;
        o->cap = cap;
    }
    if (2 * (o->n + 1) > o->nslots) {
        uint64_t nslots = o->nslots ? 2 * o->nslots : 256;
        uint32_t *slot = calloc(nslots, sizeof *slot);
        if (!slot) return -1;
        for (uint64_t i = 0; i < o->n; i++) {
            uint64_t h = slot_of(o->e[i].row.file, o->e[i].row.dev, nslots);
            while (slot[h]) h = (h + 1) & (nslots - 1);
            slot[h] = (uint32_t)(i + 1);
        }
        free(o->slot);
        o->slot = slot;
        o->nslots = nslots;
    }
    return 0;
}

/* The file's entry on the device, made on first sight; NULL when memory ran out. */
static struct entry *entry_of(struct dbt_objio *o, int64_t file, uint32_t dev, uint64_t order) {
    struct entry *e = o->last ? &o->e[o->last - 1] : NULL;
    if (!e || e->row.file != file || e->row.dev != dev) {
        e = NULL;
        if (o->nslots) {
            for (uint64_t h = slot_of(file, dev, o->nslots); o->slot[h]; h = (h + 1) & (o->nslots - 1)) {
                struct entry *x = &o->e[o->slot[h] - 1];
                if (x->row.file == file && x->row.dev == dev) {
                    e = x;
                    break;
                }
            }
        }
        if (!e) {
            if (o->n >= UINT32_MAX - 1 || grow(o) != 0) {
                o->failed = 1;
                return NULL;
            }
            uint64_t h = slot_of(file, dev, o->nslots);
            while (o->slot[h]) h = (h + 1) & (o->nslots - 1);
            o->slot[h] = (uint32_t)(o->n + 1);
            e = &o->e[o->n++];
            e->row.file = file;
            e->row.dev = dev;
            e->first = order;
        }
        o->last = (uint64_t)(e - o->e) + 1;
    }
    if (order < e->first) e->first = order;
    return e;
}

/* Keeps the transfer in arrival order (after those that arrived at the same time): requests come
 * nearly in arrival order, so it is mostly an append. */
static void add_transfer(struct dbt_objio *o, struct entry *e, uint64_t arrival, uint64_t off, uint64_t len) {
    if (e->nx == e->capx) {
        uint64_t cap = e->capx ? 2 * e->capx : 16;
        struct transfer *x = realloc(e->x, cap * sizeof *x);
        if (!x) {
            o->failed = 1;
            return;
        }
        e->x = x;
        e->capx = cap;
    }
    uint64_t i = e->nx;
    while (i && e->x[i - 1].arrival > arrival) i--;
    if (i < e->nx) memmove(&e->x[i + 1], &e->x[i], (e->nx - i) * sizeof *e->x);
    e->x[i] = (struct transfer){arrival, off, off + len};
    e->nx++;
}

static void request(struct dbt_objio *o, int64_t file, uint32_t dev, uint8_t op, uint8_t flags, uint64_t arrival,
                    uint64_t complete, uint64_t off, uint64_t len, uint64_t order) {
    struct entry *e = entry_of(o, file, dev, order);
    if (!e) return;
    struct dbt_objio_row *r = &e->row;
    if (op == DBT_OP_READ) {
        r->reads++;
        r->read_bytes += len;
    } else if (op == DBT_OP_WRITE) {
        r->writes++;
        r->write_bytes += len;
    } else if (op == DBT_OP_FLUSH) {
        r->flushes++; /* an O_DSYNC write's flush is a request of its own */
    } else {
        return;
    }
    r->device_ns += complete - arrival;
    if (op == DBT_OP_FLUSH) return;
    if (flags & DBT_TF_ASYNC) r->async++;
    add_transfer(o, e, arrival, off, len);
}

void dbt_objio_request(struct dbt_objio *o, const struct dbt_request_event *ev, uint64_t order) {
    request(o, ev->file, ev->dev, ev->op, ev->flags, ev->arrival, ev->complete, ev->off, ev->len, order);
}

void dbt_objio_call(struct dbt_objio *o, int64_t file, uint32_t dev, uint8_t op, uint8_t flags, uint64_t order) {
    struct entry *e = entry_of(o, file, dev, order);
    if (e && op == DBT_TOP_READ && (flags & DBT_TF_PAGE_CACHE)) e->row.cached_reads++;
}

void dbt_objio_records(struct dbt_objio *o, const struct dbt_trace_rec *r, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        if (r[i].kind == DBT_TK_REQUEST)
            request(o, r[i].file, r[i].dev, r[i].op, r[i].flags, r[i].submit_ns, r[i].complete_ns, r[i].offset,
                    r[i].len, i);
        else if (r[i].kind == DBT_TK_CALL)
            dbt_objio_call(o, r[i].file, r[i].dev, r[i].op, r[i].flags, i);
        else
            (void)entry_of(o, r[i].file, r[i].dev, i);
    }
}

/* Rows by their file's first sight, then device. */
struct ranked {
    uint64_t file_first;
    int64_t file;
    uint32_t dev;
    uint32_t entry;
};

static int by_file(const void *a, const void *b) {
    const struct ranked *x = a, *y = b;
    if (x->file != y->file) return x->file < y->file ? -1 : 1;
    return 0;
}

static int by_rank(const void *a, const void *b) {
    const struct ranked *x = a, *y = b;
    if (x->file_first != y->file_first) return x->file_first < y->file_first ? -1 : 1;
    if (x->file != y->file) return x->file < y->file ? -1 : 1;
    return x->dev < y->dev ? -1 : x->dev > y->dev;
}

uint64_t dbt_objio_rows(struct dbt_objio *o, struct dbt_objio_row *out, uint64_t cap) {
    if (!out || !cap || !o->n) return o->n;
    struct ranked *rk = malloc(o->n * sizeof *rk);
    if (!rk) {
        o->failed = 1;
        return 0;
    }
    for (uint64_t i = 0; i < o->n; i++) rk[i] = (struct ranked){o->e[i].first, o->e[i].row.file, o->e[i].row.dev, (uint32_t)i};
    qsort(rk, o->n, sizeof *rk, by_file);
    for (uint64_t i = 0, j; i < o->n; i = j) { /* a file is first met where any of its devices was */
        uint64_t first = rk[i].file_first;
        for (j = i + 1; j < o->n && rk[j].file == rk[i].file; j++)
            if (rk[j].file_first < first) first = rk[j].file_first;
        for (uint64_t k = i; k < j; k++) rk[k].file_first = first;
    }
    qsort(rk, o->n, sizeof *rk, by_rank);
    for (uint64_t i = 0; i < o->n && i < cap; i++) {
        struct entry *e = &o->e[rk[i].entry];
        e->row.sequential = 0;
        for (uint64_t k = 1; k < e->nx; k++) e->row.sequential += e->x[k].off == e->x[k - 1].end;
        out[i] = e->row;
    }
    free(rk);
    return o->n;
}
