/* Device physics: the one place that turns a request stream into service times.
 *
 * Used live by the interposer (state in shared memory, under the device lock) and offline by the
 * simulator (state on the heap). Nothing here reads a clock or does I/O: time is an input, so a
 * given request stream always yields the same completions.
 *
 * Each kind is its own file, fio-engine style: dev_hdd.c, dev_flash.c, dev_ram.c, dev_cloud.c,
 * dev_real.c, each with its header (its option struct, derived constants, drive state) and an ops
 * table (devkind.h). devmodel.c keeps what every kind shares: the table of kinds, the option
 * helpers, arrays (RAID 0) and the submit path; devqueue.c the command queue. A new kind: its two
 * files, a member in struct dbt_params' and struct dbt_drive's unions, its entry in devmodel.c's
 * table of kinds and in enum dbt_kind, and DBT_STATE_VERSION moved (the state holds every drive). */
#ifndef DBT_DEVMODEL_H
#define DBT_DEVMODEL_H

#include <stddef.h>
#include <stdint.h>

#include "dev_cloud.h"
#include "dev_flash.h"
#include "dev_hdd.h"
#include "dev_ram.h"

/* The version of struct dbt_device_ops and what its hooks mean. */
#define DBT_OPS_VERSION 4

enum dbt_kind { DBT_KIND_REAL = 0, DBT_KIND_HDD = 1, DBT_KIND_SSD = 2, DBT_KIND_RAM = 3, DBT_KIND_CLOUD = 4, DBT_KIND_COUNT };

enum dbt_op { DBT_OP_NONE = 0, DBT_OP_READ = 1, DBT_OP_WRITE = 2, DBT_OP_FLUSH = 3 };

/* Result flags. */
#define DBT_RES_CACHE_HIT 0x1u   /* served from the drive's own cache, no media access */
#define DBT_RES_STREAM 0x2u      /* continued the previous transfer, no positioning */

/* The most options one kind has (each kind's table is checked against it): a device spec carries
 * that many values. */
#define DBT_MAX_PARAMS 48

/* Parameters, in the units their names say: those every kind has, and each kind's own (its option
 * struct, as fio's engines have theirs), one of which a device uses. */
struct dbt_params {
    double capacity_gb;
    double members, stripe_kib; /* an array of identical members, striped */
    double flush_honoured, atomic_write_kib; /* durability (devkind.h): a flush obeyed; the untorn write */
    union {
        struct dbt_hdd_params hdd;
        struct dbt_flash_params flash;
        struct dbt_ram_params ram;
        struct dbt_cloud_params cloud;
    } k;
};

/* One row of the option table: the single declaration of a device parameter. */
struct dbt_param_def {
    const char *name;
    const char *unit;
    size_t offset; /* into struct dbt_params */
    double def, min, max;
    const char *help;
};

#define DBT_MAX_MEMBERS 16
#define DBT_MAX_QUEUE_DEPTH 64

/* One drive's model: its kind's derived constants and state. */
struct dbt_drive {
    int kind;
    union {
        struct dbt_hdd_drive hdd;
        struct dbt_flash_drive flash;
        struct dbt_ram_drive ram;
        struct dbt_cloud_drive cloud;
    } u;
};

/* A request held in a queueing drive's command queue, or behind it in the block layer: the drive
 * chooses which to start when it is free, so its result is known only then; the issuer takes it
 * by ticket. */
struct dbt_queued {
    uint64_t ticket; /* 0: a free entry */
    uint64_t arrival, addr, start, complete;
    uint32_t len, rflags;
    uint8_t op, started, reordered, pad_[5];
};
/* Room for a full queue on every member of an array, and the block layer's requests behind it. */
#define DBT_QUEUED_REQUESTS 128

/* A device as the host sees it: one drive, or `members` identical drives striped (RAID 0). */
struct dbt_model_state {
    int kind, members;
    int flush_ignored; /* flush_honoured = 0: a flush is acknowledged at once, nothing waits for it */
    uint64_t stripe_bytes;
    uint64_t q_next_ticket;
    uint32_t q_count;   /* entries in use: waiting, or started and not yet taken */
    uint32_t q_waiting; /* not yet started */
    struct dbt_queued q[DBT_QUEUED_REQUESTS];
    struct dbt_drive drive[DBT_MAX_MEMBERS];
};

struct dbt_request {
    uint64_t arrival_ns; /* when the host issued it */
    uint64_t addr;       /* byte address on the device (HDD geometry); ignored by flash */
    uint32_t len;
    uint8_t op;
};

/* What held a request back before its service, besides a busy drive: a volume's provisioned
 * limits (DBT_CAP_LIMITED), its rate caps and, once burst credits are spent, its baseline. Names in
 * dbt_limit_names, which the state's counters and the layout description use. */
enum dbt_limit { DBT_LIMIT_IOPS, DBT_LIMIT_THROUGHPUT, DBT_LIMIT_IOPS_CREDITS, DBT_LIMIT_THROUGHPUT_CREDITS, DBT_LIMITS };
extern const char *const dbt_limit_names[DBT_LIMITS];

struct dbt_result {
    uint64_t start_ns;    /* service began (queueing ends) */
    uint64_t complete_ns; /* modelled completion */
    uint32_t flags;
    /* DBT_CAP_LIMITED: the request waited on each limit over [held_from, held_to) (equal: it did not) */
    uint64_t held_from[DBT_LIMITS], held_to[DBT_LIMITS];
};

/* What a kind can do: the emulation core asks these, never which kind a device is. */
#define DBT_CAP_HOST_TIME 0x1u /* no model: a request takes what the host's own call took (real) */
#define DBT_CAP_ADDRESSED 0x2u /* its requests carry device byte addresses from the file layout (geometry) */
#define DBT_CAP_REORDERS 0x4u  /* it may hold several commands and choose among them (queue hooks set) */
#define DBT_CAP_LIMITED 0x8u   /* its results say when a request waited on a provisioned limit (held_from/to) */

/* A device kind, fio-engine style: a versioned table of hooks, its capabilities, its option table
 * and the size of its own option struct. */
struct dbt_device_ops {
    const char *name;
    int version;
    int kind;
    unsigned caps;
    const struct dbt_param_def *params;
    int nparams;
    size_t params_size; /* its member of struct dbt_params' union (0: none of its own) */
    const char *help;
    void (*init)(struct dbt_drive *st, const struct dbt_params *p);
    void (*submit)(struct dbt_drive *st, const struct dbt_request *rq, struct dbt_result *out);
    /* The drive's state as init and submit leave it (counts within their arrays): for a state in a
     * file that someone else could have written. NULL: nothing of its own to check. */
    int (*check)(const struct dbt_drive *st, int member, char *err, size_t errlen);
    /* DBT_CAP_REORDERS: commands the drive holds; when it is done with its command; how long rq
     * would take begun at t, without changing the drive. */
    int (*queue_depth)(const struct dbt_drive *st);
    uint64_t (*free_at)(const struct dbt_drive *st);
    uint64_t (*estimate)(const struct dbt_drive *st, const struct dbt_request *rq, uint64_t t);
    /* DBT_CAP_LIMITED: its burst credits set to this fraction of a full bucket (0..1) as of `at`, the
     * time its refill counts from: a run or prediction says what it starts with (--credits). */
    void (*set_credits)(struct dbt_drive *st, double fraction, uint64_t at);
};

const struct dbt_device_ops *dbt_ops_by_kind(int kind);
const struct dbt_device_ops *dbt_ops_by_name(const char *name);

/* Fills the kind's fields with their declared defaults (shared names differ by kind). */
void dbt_params_defaults(struct dbt_params *p, int kind);
/* Sets option i of the kind's option table: a finite number within the option's range (and not
 * negative, not even -0, where it cannot be). Returns 0, or -1 with a message in err. */
int dbt_params_set_index(struct dbt_params *p, int kind, int i, double v, char *err, size_t errlen);
/* The same by the option's name. */
int dbt_params_set(struct dbt_params *p, int kind, const char *name, double v, char *err, size_t errlen);

/* Every parameter of the kind is a number inside its option table's [min, max]. Returns 0, or -1
 * with a message in err. For parameters read from a file that someone else could have written. */
int dbt_params_check(const struct dbt_params *p, int kind, char *err, size_t errlen);

void dbt_model_init(struct dbt_model_state *st, int kind, const struct dbt_params *p);
/* A model state as dbt_model_init and dbt_model_submit leave it: the kind throughout, member,
 * segment and channel counts within their arrays, ring positions within the ring. Returns 0, or -1
 * with a message in err. */
int dbt_model_check(const struct dbt_model_state *st, int kind, char *err, size_t errlen);
/* Every member's burst credits (DBT_CAP_LIMITED kinds; others have none) set to `fraction` of a full
 * bucket as of `at`. */
void dbt_model_set_credits(struct dbt_model_state *st, double fraction, uint64_t at);
void dbt_model_submit(struct dbt_model_state *st, const struct dbt_request *rq, struct dbt_result *out);

/* Command queueing (SATA NCQ, SCSI TCQ). A drive with queue_depth > 1 holds that many commands (per
 * member of an array) and, whenever it is free, starts the one it can reach soonest (shortest access
 * time: positioning, rotation and transfer, or the buffer's time for a hit or a write the write
 * cache takes; the oldest on a tie); older requests beyond its depth wait in the block layer in
 * arrival order, which bounds how long a far request is passed over. Time is an input here too: the
 * caller queues a request, then asks the model to make the choices due by `now` (a choice at time T
 * is made among the requests queued by then, so the caller asks once T has passed), and takes the
 * result by ticket. `started` hears of every request as the drive starts it (busy-time accounting),
 * may be NULL. */
typedef void (*dbt_started_fn)(void *ctx, const struct dbt_request *rq, const struct dbt_result *res);

/* The drive reorders: a kind that can (DBT_CAP_REORDERS) with a queue depth above 1. Otherwise
 * dbt_model_submit answers at once. */
int dbt_model_queueing(const struct dbt_model_state *st);
/* Queues rq; returns its ticket, or 0 when the queue is full (submit it at once instead). */
uint64_t dbt_model_enqueue(struct dbt_model_state *st, const struct dbt_request *rq);
/* Makes the choices due by now. Returns when the next is due (UINT64_MAX: nothing waits). */
uint64_t dbt_model_run(struct dbt_model_state *st, uint64_t now, dbt_started_fn started, void *ctx);
/* 1: the request started; its result is in *res and its entry is freed (*reordered: the drive took it
 * before an older request that had come). 0: it waits. -1: no such ticket. */
int dbt_model_take(struct dbt_model_state *st, uint64_t ticket, struct dbt_result *res, int *reordered);
/* A request the caller needs answered now (a flush, the page cache's, an O_DSYNC write). Without
 * waiting requests: dbt_model_submit. A flush is no queued command: the drive first finishes its
 * queue. Another request joins the queue, and the drive starts requests in its order until it has
 * started that one, choosing among those come so far. `started` hears of rq too. */
void dbt_model_submit_now(struct dbt_model_state *st, const struct dbt_request *rq, struct dbt_result *out,
                          dbt_started_fn started, void *ctx);

#endif
