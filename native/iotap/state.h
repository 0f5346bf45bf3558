/* Shared state of one emulation run: one MAP_SHARED file that every process of the run attaches.
 *
 * Counters are lock-free atomics. The device model (head position, buffer segments, channel queues)
 * is larger than one atomic word, so it sits behind a per-device *robust* process-shared mutex: a
 * process killed while holding it hands the next locker EOWNERDEAD, which marks it consistent and
 * goes on. The critical section is a few hundred nanoseconds of arithmetic; nobody waits inside it. */
#ifndef DBT_STATE_H
#define DBT_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "devmodel.h"
#include "pagecache.h"
#include "pgpath.h"

#define DBT_STATE_MAGIC 0x7061746f69746264ULL /* "dbtiotap" */
/* Moves whenever anything in the file changes layout or meaning (this header, the page cache's
 * region, a kind's params, derived constants or drive state): attach refuses a state of another
 * version, and Python's handshake (dbt_abi_version) carries it. */
#define DBT_STATE_VERSION 19
#define DBT_MAX_DEVICES 16
#define DBT_NAME_MAX 64
#define DBT_FAULT_SUFFIX_MAX 16
#define DBT_DIR_MAX 1024
#define DBT_LAT_BUCKETS 320
#define DBT_FILE_CAP 65536u
#define DBT_CHUNK_CAP (1u << 20)
#define DBT_CHUNK_BYTES (1ull << 20) /* files get device space in 1 MiB chunks, in order of first touch */
#define DBT_ARENA_BYTES (8u << 20)

struct dbt_counters {
    _Atomic uint64_t reads, writes, flushes, read_bytes, write_bytes;
    _Atomic uint64_t read_ns, write_ns, flush_ns; /* modelled latency, arrival to completion */
    _Atomic uint64_t queue_ns;                    /* sum of time spent queued before service */
    _Atomic uint64_t cache_hits, streams, other_ops;
    _Atomic uint64_t reordered; /* requests a queueing drive started before an older queued one */
    _Atomic uint64_t host_ns;  /* time the host's own call took */
    _Atomic uint64_t overruns; /* I/Os whose host call outlasted the modelled completion */
    _Atomic uint64_t late_sum_ns, late_max_ns;
    _Atomic uint64_t spin_ns; /* CPU the waits spent spinning: charged to the program, not to the device */
    /* the emulated page cache, for this device's files: pages found and not found, bytes read ahead
     * and written back (those device requests are also in reads/writes above) */
    _Atomic uint64_t pc_hit_pages, pc_miss_pages, pc_readahead_bytes, pc_writeback_bytes;
    /* a volume's provisioned limits (DBT_CAP_LIMITED): per enum dbt_limit, the time at least one
     * request waited on it (a union, as busy_ns) and the requests it held */
    _Atomic uint64_t held_ns[DBT_LIMITS], held[DBT_LIMITS];
    _Atomic uint64_t late[DBT_LAT_BUCKETS];
};

/* A background writeback request waiting in the block layer (see emulate.c). */
struct dbt_pending_write {
    uint64_t off, len;
    uint64_t queued; /* when the page cache handed it over */
    int64_t file;
};

#define DBT_PENDING_WRITES 512

/* The largest request the block layer makes by merging: Linux's default max_sectors_kb, 1280 KiB
 * (BLK_DEF_MAX_SECTORS, 2560 sectors, since "block: bump BLK_DEF_MAX_SECTORS to 2560", 2015). */
#define DBT_BLOCK_MAX_REQUEST (1280ull << 10)

struct dbt_device_slot {
    char name[DBT_NAME_MAX];
    char dir[DBT_DIR_MAX];
    uint32_t dirlen;
    int32_t kind;
    uint32_t caps; /* its kind's DBT_CAP_* (checked against the kind by attach): what the core asks */
    struct dbt_params params;
    pthread_mutex_t lock;
    /* under lock */
    uint64_t busy_ns, busy_mark; /* union of [arrival, completion]: iostat's io_ticks */
    uint64_t held_mark[DBT_LIMITS]; /* the end of the union of waits on each limit so far */
    uint64_t first_ns, last_ns;
    struct dbt_model_state model;
    uint64_t alloc_cursor;
    /* background writeback not yet sent to the device: a ring, oldest first */
    uint32_t pend_head, pend_count;
    uint64_t pend_done; /* the last one sent completes */
    struct dbt_pending_write pend[DBT_PENDING_WRITES];
    /* lock-free */
    struct dbt_counters c;
};

struct dbt_file_entry {
    _Atomic uint64_t key; /* 0 = empty; set last, with release, so a reader that sees it sees the rest */
    uint64_t st_dev, st_ino;
    uint32_t device;
    uint32_t path_off;
    uint32_t dsync_scope; /* a database file (pgpath.h): written through on dsync devices */
    uint8_t pg_class;     /* enum dbt_pg_class, from its path when first touched (0 when a replay laid it out) */
    uint8_t pad_[3];
};

struct dbt_chunk_entry {
    _Atomic uint64_t key; /* (file index + 1) << 32 | chunk number */
    uint64_t addr;
};

/* I/O the interposer sees happen but cannot emulate: a device file mapped into memory, asynchronous
 * or kernel-side I/O on one (libaio, POSIX AIO, io_uring, splice, sendfile), or a program started
 * where the interposer will not be (its environment lost LD_PRELOAD or DBTIER_IOTAP, or it is
 * static or of another architecture). Any of them leaves a run's figures short. */
enum dbt_bypass_kind {
    DBT_BYPASS_MMAP,
    DBT_BYPASS_LIBAIO,
    DBT_BYPASS_POSIX_AIO,
    DBT_BYPASS_IO_URING,
    DBT_BYPASS_SPLICE,
    DBT_BYPASS_SENDFILE,
    DBT_BYPASS_EXEC_ENV,
    DBT_BYPASS_EXEC_STATIC,
    DBT_BYPASS_EXEC_FOREIGN,
    DBT_BYPASS_KINDS
};
/* the names the dump gives them, in enum order */
extern const char *const dbt_bypass_names[DBT_BYPASS_KINDS];

#define DBT_BYPASS_PATH 512
#define DBT_BYPASS_COMM 16 /* TASK_COMM_LEN */

/* Per kind: how often, and who did it first. The details are claimed once with a compare-and-swap
 * (claim 0 -> 1), written, then published (claim 2): processes racing cannot tear them, and a
 * process killed while writing leaves claim 1, details not shown. */
struct dbt_bypass {
    _Atomic uint64_t count;
    _Atomic uint32_t claim;
    uint32_t pid;
    char program[DBT_BYPASS_COMM]; /* the process's name (its comm) */
    char path[DBT_BYPASS_PATH];    /* the device file, or the program it started */
};

struct dbt_state {
    uint64_t magic;
    uint32_t version, ndev;
    uint64_t epoch_ns, size;
    uint64_t off_files, off_chunks, off_arena;
    uint64_t off_pc, pc_bytes; /* the page cache region (pc_bytes 0: no page cache, all I/O direct) */
    uint32_t dsync_data;       /* buffered writes to database files are written through, as on the seeds' dsync devices */
    uint32_t pad_;
    _Atomic uint64_t arena_used;
    _Atomic uint32_t nfiles;
    _Atomic uint32_t attached; /* processes that attached, ever */
    /* Set while a run prepares (loads data, restarts): I/O still gets its device layout, but is not
     * delayed, counted or traced, so only the measured phase carries the device's cost. */
    _Atomic uint32_t paused;
    /* I/O calls the interposer could not classify (an fd beyond its fd table, or no memory to grow
     * it): passed through unemulated, and reported so that a run's figures are not silently short. */
    _Atomic uint64_t untracked_calls;
    /* processes whose trace stopped (a trace file could not be created or sized) */
    _Atomic uint64_t trace_failures;
    /* processes whose durability log stopped (durlog.h): a crash test of such a run is refused */
    _Atomic uint64_t durlog_failures;
    /* the durability log is kept (set once the base image is taken), by processes given its folder */
    _Atomic uint32_t durlog_on;
    /* a process of the measurement itself (the wait sampler's backend), never CPU-dilated: a slower
     * CPU is the workload's, and the sampler's CPU time is taken out of the server's whole */
    _Atomic uint32_t undilated_pid;
    /* An injected fsync error (dbtier crash --fsync-error): once armed, the fault_nth-th fsync or
     * fdatasync of a regular file on device fault_dev - 1 (0: none armed) fails with EIO, its dirty
     * pages marked clean as Linux marks them (their data never reaches the device). Fires once. */
    _Atomic uint32_t fault_dev;
    _Atomic uint32_t fault_nth;
    _Atomic uint32_t fault_seen;   /* flushes of the device's files counted since armed */
    _Atomic uint32_t fault_fired;  /* 1 once it failed a call */
    _Atomic uint32_t fault_class;  /* only files of this enum dbt_pg_class + 1 count (0: any) */
    uint32_t fault_pad_;
    /* only files whose path ends so count ("": any); another engine's file names, which pgpath.h does
     * not class (InnoDB's table files, .ibd). Written while disarmed. */
    char fault_suffix[DBT_FAULT_SUFFIX_MAX];
    _Atomic uint64_t fault_at_ns;  /* when it did (the trace's clock) */
    _Atomic uint64_t fault_file;   /* the file it failed (the state's file number) */
    _Atomic uint64_t fault_pages;  /* the dirty pages it marked clean */
    /* CPU time dilation (a slower server, DBTIER_IOTAP_CPU_SCALE): the extra time its processes waited,
     * K - 1 times the CPU time each thread used between its interposed calls */
    _Atomic uint64_t cpu_dilation_ns;
    /* The host's wake-up delay after a timed sleep, its 90th percentile (ns): measured when the state
     * is made and learnt on by every process's waits. It is the machine's, not a process's, so a new
     * backend's first waits are not late while it learns. */
    _Atomic uint64_t wake_p90_ns;
    /* the kind of the run's first bypass, plus 1 (0: none yet), set once with a compare-and-swap */
    _Atomic uint32_t first_bypass;
    uint32_t pad2_;
    struct dbt_bypass bypass[DBT_BYPASS_KINDS];
    struct dbt_device_slot dev[DBT_MAX_DEVICES];
};

static inline struct dbt_file_entry *dbt_files(struct dbt_state *s) {
    return (struct dbt_file_entry *)((char *)s + s->off_files);
}
static inline struct dbt_chunk_entry *dbt_chunks(struct dbt_state *s) {
    return (struct dbt_chunk_entry *)((char *)s + s->off_chunks);
}
static inline char *dbt_arena(struct dbt_state *s) { return (char *)s + s->off_arena; }
static inline struct dbt_pc *dbt_state_pc(struct dbt_state *s) {
    return s->pc_bytes ? (struct dbt_pc *)((char *)s + s->off_pc) : NULL;
}

/* Each device owns an equal slice of the file and chunk tables, so inserts need only its lock. */
static inline uint32_t dbt_state_files_per_dev(const struct dbt_state *s) {
    return DBT_FILE_CAP / (s->ndev ? s->ndev : 1);
}
static inline uint32_t dbt_state_chunks_per_dev(const struct dbt_state *s) {
    return DBT_CHUNK_CAP / (s->ndev ? s->ndev : 1);
}

/* The device a registered file belongs to, or -1. The file table lives in the shared file, so an
 * index read from it is checked before it indexes anything (a cheap check on a hot path). */
static inline int dbt_state_file_device(struct dbt_state *s, int64_t file) {
    if (file < 0 || file >= (int64_t)DBT_FILE_CAP) return -1;
    uint32_t dev = dbt_files(s)[file].device;
    return dev < s->ndev && dev < DBT_MAX_DEVICES ? (int)dev : -1;
}

/* Where the regions of a state with this page cache size lie: the one computation of the layout,
 * used by create and checked against by attach. */
struct dbt_state_layout {
    uint64_t off_files, off_chunks, off_arena, off_pc, size;
};
void dbt_state_layout(uint64_t pc_bytes, struct dbt_state_layout *out);

/* Maps an existing state file read-write, after checking that everything in it that is later used
 * as an offset, index or length is consistent (a damaged or forged file is refused, not trusted).
 * Returns NULL with a message in err and errno set (the open's errno, or EINVAL). */
struct dbt_state *dbt_state_attach(const char *path, char *err, size_t errlen);

/* The device whose directory holds this absolute, resolved path (longest match), or -1. */
int dbt_state_device_for_path(const struct dbt_state *s, const char *path);

/* The run-wide index of a file, registering it on first sight. Registration reserves device space
 * for the file's current size, contiguously, as a fresh file system would have laid it out. */
int64_t dbt_state_file_index(struct dbt_state *s, int dev, uint64_t st_dev, uint64_t st_ino, const char *path,
                             uint64_t size);

/* Byte address on the device of a file offset, allocating a chunk on first touch. */
uint64_t dbt_state_addr(struct dbt_state *s, int dev, int64_t file, uint64_t off);
/* The same, the device's lock held by the caller (the lock is not recursive). */
uint64_t dbt_state_addr_locked(struct dbt_state *s, int dev, int64_t file, uint64_t off);

void dbt_dev_lock(struct dbt_device_slot *d);
void dbt_dev_unlock(struct dbt_device_slot *d);

int dbt_lat_bucket(uint64_t ns);
uint64_t dbt_lat_bucket_floor(int b);

/* For a replay, which lays files out as the recorded run did: the file's device (the placement's),
 * and one chunk at a given address (the device's allocation cursor moves past it). put_chunk
 * returns -1 if the device's slice of the chunk table is full. */
void dbt_state_put_file(struct dbt_state *s, int64_t file, int dev, int dsync_scope);

/* The file is written through when the state's dsync_data is set. */
static inline int dbt_state_file_dsync(struct dbt_state *s, int64_t file) {
    return s->dsync_data && file >= 0 && file < (int64_t)DBT_FILE_CAP && dbt_files(s)[file].dsync_scope;
}
int dbt_state_put_chunk(struct dbt_state *s, int dev, int64_t file, uint64_t chunk, uint64_t addr);

/* Records one bypass of the emulation (not while paused: as untracked_calls, only the measured
 * interval's count). The first of its kind also leaves its details: the pid, the process's name and
 * `path`; with path NULL and fd >= 0, the fd's file. Lock-free and async-signal-safe (execve may be
 * called from a signal handler or a vfork child): atomics, prctl and readlink only. */
void dbt_state_note_bypass(struct dbt_state *s, int kind, const char *path, int fd);

#endif
