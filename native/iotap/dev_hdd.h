/* The HDD kind (dev_hdd.c): its parameters, the constants derived from them, and a drive's state.
 * Ruemmler & Wilkes: a seek curve, rotation, a zoned media rate, read-ahead buffer segments, a
 * write-back buffer destaged in idle time, command queueing. Part of devmodel.h's public view, as
 * every drive's state lies in the run's shared state. */
#ifndef DBT_DEV_HDD_H
#define DBT_DEV_HDD_H

#include <stdint.h>

#define DBT_HDD_MAX_SEGMENTS 32
#define DBT_HDD_WB_EXTENTS 512
/* readahead_track: how a drive's read-ahead relates to its tracks */
#define DBT_RA_AMOUNT 0     /* readahead_kib on, whatever the tracks */
#define DBT_RA_TRACK_END 1  /* that, but no further than the end of the track (no head switch) */
#define DBT_RA_NEXT_TRACK 2 /* to the end of the track after the request, whatever readahead_kib says */

/* The HDD's own options (devmodel.h's struct dbt_params holds those of every kind), in its option
 * table's units. */
struct dbt_hdd_params {
    double rpm, seek_track_ms, seek_avg_read_ms, seek_avg_write_ms, seek_full_ms;
    double outer_mb_s, inner_mb_s, controller_overhead_ms, cache_hit_overhead_us, interface_mb_s;
    double cache_mib, cache_segments, write_cache, write_cache_mib, cylinders, write_cache_protected;
    double seek_knee_cyl, seek_a_ms, seek_b_ms, seek_c_ms, seek_e_ms, write_overhead_us, readahead_kib,
        readahead_includes_request, read_watermark, head_switch_ms;
    double readahead_track, readahead_on_hit;
    double span_scale, queue_depth;
    /* a command's overheads after a write (DiskSim's "after write" figures), where they differ from
     * controller_overhead_ms, cache_hit_overhead_us and write_overhead_us, those after a read */
    double controller_overhead_after_write_ms, cache_hit_overhead_after_write_us, write_overhead_after_write_us;
};

/* Derived constants, computed once from the parameters. */
struct dbt_hdd_derived {
    double bytes_per_ns_iface, rot_ns;
    /* command overheads, each indexed by the previous command: [0] after a read, [1] after a write */
    double hit_overhead_ns[2], ctrl_overhead_ns[2], wack_overhead_ns[2], wthrough_overhead_ns[2];
    double seek_a_r, seek_b_r, seek_c_r, seek_e_r; /* read curve: a + b sqrt(d) to knee, c + e d after */
    double seek_a_w, seek_b_w, seek_c_w, seek_e_w;
    double knee, cyl, cap_bytes, r_in; /* r_in: inner radius as a fraction of outer */
    double span, span_from;            /* span_scale, beyond a segment's reach (cylinders) */
    double outer_bytes_per_ns, seg_bytes, wc_bytes, ra_bytes;
    int ra_from_start, ra_track, ra_on_hit; /* ra_track: readahead_track, one of DBT_RA_* */
    double watermark, head_switch_ns;
    int wc_protected;
    int nseg, queue_depth;
};

struct dbt_hdd_seg {
    uint64_t start, end; /* bytes [start, end) held, as of fill_t for the active segment */
    uint64_t last_use;
};

/* A dirty extent in the drive's write-back buffer: bytes [start, end), acknowledged at ready. */
struct dbt_hdd_extent {
    uint64_t start, end, ready;
};

struct dbt_hdd_state {
    uint64_t busy_until; /* the host command in progress ends (one command at a time) */
    uint64_t act_free;   /* the actuator's last media operation ends */
    double head_cyl;     /* where that operation left the head */
    uint64_t head_pos;   /* the byte after it */
    struct dbt_hdd_seg seg[DBT_HDD_MAX_SEGMENTS];
    int active;          /* segment the head is reading ahead into, or -1 */
    uint64_t fill_t;     /* time at which seg[active].end was on the buffer */
    uint64_t fill_limit; /* read-ahead stops here */
    double fill_bpns;
    uint64_t use_clock;
    int after_write; /* the previous read or write was a write: the next command pays its after-write overhead */
    /* write-back: dirty extents sorted by address, and the one being destaged */
    uint32_t wb_count;
    uint64_t wb_dirty; /* bytes in wb[] */
    uint64_t inflight_start, inflight_end, inflight_done;
    uint64_t destage_ops;
    struct dbt_hdd_extent wb[DBT_HDD_WB_EXTENTS];
};

struct dbt_hdd_drive {
    struct dbt_hdd_derived d;
    struct dbt_hdd_state s;
};

/* Exposed for tests: HDD seek time in ns for a distance in cylinders. */
double dbt_hdd_seek_ns(const struct dbt_hdd_derived *d, double dist_cyl, int is_write);
double dbt_hdd_media_bpns(const struct dbt_hdd_derived *d, uint64_t addr);
double dbt_hdd_cyl_of(const struct dbt_hdd_derived *d, uint64_t addr);
/* One media access: from cylinder `from` at t, controller overhead (after a read), seek, rotation to
 * addr, then len bytes at the media rate. Returns when the last byte is off (or on) the media. */
uint64_t dbt_hdd_media(const struct dbt_hdd_derived *d, double from, uint64_t t, uint64_t addr, uint32_t len,
                       int is_write);

#endif
