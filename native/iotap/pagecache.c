/* The emulated OS page cache. See pagecache.h. */
#define _GNU_SOURCE
#include "pagecache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devmodel.h"
#include "mix.h"
#include "shmlock.h"

#define PC_REF 0x1u   /* referenced since the clock hand last passed */
#define PC_DIRTY 0x2u /* modified, not yet written back */
#define PC_MARK 0x4u  /* reaching it starts the next read-ahead window */
#define MAX_WRITEBACK_PAGES 256u /* one writeback request covers at most 1 MiB */

static inline uint32_t *buckets(struct dbt_pc *pc) { return (uint32_t *)((char *)pc + pc->off_buckets); }
static inline struct dbt_pc_page *pages(struct dbt_pc *pc) { return (struct dbt_pc_page *)((char *)pc + pc->off_pages); }
static inline struct dbt_pc_file *files(struct dbt_pc *pc) { return (struct dbt_pc_file *)((char *)pc + pc->off_files); }
static inline uint64_t key_of(int64_t file, uint64_t page) { return ((uint64_t)(file + 1) << 44) | page; }
static inline int64_t file_of(uint64_t key) { return (int64_t)(key >> 44) - 1; }
static inline uint64_t page_of(uint64_t key) { return key & ((1ull << 44) - 1); }
static inline uint32_t bucket_of(struct dbt_pc *pc, uint64_t key) { return (uint32_t)(dbt_mix64(key) & (pc->nbuckets - 1)); }

static uint32_t pow2_at_least(uint64_t n) {
    uint32_t p = 1;
    while (p < n && p < (1u << 30)) p <<= 1;
    return p;
}

static uint64_t layout(uint64_t bytes, uint32_t *npages, uint32_t *nbuckets, uint64_t *ob, uint64_t *op, uint64_t *of) {
    uint64_t n = bytes / DBT_PC_PAGE;
    if (n < 4) n = 4;
    if (n > (1u << 30)) n = 1u << 30;
    *npages = (uint32_t)n;
    *nbuckets = pow2_at_least(n);
    *ob = (sizeof(struct dbt_pc) + 63) & ~63ull;
    *op = (*ob + sizeof(uint32_t) * (uint64_t)*nbuckets + 63) & ~63ull;
    *of = (*op + sizeof(struct dbt_pc_page) * n + 63) & ~63ull;
    return *of + sizeof(struct dbt_pc_file) * (uint64_t)DBT_PC_FILES;
}

uint64_t dbt_pc_region_size(uint64_t bytes) {
    uint32_t np, nb;
    uint64_t ob, op, of;
    return layout(bytes, &np, &nb, &ob, &op, &of);
}

void dbt_pc_init(struct dbt_pc *pc, uint64_t bytes, uint32_t readahead_kb, uint32_t dirty_bg_pct, uint32_t dirty_pct) {
    layout(bytes, &pc->npages, &pc->nbuckets, &pc->off_buckets, &pc->off_pages, &pc->off_files);
    dbt_shmlock_init(&pc->lock);
    pc->ra_max_pages = readahead_kb / 4 ? readahead_kb / 4 : 1;
    pc->dirty_bg_pages = (uint32_t)((uint64_t)pc->npages * dirty_bg_pct / 100);
    pc->dirty_limit_pages = (uint32_t)((uint64_t)pc->npages * dirty_pct / 100);
    if (pc->dirty_bg_pages < 1) pc->dirty_bg_pages = 1;
    if (pc->dirty_limit_pages <= pc->dirty_bg_pages) pc->dirty_limit_pages = pc->dirty_bg_pages + 1;
}

int dbt_pc_check(const struct dbt_pc *pc, uint64_t bytes, uint64_t region_bytes, char *err, size_t errlen) {
    uint32_t np, nb;
    uint64_t ob, op, of;
    uint64_t need = layout(bytes, &np, &nb, &ob, &op, &of);
    typedef unsigned long long ull;
    if (need > region_bytes) {
        snprintf(err, errlen, "a page cache of %llu bytes needs %llu bytes, its region has %llu", (ull)bytes,
                 (ull)need, (ull)region_bytes);
        return -1;
    }
    if (pc->npages != np || pc->nbuckets != nb) {
        snprintf(err, errlen, "the page cache has %u pages in %u buckets, expected %u in %u for %llu bytes",
                 pc->npages, pc->nbuckets, np, nb, (ull)bytes);
        return -1;
    }
    if (pc->off_buckets != ob || pc->off_pages != op || pc->off_files != of) {
        snprintf(err, errlen, "the page cache's tables lie at %llu, %llu, %llu, expected %llu, %llu, %llu",
                 (ull)pc->off_buckets, (ull)pc->off_pages, (ull)pc->off_files, (ull)ob, (ull)op, (ull)of);
        return -1;
    }
    /* dbt_pc_init: readahead_kb / 4 pages; the dirty limits from percentages of npages, bg >= 1, limit > bg */
    if (pc->ra_max_pages < 1 || pc->ra_max_pages > DBT_PC_READAHEAD_KB_MAX / 4 || pc->dirty_bg_pages < 1 ||
        pc->dirty_bg_pages > np || pc->dirty_limit_pages <= pc->dirty_bg_pages || pc->dirty_limit_pages > np + 1) {
        snprintf(err, errlen,
                 "the page cache's limits are out of range (read-ahead %u pages, dirty %u and %u of %u pages)",
                 pc->ra_max_pages, pc->dirty_bg_pages, pc->dirty_limit_pages, np);
        return -1;
    }
    if (pc->hand >= np || pc->free_next > np) {
        snprintf(err, errlen, "the page cache's clock hand %u or free position %u is beyond its %u pages", pc->hand,
                 pc->free_next, np);
        return -1;
    }
    /* list ends are index + 1 (0: empty); an empty list has neither end and no dirty pages */
    if (pc->dirty_head > np || pc->dirty_tail > np || pc->ndirty > np ||
        (pc->dirty_head == 0) != (pc->dirty_tail == 0) || (pc->ndirty == 0) != (pc->dirty_head == 0)) {
        snprintf(err, errlen, "the page cache's dirty list is inconsistent (head %u, tail %u, %llu pages of %u)",
                 pc->dirty_head, pc->dirty_tail, (ull)pc->ndirty, np);
        return -1;
    }
    return 0;
}

static void pc_lock(struct dbt_pc *pc) { dbt_shmlock_lock(&pc->lock); }
static void pc_unlock(struct dbt_pc *pc) { pthread_mutex_unlock(&pc->lock); }

/* ---- the hash and the dirty list ---------------------------------------------------------- */

static struct dbt_pc_page *find(struct dbt_pc *pc, uint64_t key) {
    struct dbt_pc_page *pg = pages(pc);
    for (uint32_t i = buckets(pc)[bucket_of(pc, key)]; i; i = pg[i - 1].hnext)
        if (pg[i - 1].key == key) return &pg[i - 1];
    return NULL;
}

static void hash_remove(struct dbt_pc *pc, uint32_t idx) {
    struct dbt_pc_page *pg = pages(pc);
    uint32_t *link = &buckets(pc)[bucket_of(pc, pg[idx].key)];
    while (*link && *link != idx + 1) link = &pg[*link - 1].hnext;
    if (*link) *link = pg[idx].hnext;
    pg[idx].hnext = 0;
}

static void dirty_add(struct dbt_pc *pc, uint32_t idx) {
    struct dbt_pc_page *pg = pages(pc);
    pg[idx].flags |= PC_DIRTY;
    pg[idx].dnext = 0;
    pg[idx].dprev = pc->dirty_tail;
    if (pc->dirty_tail) pg[pc->dirty_tail - 1].dnext = idx + 1;
    else pc->dirty_head = idx + 1;
    pc->dirty_tail = idx + 1;
    pc->ndirty++;
}

static void dirty_remove(struct dbt_pc *pc, uint32_t idx) {
    struct dbt_pc_page *pg = pages(pc);
    if (!(pg[idx].flags & PC_DIRTY)) return;
    if (pg[idx].dprev) pg[pg[idx].dprev - 1].dnext = pg[idx].dnext;
    else pc->dirty_head = pg[idx].dnext;
    if (pg[idx].dnext) pg[pg[idx].dnext - 1].dprev = pg[idx].dprev;
    else pc->dirty_tail = pg[idx].dprev;
    pg[idx].dnext = pg[idx].dprev = 0;
    pg[idx].flags &= (uint8_t)~PC_DIRTY;
    pc->ndirty--;
}

static void evict(struct dbt_pc *pc, uint32_t idx) {
    dirty_remove(pc, idx);
    hash_remove(pc, idx);
    memset(&pages(pc)[idx], 0, sizeof(struct dbt_pc_page));
}

/* ---- writeback ---------------------------------------------------------------------------- */

static int by_key(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Writes the listed dirty pages (indices) back, contiguous runs of a file as one request each;
 * they are clean from now on. Returns the last completion. */
static uint64_t write_pages(struct dbt_pc *pc, uint32_t *idx, uint32_t n, uint64_t now, int async, dbt_pc_io_fn io,
                            void *ctx, struct dbt_pc_stats *st) {
    if (!n) return now;
    struct dbt_pc_page *pg = pages(pc);
    uint64_t *keys = malloc(sizeof(uint64_t) * n);
    if (!keys) return now;
    for (uint32_t i = 0; i < n; i++) {
        keys[i] = pg[idx[i]].key;
        dirty_remove(pc, idx[i]);
    }
    qsort(keys, n, sizeof *keys, by_key);
    uint64_t done = now;
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i + 1;
        while (j < n && keys[j] == keys[j - 1] + 1 && j - i < MAX_WRITEBACK_PAGES) j++;
        uint64_t c = io(ctx, DBT_OP_WRITE, file_of(keys[i]), page_of(keys[i]) * DBT_PC_PAGE,
                        (uint64_t)(j - i) * DBT_PC_PAGE, now, async);
        if (st) st->writeback_bytes += (uint64_t)(j - i) * DBT_PC_PAGE;
        if (c > done) done = c;
        i = j;
    }
    free(keys);
    return done;
}

/* The oldest dirty pages, until at most `keep` stay dirty. */
static uint64_t write_oldest(struct dbt_pc *pc, uint64_t keep, uint64_t now, int async, dbt_pc_io_fn io, void *ctx,
                             struct dbt_pc_stats *st) {
    if (pc->ndirty <= keep) return now;
    uint32_t n = (uint32_t)(pc->ndirty - keep);
    uint32_t *idx = malloc(sizeof(uint32_t) * n);
    if (!idx) return now;
    uint32_t k = 0;
    for (uint32_t i = pc->dirty_head; i && k < n; i = pages(pc)[i - 1].dnext) idx[k++] = i - 1;
    uint64_t done = write_pages(pc, idx, k, now, async, io, ctx, st);
    free(idx);
    return done;
}

/* ---- allocation: CLOCK ---------------------------------------------------------------------- */

static uint32_t alloc_page(struct dbt_pc *pc, uint64_t now, dbt_pc_io_fn io, void *ctx, struct dbt_pc_stats *st) {
    if (pc->free_next < pc->npages) return pc->free_next++;
    struct dbt_pc_page *pg = pages(pc);
    for (uint64_t step = 0; step < 3ull * pc->npages; step++) {
        uint32_t i = pc->hand;
        pc->hand = (pc->hand + 1) % pc->npages;
        if (!pg[i].key) return i;
        if (pg[i].flags & PC_REF) {
            pg[i].flags &= (uint8_t)~PC_REF; /* a second chance */
            continue;
        }
        if (pg[i].ready_ns > now) continue; /* its read is still in flight */
        if (pg[i].flags & PC_DIRTY) {       /* reclaim writes it back and takes the next one */
            write_pages(pc, &i, 1, now, 1, io, ctx, st);
            continue;
        }
        evict(pc, i);
        return i;
    }
    uint32_t i = pc->hand; /* everything referenced or in flight: take the next one anyway */
    pc->hand = (pc->hand + 1) % pc->npages;
    if (pg[i].flags & PC_DIRTY) write_pages(pc, &i, 1, now, 1, io, ctx, st);
    evict(pc, i);
    return i;
}

static struct dbt_pc_page *insert(struct dbt_pc *pc, uint64_t key, uint64_t ready, uint64_t now, dbt_pc_io_fn io,
                                  void *ctx, struct dbt_pc_stats *st) {
    uint32_t i = alloc_page(pc, now, io, ctx, st);
    struct dbt_pc_page *p = &pages(pc)[i];
    p->key = key;
    p->ready_ns = ready;
    p->flags = PC_REF;
    uint32_t b = bucket_of(pc, key);
    p->hnext = buckets(pc)[b];
    buckets(pc)[b] = i + 1;
    return p;
}

/* ---- reads ---------------------------------------------------------------------------------- */

/* Linux's get_init_ra_size and get_next_ra_size, in pages. */
static uint32_t init_window(struct dbt_pc *pc, uint64_t req) {
    uint32_t size = pow2_at_least(req), max = pc->ra_max_pages;
    if (size <= max / 32) size *= 4;
    else if (size <= max / 4) size *= 2;
    else size = max;
    return size < max ? size : max;
}
static uint32_t next_window(struct dbt_pc *pc, uint32_t cur) {
    uint32_t max = pc->ra_max_pages;
    uint32_t size = cur < max / 16 ? cur * 4 : cur * 2;
    return size < max ? size : max;
}

/* Reads the missing pages of [from, to] (inclusive; stops at the first present page) as one device
 * request; inserts them with their arrival time. Returns the number of pages read. */
static uint64_t fetch(struct dbt_pc *pc, int64_t file, uint64_t from, uint64_t to, uint64_t now, int async,
                      dbt_pc_io_fn io, void *ctx, struct dbt_pc_stats *st, uint64_t *done) {
    uint64_t end = from;
    while (end < to && !find(pc, key_of(file, end + 1))) end++;
    if (find(pc, key_of(file, from))) return 0;
    uint64_t c = io(ctx, DBT_OP_READ, file, from * DBT_PC_PAGE, (end - from + 1) * DBT_PC_PAGE, now, async);
    for (uint64_t q = from; q <= end; q++) insert(pc, key_of(file, q), c, now, io, ctx, st);
    if (done && c > *done) *done = c;
    return end - from + 1;
}

/* The reader reached a window's marker: the next window is read without waiting for it. */
static void async_readahead(struct dbt_pc *pc, struct dbt_pc_file *f, int64_t file, uint64_t now, dbt_pc_io_fn io,
                            void *ctx, struct dbt_pc_stats *st) {
    uint32_t w = next_window(pc, f->window);
    uint64_t start = f->ahead_end;
    if (start >= f->eof_pages) return; /* nothing beyond the end of the file */
    uint64_t to = start + w - 1 < f->eof_pages ? start + w - 1 : f->eof_pages - 1;
    uint64_t got = fetch(pc, file, start, to, now, 1, io, ctx, st, NULL);
    st->readahead_bytes += got * DBT_PC_PAGE;
    f->window = w;
    f->ahead_end = start + w;
    struct dbt_pc_page *m = got ? find(pc, key_of(file, start)) : NULL;
    if (m) m->flags |= PC_MARK;
    f->mark_page = m ? start : 0;
}

uint64_t dbt_pc_read(struct dbt_pc *pc, int64_t file, uint64_t off, uint64_t len, uint64_t file_size, uint64_t now,
                     dbt_pc_io_fn io, void *ctx, struct dbt_pc_stats *st) {
    if (!len || file < 0 || file >= (int64_t)DBT_PC_FILES) return now;
    pc_lock(pc);
    uint64_t first = off / DBT_PC_PAGE, last = (off + len - 1) / DBT_PC_PAGE, done = now;
    struct dbt_pc_file *f = &files(pc)[file];
    f->eof_pages = file_size == UINT64_MAX ? UINT64_MAX : (file_size + DBT_PC_PAGE - 1) / DBT_PC_PAGE;
    if (f->eof_pages < last + 1) f->eof_pages = last + 1;
    int sequential = first == f->next_page || (first + 1 == f->next_page && f->next_page);
    for (uint64_t page = first; page <= last;) {
        struct dbt_pc_page *p = find(pc, key_of(file, page));
        if (p) {
            st->hit_pages++;
            p->flags |= PC_REF;
            if (p->ready_ns > done) done = p->ready_ns;
            if (p->flags & PC_MARK) {
                p->flags &= (uint8_t)~PC_MARK;
                if (sequential) async_readahead(pc, f, file, now, io, ctx, st);
            }
            page++;
            continue;
        }
        uint64_t end = page; /* the run of missing pages the caller needs */
        while (end < last && !find(pc, key_of(file, end + 1))) end++;
        st->miss_pages += end - page + 1;
        uint64_t to = end;
        if (sequential) { /* a synchronous read-ahead: the request and a window beyond it, in one read */
            uint32_t w = f->window ? next_window(pc, f->window) : init_window(pc, last - first + 1);
            if (page + w - 1 > to) to = page + w - 1;
            if (to >= f->eof_pages) to = end > f->eof_pages - 1 ? end : f->eof_pages - 1;
            f->window = w;
        }
        uint64_t got = fetch(pc, file, page, to, now, 0, io, ctx, st, &done);
        if (sequential) {
            f->ahead_end = page + got;
            if (got > end - page + 1) { /* the window's first page beyond the request carries the marker */
                st->readahead_bytes += (got - (end - page + 1)) * DBT_PC_PAGE;
                struct dbt_pc_page *m = find(pc, key_of(file, end + 1));
                if (m) m->flags |= PC_MARK;
                f->mark_page = end + 1;
            } else { /* the request filled the window: Linux marks its first page, met at once */
                async_readahead(pc, f, file, now, io, ctx, st);
            }
        }
        page = end + 1;
    }
    f->next_page = last + 1;
    pc_unlock(pc);
    return done;
}

void dbt_pc_willneed(struct dbt_pc *pc, int64_t file, uint64_t off, uint64_t len, uint64_t now, dbt_pc_io_fn io,
                     void *ctx, struct dbt_pc_stats *st) {
    if (!len || file < 0 || file >= (int64_t)DBT_PC_FILES) return;
    pc_lock(pc);
    uint64_t first = off / DBT_PC_PAGE, last = (off + len - 1) / DBT_PC_PAGE;
    for (uint64_t page = first; page <= last; page++) {
        if (find(pc, key_of(file, page))) continue;
        uint64_t got = fetch(pc, file, page, last, now, 1, io, ctx, st, NULL);
        st->readahead_bytes += got * DBT_PC_PAGE;
        page += got ? got - 1 : 0;
    }
    pc_unlock(pc);
}

/* ---- writes --------------------------------------------------------------------------------- */

/* Writes back the file's dirty pages with page numbers in [first, last]. Lock held. */
static uint64_t writeback_range(struct dbt_pc *pc, int64_t file, uint64_t first, uint64_t last, uint64_t now,
                                int async, dbt_pc_io_fn io, void *ctx, struct dbt_pc_stats *st) {
    if (!pc->ndirty) return now;
    uint32_t *idx = malloc(sizeof(uint32_t) * pc->ndirty);
    if (!idx) return now;
    uint32_t n = 0;
    struct dbt_pc_page *pg = pages(pc);
    for (uint32_t i = pc->dirty_head; i; i = pg[i - 1].dnext) {
        uint64_t key = pg[i - 1].key;
        if (file_of(key) == file && page_of(key) >= first && page_of(key) <= last) idx[n++] = i - 1;
    }
    uint64_t done = write_pages(pc, idx, n, now, async, io, ctx, st);
    free(idx);
    return done;
}

uint64_t dbt_pc_write(struct dbt_pc *pc, int64_t file, uint64_t off, uint64_t len, uint64_t now, int write_through,
                      dbt_pc_io_fn io, void *ctx, struct dbt_pc_stats *st) {
    if (!len || file < 0 || file >= (int64_t)DBT_PC_FILES) return now;
    pc_lock(pc);
    uint64_t first = off / DBT_PC_PAGE, last = (off + len - 1) / DBT_PC_PAGE, done = now;
    struct dbt_pc_page *pg = pages(pc);
    for (uint64_t page = first; page <= last; page++) {
        struct dbt_pc_page *p = find(pc, key_of(file, page));
        if (!p) p = insert(pc, key_of(file, page), now, now, io, ctx, st);
        p->flags |= PC_REF;
        if (!(p->flags & PC_DIRTY)) dirty_add(pc, (uint32_t)(p - pg));
    }
    if (write_through) /* O_DSYNC: the data reaches the device before the call returns */
        done = writeback_range(pc, file, first, last, now, 0, io, ctx, st);
    else if (pc->ndirty > pc->dirty_limit_pages) /* the writer itself writes back, and waits */
        done = write_oldest(pc, (pc->dirty_bg_pages + pc->dirty_limit_pages) / 2, now, 0, io, ctx, st);
    else if (pc->ndirty > pc->dirty_bg_pages) /* the flusher starts; the writer goes on */
        write_oldest(pc, pc->dirty_bg_pages / 2, now, 1, io, ctx, st);
    pc_unlock(pc);
    return done;
}

uint64_t dbt_pc_writeback(struct dbt_pc *pc, int64_t file, uint64_t off, uint64_t len, uint64_t now, int wait,
                          dbt_pc_io_fn io, void *ctx, struct dbt_pc_stats *st) {
    if (file < 0 || file >= (int64_t)DBT_PC_FILES) return now;
    pc_lock(pc);
    uint64_t first = off / DBT_PC_PAGE, last = len ? (off + len - 1) / DBT_PC_PAGE : UINT64_MAX;
    uint64_t done = writeback_range(pc, file, first, last, now, !wait, io, ctx, st);
    pc_unlock(pc);
    return wait ? done : now;
}

void dbt_pc_drop(struct dbt_pc *pc, int64_t file, uint64_t off, uint64_t len, int discard_dirty) {
    if (file < 0 || file >= (int64_t)DBT_PC_FILES) return;
    pc_lock(pc);
    uint64_t first = off / DBT_PC_PAGE, last = len ? (off + len - 1) / DBT_PC_PAGE : UINT64_MAX;
    if (!discard_dirty && len) first = (off + DBT_PC_PAGE - 1) / DBT_PC_PAGE; /* DONTNEED keeps partial pages */
    struct dbt_pc_page *pg = pages(pc);
    for (uint32_t i = 0; i < pc->free_next; i++) {
        uint64_t key = pg[i].key;
        if (!key || file_of(key) != file || page_of(key) < first || page_of(key) > last) continue;
        if ((pg[i].flags & PC_DIRTY) && !discard_dirty) continue;
        evict(pc, i);
    }
    struct dbt_pc_file *f = &files(pc)[file];
    if (discard_dirty && f->next_page > first) memset(f, 0, sizeof *f);
    pc_unlock(pc);
}

uint64_t dbt_pc_clean(struct dbt_pc *pc, int64_t file) {
    if (file < 0 || file >= (int64_t)DBT_PC_FILES) return 0;
    pc_lock(pc);
    uint64_t n = 0;
    struct dbt_pc_page *pg = pages(pc);
    for (uint32_t i = 0; i < pc->free_next; i++) {
        if (!pg[i].key || file_of(pg[i].key) != file || !(pg[i].flags & PC_DIRTY)) continue;
        dirty_remove(pc, i);
        n++;
    }
    pc_unlock(pc);
    return n;
}

void dbt_pc_clear(struct dbt_pc *pc) {
    pc_lock(pc);
    memset(buckets(pc), 0, sizeof(uint32_t) * pc->nbuckets);
    memset(pages(pc), 0, sizeof(struct dbt_pc_page) * pc->npages);
    memset(files(pc), 0, sizeof(struct dbt_pc_file) * DBT_PC_FILES);
    pc->free_next = pc->hand = pc->dirty_head = pc->dirty_tail = 0;
    pc->ndirty = 0;
    pc_unlock(pc);
}

void dbt_pc_usage(struct dbt_pc *pc, uint64_t *present, uint64_t *dirty) {
    pc_lock(pc);
    uint64_t n = 0;
    for (uint32_t i = 0; i < pc->free_next; i++) n += pages(pc)[i].key != 0;
    *present = n;
    *dirty = pc->ndirty;
    pc_unlock(pc);
}
