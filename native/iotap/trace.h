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

/* The record layout's version: a reader refuses a trace of another one. Format 2: every program
 * call is recorded (kind CALL) beside the device requests it caused (kind REQUEST, written before
 * the call's own record by the same thread). Python takes the record's fields, op codes, kinds and
 * flags from the library's description (dbt_layout_json, border.c), never a copy: a change to any of
 * them here moves this number, since traces already recorded keep the old meaning. */
#define DBT_TRACE_FORMAT 2
/* What the sync records cover, raised when a kind of wait is newly traced (the layout unchanged): 2,
 * futex and condition-variable waits that timed out (a threaded server's timers and idle pool
 * workers; before, their sleeps were gaps a replay took for work) */
#define DBT_SYNC_COVERAGE 2

#define DBT_TRACE_SEG_RECS 65536u
#define DBT_TRACE_MAX_SEGS 4096u

/* A record's op byte until the record is committed: readers skip it. */
#define DBT_TRACE_OP_UNCOMMITTED 0

/* op codes in the trace: 1-3 are enum dbt_op; the rest are counted calls without a transfer */
enum dbt_trace_op {
    DBT_TOP_READ = 1, DBT_TOP_WRITE = 2, DBT_TOP_FLUSH = 3,
    DBT_TOP_SYNC_RANGE = 4, DBT_TOP_ALLOCATE = 5, DBT_TOP_TRUNCATE = 6, DBT_TOP_ADVISE = 7,
};

/* record kinds */
enum dbt_trace_kind { DBT_TK_REQUEST = 1, DBT_TK_CALL = 2, DBT_TK_SYNC = 3 };

/* A sync record (kind SYNC): one process woke another, or slept until woken. Never delayed; recorded
 * so that a replay keeps the waits between processes as dependencies, not as fixed gaps.
 *   WAKE:  submit_ns/end_ns around the call; offset: the target (a pid, or a semaphore's address);
 *          aux: the signal (kill)
 *   SLEEP: submit_ns: it began; end_ns: it returned; offset: the semaphore's address (sem_wait);
 *          len: the events epoll_wait returned (0: it timed out)
 *   SLEEP (AIO): an io_getevents on a context with emulated requests. offset: the context; len: the
 *          emulated requests it returned; complete_ns: the latest modelled completion among them (the
 *          request it waited for: its call record has this pid and complete_ns; a buffered request,
 *          done at once in io_submit, is an ordinary call whose end_ns it is), end_ns if none
 *   WAKE and SLEEP (FUTEX): a futex a program waits on and wakes through libc's syscall() (MariaDB's
 *          locks and its group commit's waits; libc's own pthread futexes are not seen). offset: the
 *          futex's address; aux: 1 if the futex is the process's own (FUTEX_PRIVATE_FLAG: only its
 *          threads share that address), 0 if shared; a wake's len: the sleepers it woke (never 0); a
 *          sleep's len: 1 if a wake ended it, 0 if it timed out (a timer's: nobody woke it)
 *   WAKE and SLEEP (COND): a condition variable's signal or broadcast (every one: libc does not say
 *          whether anyone slept: a wake's len is 0), and a wait on it that slept: len 1 if it was
 *          woken, 0 if it timed out. offset: its address; aux: 1 (the process's own) */
enum dbt_sync_op { DBT_SYNC_WAKE = 1, DBT_SYNC_SLEEP = 2 };
#define DBT_SF_KILL 0x01u  /* flags of a sync record: what it was */
#define DBT_SF_SEM 0x02u
#define DBT_SF_EPOLL 0x04u
#define DBT_SF_AIO 0x08u
#define DBT_SF_FUTEX 0x10u
#define DBT_SF_COND 0x20u

/* record flags */
#define DBT_TF_DIRECT 0x01u    /* fd opened O_DIRECT */
#define DBT_TF_DSYNC 0x02u     /* fd opened O_DSYNC / O_SYNC: the write carried a flush */
#define DBT_TF_CACHE_HIT 0x04u /* served from the drive's buffer */
#define DBT_TF_STREAM 0x08u    /* continued the previous transfer */
#define DBT_TF_PAGE_CACHE 0x10u /* a call: a buffered read that found all it needed in the emulated page cache */
/* A device request nobody waited for (read-ahead, background writeback); a call submitted
 * asynchronously (libaio): its start_ns is when io_submit's real I/O ended, complete_ns its modelled
 * completion, end_ns when io_getevents handed it back (the program went on at start_ns) */
#define DBT_TF_ASYNC 0x20u
/* A call that caused exactly one device request, issued at the call with the call's bytes (the
 * direct path, the common case): one record stands for both, so tracing costs one record per call.
 * In it, start_ns is the request's service start and aux the host call's time in ns; the reader
 * expands it into the request and the call. */
#define DBT_TF_WITH_REQUEST 0x40u
/* Reserved: never written by the interposer. The predictor marks with it the wake and sleep it adds
 * between a client's connections that came one after another (predict/events.py), so its own records
 * can never be taken for recorded ones. */
#define DBT_TF_RESERVED_CLIENT 0x80u
_Static_assert(((DBT_TF_DIRECT | DBT_TF_DSYNC | DBT_TF_CACHE_HIT | DBT_TF_STREAM | DBT_TF_PAGE_CACHE | DBT_TF_ASYNC |
                 DBT_TF_WITH_REQUEST) & DBT_TF_RESERVED_CLIENT) == 0,
               "the reserved trace flag is no recorded flag");

struct dbt_trace_rec {
    uint64_t submit_ns;   /* call: the program called; request: issued to the device (CLOCK_MONOTONIC) */
    uint64_t start_ns;    /* call: the host's own call returned; request: modelled service start */
    uint64_t complete_ns; /* modelled completion */
    uint64_t end_ns;      /* call: returned to the program; request: its completion (its issue if async) */
    uint64_t offset;      /* file offset, bytes (a truncate's new size) */
    uint32_t len;         /* bytes */
    int32_t file;         /* run-wide file index (see the state's file table), -1 if unknown */
    uint32_t pid;
    uint32_t aux;         /* call: a read's file size in 4 KiB pages (DBT_TRACE_SIZE_UNKNOWN), the advice,
                             sync_file_range's flags; request: 0 */
    uint32_t tid;
    uint8_t op, dev, flags, kind;
};

#define DBT_TRACE_SIZE_UNKNOWN 0xffffffffu
#define DBT_TRACE_SIZE_PAGE 4096u /* the unit of a read call's file size in aux */
static inline uint32_t dbt_trace_size_pages(uint64_t bytes) {
    if (bytes == UINT64_MAX) return DBT_TRACE_SIZE_UNKNOWN;
    uint64_t pages = (bytes + DBT_TRACE_SIZE_PAGE - 1) / DBT_TRACE_SIZE_PAGE;
    return pages >= DBT_TRACE_SIZE_UNKNOWN ? DBT_TRACE_SIZE_UNKNOWN - 1 : (uint32_t)pages;
}

_Static_assert(sizeof(struct dbt_trace_rec) == 64, "trace record is 64 bytes");

/* This process records a trace (a folder was given, and its files could be made so far). */
int dbt_trace_active(void);
struct dbt_trace_rec *dbt_trace_reserve(void);
void dbt_trace_commit(struct dbt_trace_rec *r, uint8_t op);
/* failures: the state's count of processes whose trace stopped, incremented when this one's does. */
void dbt_trace_configure(const char *dir, uint32_t procno, _Atomic uint64_t *failures);
void dbt_trace_after_fork(uint32_t procno);

#endif
