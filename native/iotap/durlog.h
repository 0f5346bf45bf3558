/* The durability log: what a power cut needs that the trace does not hold. The trace says which
 * device requests each call caused and when each completed (page-cache writeback, direct and
 * O_DSYNC writes, device flushes); this log keeps the bytes every write put into an emulated
 * device's file, and the changes to the files' names and sizes, so that the files as they stood on
 * the media at any instant can be rebuilt from a copy taken before the run (src/dbtier/crash/).
 *
 * Written while a run is paused as well (server start-up): such a record is flagged PAUSED, and a
 * crash state treats it as durable at once, since nothing of it was emulated.
 *
 * One file per process, dur-<process number>.log (the trace's number), appended with one writev
 * per record: a process killed mid-run loses nothing it had logged. A file is created new and
 * private, never through a symlink; when it cannot be, or a write fails, the process's log stops
 * and the state counts it (a crash test of an incomplete log refuses to run). Python reads the
 * record's layout from the library's description (dbt_layout_json), never a copy. */
#ifndef DBT_DURLOG_H
#define DBT_DURLOG_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

/* The record layout's version: a reader refuses a log of another one. */
#define DBT_DURLOG_FORMAT 1
#define DBT_DURLOG_MAGIC 0x31474c44u /* "DLG1", little-endian: a reader finds a torn or foreign file */

enum dbt_durlog_kind {
    DBT_DL_WRITE = 1,    /* bytes [off, off + len) of the file, the payload */
    DBT_DL_TRUNCATE = 2, /* the file cut or extended to off bytes */
    DBT_DL_ALLOCATE = 3, /* fallocate: [off, off + len) reserved; the size grows unless KEEP_SIZE (aux) */
    DBT_DL_RENAME = 4,   /* the file (by index) took the payload's path: "old\0new\0"; new's old file is gone */
    DBT_DL_UNLINK = 5,   /* the payload's path ("path\0") was removed; file: the index it named, -1 unknown */
};

#define DBT_DLF_PAUSED 0x01u /* made while the emulation was paused: durable at once in a crash state */
#define DBT_DLF_DIRECT 0x02u /* the fd was O_DIRECT */
#define DBT_DLF_DSYNC 0x04u  /* the fd was O_DSYNC / O_SYNC */
#define DBT_DLF_REREAD 0x08u /* the bytes were read back from the file after the call (stdio, copy_file_range) */

struct dbt_durlog_rec {
    uint32_t magic;
    uint8_t kind, dev, flags, pad_;
    uint32_t len;  /* the payload's bytes that follow the record */
    uint32_t aux;  /* fallocate's mode */
    int64_t file;  /* run-wide file index (the state's file table), -1 if unknown */
    uint64_t off;  /* WRITE, ALLOCATE: file offset; TRUNCATE: the new size */
    uint64_t size; /* ALLOCATE: its length; otherwise 0 */
    uint64_t t0;   /* the call began (CLOCK_MONOTONIC, as the trace's submit_ns) */
    uint64_t seq;  /* this process's record number, from 0 */
    uint32_t pid, tid;
};
_Static_assert(sizeof(struct dbt_durlog_rec) == 64, "durability log record is 64 bytes");

/* This process logs (a folder was given, and its file could be made and written so far). */
int dbt_durlog_active(void);
/* gate: the state's switch (durlog_on): nothing is logged while it is 0. */
void dbt_durlog_configure(const char *dir, uint32_t procno, _Atomic uint64_t *failures, _Atomic uint32_t *gate);
void dbt_durlog_after_fork(uint32_t procno);
/* Appends one record and its payload (iov: cnt pieces; NULL, 0: none), payload bytes in rec->len. */
void dbt_durlog_append(struct dbt_durlog_rec *rec, const struct iovec *iov, int cnt);

#endif
