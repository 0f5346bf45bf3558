/* Device physics: the one place that turns a request stream into service times.
 *
 * Used live by the interposer (state in shared memory, under the device lock) and offline by the
 * simulator (state on the heap). Nothing here reads a clock or does I/O: time is an input, so a
 * given request stream always yields the same completions. */
#ifndef DBT_DEVMODEL_H
#define DBT_DEVMODEL_H

#include <stddef.h>
#include <stdint.h>

#define DBT_OPS_VERSION 2

enum dbt_kind { DBT_KIND_REAL = 0, DBT_KIND_HDD = 1, DBT_KIND_SSD = 2, DBT_KIND_RAM = 3, DBT_KIND_CLOUD = 4, DBT_KIND_COUNT };

enum dbt_op { DBT_OP_NONE = 0, DBT_OP_READ = 1, DBT_OP_WRITE = 2, DBT_OP_FLUSH = 3 };

/* Result flags. */
#define DBT_RES_CACHE_HIT 0x1u   /* served from the drive's own cache, no media access */
#define DBT_RES_STREAM 0x2u      /* continued the previous transfer, no positioning */

/* Parameters, in the units their names say. One struct for every kind: each kind reads its own
 * fields; the option table below says which. */
struct dbt_params {
    double capacity_gb;
    /* hdd */
    double rpm, seek_track_ms, seek_avg_read_ms, seek_avg_write_ms, seek_full_ms;
    double outer_mb_s, inner_mb_s, controller_overhead_ms, cache_hit_overhead_us, interface_mb_s;
    double cache_mib, cache_segments, write_cache, write_cache_mib, cylinders, write_cache_protected;
    double seek_knee_cyl, seek_a_ms, seek_b_ms, seek_c_ms, seek_e_ms, write_overhead_us, readahead_kib, readahead_includes_request, read_watermark, head_switch_ms;
    double readahead_track, readahead_on_hit;
    double span_scale, queue_depth;
    /* ssd (interface_mb_s shared) */
    double channels, read_latency_us, write_latency_us, channel_read_mb_s, channel_write_mb_s;
    double page_kib, flush_ms;
    /* ram */
    double latency_us;
    /* cloud (read_latency_us, write_latency_us, interface_mb_s and flush_ms shared) */
    double iops, burst_iops, burst_credits, mb_s, burst_mb_s, burst_mb, io_unit_kib;
    /* every kind: an array of identical members, striped */
    double members, stripe_kib;
};

/* The most options one kind has (each kind's table is checked against it): a device spec carries
 * that many values. */
#define DBT_MAX_PARAMS 48

/* One row of the option table: the single declaration of a device parameter. */
struct dbt_param_def {
    const char *name;
    const char *unit;
    size_t offset; /* into struct dbt_params */
    double def, min, max;
    const char *help;
};

#define DBT_MAX_CHANNELS 64
#define DBT_MAX_MEMBERS 16
#define DBT_HDD_MAX_SEGMENTS 32
#define DBT_HDD_WB_EXTENTS 512
/* readahead_track: how a drive's read-ahead relates to its tracks */
#define DBT_RA_AMOUNT 0      /* readahead_kib on, whatever the tracks */
#define DBT_RA_TRACK_END 1   /* that, but no further than the end of the track (no head switch) */
#define DBT_RA_NEXT_TRACK 2  /* to the end of the track after the request, whatever readahead_kib says */
#define DBT_MAX_QUEUE_DEPTH 64

struct dbt_hdd_seg {
    uint64_t start, end; /* bytes [start, end) held, as of fill_t for the active segment */
    uint64_t last_use;
};

/* Derived constants, computed once from the parameters. */
struct dbt_derived {
    double bytes_per_ns_iface, hit_overhead_ns, ctrl_overhead_ns, rot_ns, wack_overhead_ns, wthrough_overhead_ns;
    double seek_a_r, seek_b_r, seek_c_r, seek_e_r; /* read curve: a + b sqrt(d) to knee, c + e d after */
    double seek_a_w, seek_b_w, seek_c_w, seek_e_w;
    double knee, cyl, cap_bytes, r_in; /* r_in: inner radius as a fraction of outer */
    double span, span_from; /* span_scale, beyond a segment's reach (cylinders) */
    double outer_bytes_per_ns, seg_bytes, wc_bytes, ra_bytes;
    int ra_from_start, ra_track, ra_on_hit; /* ra_track: readahead_track, one of DBT_RA_* */
    double watermark, head_switch_ns;
    int wc_protected;
    int nseg, nchan, queue_depth;
    double rd_lat_ns, wr_lat_ns, ch_rd_bpns, ch_wr_bpns, page_bytes, flush_ns, lat_ns;
    /* cloud: the IOPS and byte limiters (per ns), their credit buckets, the I/O accounting unit */
    double iops_base, iops_peak, iops_cap, bytes_base, bytes_peak, bytes_cap, io_unit_bytes;
};

/* A dirty extent in the drive's write-back buffer: bytes [start, end), acknowledged at ready. */
struct dbt_hdd_extent {
    uint64_t start, end, ready;
};

struct dbt_hdd_state {
    uint64_t busy_until;     /* the host command in progress ends (one command at a time) */
    uint64_t act_free;       /* the actuator's last media operation ends */
    double head_cyl;         /* where that operation left the head */
    uint64_t head_pos;       /* the byte after it */
    struct dbt_hdd_seg seg[DBT_HDD_MAX_SEGMENTS];
    int active;              /* segment the head is reading ahead into, or -1 */
    uint64_t fill_t;         /* time at which seg[active].end was on the buffer */
    uint64_t fill_limit;     /* read-ahead stops here */
    double fill_bpns;
    uint64_t use_clock;
    /* write-back: dirty extents sorted by address, and the one being destaged */
    uint32_t wb_count;
    uint64_t wb_dirty;       /* bytes in wb[] */
    uint64_t inflight_start, inflight_end, inflight_done;
    uint64_t destage_ops;
    struct dbt_hdd_extent wb[DBT_HDD_WB_EXTENTS];
};

struct dbt_flash_state {
    uint64_t chan_busy[DBT_MAX_CHANNELS];
    uint64_t iface_busy;
};

/* A token bucket with a peak rate: tokens refill at the base rate up to the bucket's capacity; a
 * request takes its tokens (waiting for them if short) and no two are admitted closer than the peak
 * rate allows. A capacity of 0 is a plain rate limit at the base rate. */
struct dbt_bucket {
    double tokens;
    uint64_t t_last;    /* tokens counted up to here */
    uint64_t next_peak; /* earliest admission the peak rate allows */
};

struct dbt_cloud_state {
    struct dbt_bucket iops, bytes;
    uint64_t iface_busy;
};

/* One drive's model. */
struct dbt_drive {
    int kind;
    struct dbt_derived d;
    union {
        struct dbt_hdd_state hdd;
        struct dbt_flash_state flash;
        struct dbt_cloud_state cloud;
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

struct dbt_result {
    uint64_t start_ns;    /* service began (queueing ends) */
    uint64_t complete_ns; /* modelled completion */
    uint32_t flags;
};

/* A device kind, fio-engine style: a versioned table of hooks and its option table. */
struct dbt_device_ops {
    const char *name;
    int version;
    int kind;
    const struct dbt_param_def *params;
    int nparams;
    const char *help;
    void (*init)(struct dbt_drive *st, const struct dbt_params *p);
    void (*submit)(struct dbt_drive *st, const struct dbt_request *rq, struct dbt_result *out);
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

/* The drive reorders: an HDD with queue_depth > 1. Otherwise dbt_model_submit answers at once. */
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

/* Exposed for tests: HDD seek time in ns for a distance in cylinders. */
double dbt_hdd_seek_ns(const struct dbt_derived *d, double dist_cyl, int is_write);
double dbt_hdd_media_bpns(const struct dbt_derived *d, uint64_t addr);
double dbt_hdd_cyl_of(const struct dbt_derived *d, uint64_t addr);
/* One media access: from cylinder `from` at t, controller overhead, seek, rotation to addr, then
 * len bytes at the media rate. Returns when the last byte is off (or on) the media. */
uint64_t dbt_hdd_media(const struct dbt_derived *d, double from, uint64_t t, uint64_t addr, uint32_t len,
                       int is_write);

#endif
