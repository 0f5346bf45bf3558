/* The emulated OS page cache: what a buffered read finds in memory, what it must fetch from the device
 * (with Linux-like sequential read-ahead), and what dirty data a write leaves for writeback.
 *
 * The host's own page cache is not the one being emulated (the data sits on tmpfs), so the cache is
 * modelled: 4 KiB pages keyed by (file, page), CLOCK eviction, a read-ahead window per file that
 * starts at 4x (or 2x) the request and doubles up to `readahead_kb`, with the next window fetched
 * asynchronously when a read reaches the previous window's first page, as Linux's "PG_readahead"
 * marker does. Pages in flight carry the time their data arrives: a read that finds them waits until
 * then. Dirty pages are written back by fsync/fdatasync (waited for), sync_file_range (started, not
 * waited), background writeback once dirty data passes `dirty_background_pct` of the cache (started),
 * and by the writer itself past `dirty_pct` (throttled: it waits), as balance_dirty_pages does.
 *
 * One region of shared memory, one robust process-shared lock. The device is reached through a
 * callback, so the same code serves the live interposer and offline replay. */
#ifndef DBT_PAGECACHE_H
#define DBT_PAGECACHE_H

#include <pthread.h>
#include <stdint.h>

#define DBT_PC_PAGE 4096u
#define DBT_PC_FILES 65536u /* as the state's file table */
#define DBT_PC_READAHEAD_KB_MIN 4u
#define DBT_PC_READAHEAD_KB_MAX 65536u

/* Issues one device request for bytes [off, off + len) of a file; returns its completion time.
 * async: nobody waits for it (read-ahead, background writeback). */
typedef uint64_t (*dbt_pc_io_fn)(void *ctx, int op, int64_t file, uint64_t off, uint64_t len, uint64_t arrival,
                                 int async);

struct dbt_pc_page {
    uint64_t key;      /* 0 = free, else (file + 1) << 44 | page number */
    uint64_t ready_ns; /* when the page's data is in memory (a read may still be in flight) */
    uint32_t hnext;    /* hash chain: index + 1, 0 = end */
    uint32_t dnext, dprev; /* the dirty list, oldest first: index + 1 */
    uint8_t flags;
    uint8_t pad[3];
};

struct dbt_pc_file { /* per-file read-ahead state */
    uint64_t next_page; /* where a sequential reader continues */
    uint64_t mark_page; /* reaching this page starts the next window (0 = none) */
    uint64_t ahead_end; /* first page after the last window read */
    uint64_t eof_pages; /* the file's size in pages when last read: read-ahead stops there */
    uint32_t window;    /* current window, pages */
    uint32_t pad;
};

struct dbt_pc_stats { /* per call; the caller adds them to the device's counters */
    uint64_t hit_pages, miss_pages, readahead_bytes, writeback_bytes;
};

struct dbt_pc {
    pthread_mutex_t lock;
    uint32_t npages, nbuckets, hand, free_next; /* free_next: pages never used yet */
    uint32_t dirty_head, dirty_tail;
    uint64_t ndirty;
    uint32_t ra_max_pages, dirty_bg_pages, dirty_limit_pages, pad;
    uint64_t off_buckets, off_pages, off_files; /* from the start of this struct */
};

/* Bytes a cache of `bytes` needs (header, hash, pages, per-file state). */
uint64_t dbt_pc_region_size(uint64_t bytes);
/* Lays out a cache in `mem` (dbt_pc_region_size bytes, zeroed). */
void dbt_pc_init(struct dbt_pc *pc, uint64_t bytes, uint32_t readahead_kb, uint32_t dirty_bg_pct, uint32_t dirty_pct);

/* A cache header as dbt_pc_init lays it out for `bytes` (sizes, offsets, limits) with its positions
 * (clock hand, free and dirty list ends) in range, inside a region of region_bytes. Returns 0, or -1
 * with a message in err. For a region in a file that someone else could have written. */
int dbt_pc_check(const struct dbt_pc *pc, uint64_t bytes, uint64_t region_bytes, char *err, size_t errlen);

/* A buffered read: returns when the caller has its data (>= now). file_size: the file's size in
 * bytes, beyond which nothing is read ahead (UINT64_MAX: unknown). */
uint64_t dbt_pc_read(struct dbt_pc *pc, int64_t file, uint64_t off, uint64_t len, uint64_t file_size, uint64_t now,
                     dbt_pc_io_fn io, void *ctx, struct dbt_pc_stats *st);
/* A buffered write: dirties pages; returns when the caller may go on (later than now only if it was
 * throttled, or if write_through: the data is on the device, as with O_DSYNC). */
uint64_t dbt_pc_write(struct dbt_pc *pc, int64_t file, uint64_t off, uint64_t len, uint64_t now, int write_through,
                      dbt_pc_io_fn io, void *ctx, struct dbt_pc_stats *st);
/* Writes back the file's dirty pages in [off, off + len) (len 0: to the end); wait: the caller waits
 * for them (fsync) or not (sync_file_range). Returns the caller's completion. */
uint64_t dbt_pc_writeback(struct dbt_pc *pc, int64_t file, uint64_t off, uint64_t len, uint64_t now, int wait,
                          dbt_pc_io_fn io, void *ctx, struct dbt_pc_stats *st);
/* Drops the file's pages in [off, off + len) (len 0: to the end). discard_dirty: truncation (the data
 * is gone); else dirty pages stay, as POSIX_FADV_DONTNEED leaves them. */
void dbt_pc_drop(struct dbt_pc *pc, int64_t file, uint64_t off, uint64_t len, int discard_dirty);
/* A failed writeback as Linux leaves it: the file's dirty pages marked clean (their data stays in the
 * cache, readable, but is never written to the device). Returns how many were dirty. */
uint64_t dbt_pc_clean(struct dbt_pc *pc, int64_t file);
/* POSIX_FADV_WILLNEED: fetches the missing pages of the range without waiting. */
void dbt_pc_willneed(struct dbt_pc *pc, int64_t file, uint64_t off, uint64_t len, uint64_t now, dbt_pc_io_fn io,
                     void *ctx, struct dbt_pc_stats *st);

/* Empties the cache (dirty pages are dropped: the caller has synced what mattered), as a cold start. */
void dbt_pc_clear(struct dbt_pc *pc);

/* Pages present and dirty, for reports and tests. */
void dbt_pc_usage(struct dbt_pc *pc, uint64_t *present, uint64_t *dirty);

#endif
