/* The I/O trace: fixed 64-byte records in per-process segment files, written through MAP_SHARED
 * mappings so that a process killed mid-run loses nothing it had recorded. A record becomes valid
 * when its op byte is stored (last, with release); readers skip op == 0.
 * File name: iotap-<process number>-<segment>.trc, 65536 records each. A file is created new and
 * private (never an existing name, never through a symlink); when one cannot be, the process's
 * trace stops there and the state counts it. */
#ifndef DBT_TRACE_H
#define DBT_TRACE_H

#include <stdatomic.h>
#include <stdint.h>

#define DBT_TRACE_SEG_RECS 65536u
#define DBT_TRACE_MAX_SEGS 4096u

/* op codes in the trace: 1-3 are enum dbt_op; the rest are counted calls without a transfer */
enum dbt_trace_op {
    DBT_TOP_READ = 1, DBT_TOP_WRITE = 2, DBT_TOP_FLUSH = 3,
    DBT_TOP_SYNC_RANGE = 4, DBT_TOP_ALLOCATE = 5, DBT_TOP_TRUNCATE = 6, DBT_TOP_ADVISE = 7,
};

/* record flags */
#define DBT_TF_DIRECT 0x01u    /* fd opened O_DIRECT */
#define DBT_TF_DSYNC 0x02u     /* fd opened O_DSYNC / O_SYNC: the write carried a flush */
#define DBT_TF_CACHE_HIT 0x04u /* served from the drive's buffer */
#define DBT_TF_STREAM 0x08u    /* continued the previous transfer */
#define DBT_TF_PAGE_CACHE 0x10u /* a buffered read served from the emulated page cache: no device I/O */
#define DBT_TF_ASYNC 0x20u      /* a device request nobody waited for: read-ahead, background writeback */

struct dbt_trace_rec {
    uint64_t submit_ns;   /* the program called (CLOCK_MONOTONIC) */
    uint64_t start_ns;    /* modelled service start */
    uint64_t complete_ns; /* modelled completion */
    uint64_t end_ns;      /* the call returned to the program */
    uint64_t offset;      /* file offset, bytes */
    uint32_t len;         /* bytes transferred */
    int32_t file;         /* run-wide file index (see the state's file table), -1 if unknown */
    uint32_t pid, host_ns, tid;
    uint8_t op, dev, flags, pad;
};

_Static_assert(sizeof(struct dbt_trace_rec) == 64, "trace record is 64 bytes");

struct dbt_trace_rec *dbt_trace_reserve(void);
void dbt_trace_commit(struct dbt_trace_rec *r, uint8_t op);
/* failures: the state's count of processes whose trace stopped, incremented when this one's does. */
void dbt_trace_configure(const char *dir, uint32_t procno, _Atomic uint64_t *failures);
void dbt_trace_after_fork(uint32_t procno);

#endif
