/* Per-object I/O: every device request of an interval, and every buffered read the page cache served
 * whole, counted against the file it touched on its device. The counting rules live here once, for
 * a live run (its trace's records, dbt_objio_records) and for a replay (each request as the core
 * reports it, each call as it returns, replay.c), so both report alike; measure/objects.py names the
 * files and adds up the files of one object (a relation's segments, WAL, temp files).
 *
 * Per file and device: the reads, writes and flushes that reached the device and the bytes moved;
 * the reads found whole in the page cache; the transfers nobody waited for (read-ahead, background
 * writeback); the sequential transfers (each one starting where the file's previous transfer on that
 * device ended, in the order they arrived: ties in the order they were given); and the device time,
 * from arrival to completion, summed over transfers and flushes. Anything else given (a call that
 * went to the device, a wake) counts nothing, but its file has a row on its device. */
#ifndef DBT_OBJIO_H
#define DBT_OBJIO_H

#include <stdint.h>

#include "emulate.h"
#include "trace.h"

/* One file on one device. */
struct dbt_objio_row {
    int64_t file; /* the run-wide file index (-1: none known) */
    uint64_t reads, read_bytes, writes, write_bytes, flushes;
    uint64_t cached_reads; /* buffered reads that found all they needed in the page cache */
    uint64_t async;        /* transfers nobody waited for */
    uint64_t sequential;   /* transfers that continued the file's previous one on the device */
    uint64_t device_ns;    /* arrival to completion, summed over transfers and flushes */
    uint32_t dev, pad;
};

struct dbt_objio;

/* An empty accumulator (NULL: out of memory). */
struct dbt_objio *dbt_objio_new(void);
void dbt_objio_free(struct dbt_objio *o);
/* Empty again, its memory kept for the next interval. */
void dbt_objio_reset(struct dbt_objio *o);

/* What is given comes in an order: `order` ranks it (the files' rows are listed in the order their
 * files were first met, by the smallest order given for anything of theirs). */
/* A device request (op: enum dbt_op; flags: DBT_TF_ASYNC for one nobody waited for). */
void dbt_objio_request(struct dbt_objio *o, const struct dbt_request_event *ev, uint64_t order);
/* A program's call on the device `dev` (op: enum dbt_trace_op; flags: DBT_TF_PAGE_CACHE for a read
 * the page cache served whole). */
void dbt_objio_call(struct dbt_objio *o, int64_t file, uint32_t dev, uint8_t op, uint8_t flags, uint64_t order);
/* Trace records (trace.h), each as its kind says; their order is their index. */
void dbt_objio_records(struct dbt_objio *o, const struct dbt_trace_rec *r, uint64_t n);

/* Memory ran out at some point: the figures are short. */
int dbt_objio_failed(const struct dbt_objio *o);
/* The rows so far: the files in the order first met, each file's devices in index order. Writes at
 * most cap of them to out; returns how many there are. */
uint64_t dbt_objio_rows(struct dbt_objio *o, struct dbt_objio_row *out, uint64_t cap);

#endif
