/* The emulation core: the one place that turns a program's call on a file of an emulated device into
 * device requests, and counts them.
 *
 * It holds the rules (page cache or direct, O_DSYNC writes and the seeds' dsync devices, fsync's
 * writeback and device flush, sync_file_range, fadvise, truncation, HDD block addresses from the
 * file layout, the pause), and nothing else: no clock, no waiting, no trace writer, no globals. The
 * caller gives the state, the call and its times; the core answers when the program may go on and
 * reports each device request through a callback. The live interposer (interpose.c) and the offline
 * replay (replay.c) are its two callers, so the physics and the accounting exist once.
 *
 * Durability (for a later power-loss mode): every write the core issues to a device is reported
 * through the callback with its completion, and dirty data lives only in the page cache
 * (pagecache.c) and the device models' write caches, so what was durable at any instant can be
 * derived from the requests and the flushes that completed before it. */
#ifndef DBT_EMULATE_H
#define DBT_EMULATE_H

#include <stdint.h>

#include "state.h"
#include "trace.h"

/* One program call, as the core needs it. */
struct dbt_call {
    uint64_t t0;        /* the program made the call */
    uint64_t host_end;  /* the host's own call returned: a `real` device's completion (t0 offline) */
    uint64_t off, len;  /* bytes [off, off + len) of the file; for truncate, off is the new size */
    uint64_t file_size; /* the file's size, where read-ahead stops (UINT64_MAX: unknown) */
    int64_t file;       /* the run-wide file index, -1 if the file table was full */
    uint32_t aux;       /* posix_fadvise's advice, sync_file_range's flags */
    uint8_t op;         /* enum dbt_trace_op */
    uint8_t dev;        /* the device holding the file */
    uint8_t flags;      /* DBT_TF_DIRECT, DBT_TF_DSYNC: how the file was opened */
};

/* One device request a call caused (a transfer, a miss, read-ahead, writeback, a flush). */
struct dbt_request_event {
    uint64_t arrival, start, complete; /* modelled: issued, service began, completed */
    uint64_t off, len;                 /* file bytes (0, 0 for a flush) */
    int64_t file;
    uint8_t op, dev;
    uint8_t flags; /* the call's open flags, the model's (cache hit, stream), DBT_TF_ASYNC */
};

struct dbt_emulate_hooks {
    void (*request)(void *ctx, const struct dbt_request_event *ev); /* may be NULL */
    /* The file's size, asked only when a buffered read needs it (read-ahead stops at the end of the
     * file), so the interposer pays its fstat only then; NULL: the call's file_size. */
    uint64_t (*file_size)(void *ctx);
    void *ctx;
};

struct dbt_outcome {
    uint64_t complete; /* when the program may go on; while ticket is set, when to ask again */
    uint64_t ticket;   /* nonzero: the call's request waits in a queueing drive's queue (dbt_emulate_resume) */
    uint8_t charged;   /* 0: paused (laid out only), or a `real` device's call with no device time */
    uint8_t wait;      /* the program waits for `complete` (the interposer sleeps until then) */
    uint8_t flags;     /* for the call's record: DBT_TF_PAGE_CACHE when a read found all it needed in memory */
};

/* Emulates one call. Counters go to the state's device slot; device requests to hooks->request. */
void dbt_emulate(struct dbt_state *s, const struct dbt_call *c, const struct dbt_emulate_hooks *hooks,
                 struct dbt_outcome *out);

/* A call whose outcome holds a ticket waits for the drive to choose its request: at out->complete
 * (or later: `now`, when the caller asks), the drive's choices due by then are made, and the outcome
 * is completed (ticket 0, complete set, the request counted and reported through hooks) or says
 * when to ask again. Given the same call as dbt_emulate. */
void dbt_emulate_resume(struct dbt_state *s, const struct dbt_call *c, const struct dbt_emulate_hooks *hooks,
                        uint64_t now, struct dbt_outcome *out);

/* Sends every background write still waiting in the emulated block layer, at its paced time, so a
 * snapshot of the counters holds all the writeback the interval started. No request hook: it is a
 * snapshot's, not a call's. */
void dbt_emulate_settle(struct dbt_state *s);

#endif
