/* The HDD kind. See dev_hdd.h. Units inside: nanoseconds and bytes. */
#include "devkind.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The option table: every HDD parameter, declared once. Python reads it (dbt_param_table_json) to
 * validate profiles and to document them. */
static const struct dbt_param_def hdd_params[] = {
    {"capacity_gb", "GB", DBT_PARAM(capacity_gb), 1000, 1, 100000, "capacity (10^9 bytes); sets the zoned geometry"},
    {"rpm", "rev/min", DBT_KIND_PARAM(hdd, rpm), 7200, 3600, 20000, "spindle speed; one rotation = 60000/rpm ms"},
    {"seek_track_ms", "ms", DBT_KIND_PARAM(hdd, seek_track_ms), 0.8, 0.05, 10, "track-to-track (one cylinder) read seek"},
    {"seek_avg_read_ms", "ms", DBT_KIND_PARAM(hdd, seek_avg_read_ms), 8.5, 0.5, 30, "datasheet average read seek (one-third stroke)"},
    {"seek_avg_write_ms", "ms", DBT_KIND_PARAM(hdd, seek_avg_write_ms), 9.5, 0.5, 30, "datasheet average write seek; the excess over reads is settling, added to every write seek"},
    {"seek_full_ms", "ms", DBT_KIND_PARAM(hdd, seek_full_ms), 17, 1, 50, "full-stroke read seek"},
    {"outer_mb_s", "MB/s", DBT_KIND_PARAM(hdd, outer_mb_s), 125, 1, 2000, "sustained media rate at the outer edge (10^6 B/s)"},
    {"inner_mb_s", "MB/s", DBT_KIND_PARAM(hdd, inner_mb_s), 65, 1, 2000, "sustained media rate at the inner edge"},
    {"controller_overhead_ms", "ms", DBT_KIND_PARAM(hdd, controller_overhead_ms), 0.3, 0, 5, "command overhead of a read that goes to the media (after a read; after a write too, unless controller_overhead_after_write_ms)"},
    {"cache_hit_overhead_us", "us", DBT_KIND_PARAM(hdd, cache_hit_overhead_us), 50, 0, 5000, "command overhead of a request served from the drive's buffer (after a read; after a write too, unless cache_hit_overhead_after_write_us)"},
    {"interface_mb_s", "MB/s", DBT_KIND_PARAM(hdd, interface_mb_s), 300, 1, 100000, "host interface rate (SATA 3 Gb/s ~ 300 MB/s)"},
    {"cache_mib", "MiB", DBT_KIND_PARAM(hdd, cache_mib), 32, 0, 4096, "drive buffer used for read-ahead segments"},
    {"cache_segments", "count", DBT_KIND_PARAM(hdd, cache_segments), 16, 1, DBT_HDD_MAX_SEGMENTS, "read-ahead segments the buffer is split into"},
    {"write_cache", "0/1", DBT_KIND_PARAM(hdd, write_cache), 1, 0, 1, "1: writes are acknowledged from the buffer and destaged later; a flush waits for the destage"},
    {"write_cache_mib", "MiB", DBT_KIND_PARAM(hdd, write_cache_mib), 16, 0, 4096, "buffer space for dirty data awaiting destage"},
    {"cylinders", "count", DBT_KIND_PARAM(hdd, cylinders), 100000, 100, 10000000, "cylinders over the stroke: seek distances are counted in these"},
    {"write_cache_protected", "0/1", DBT_KIND_PARAM(hdd, write_cache_protected), 0, 0, 1, "1: the write cache survives power loss (a RAID controller's battery-backed cache): a flush returns once the data is in it, destage goes on behind"},
    {"write_overhead_us", "us", DBT_KIND_PARAM(hdd, write_overhead_us), 0, 0, 5000, "command overhead of a write, acknowledged from the write cache or written through (after a read; after a write too, unless write_overhead_after_write_us); 0 = as a read's (cache_hit_overhead_us, controller_overhead_ms)"},
    {"controller_overhead_after_write_ms", "ms", DBT_KIND_PARAM(hdd, controller_overhead_after_write_ms), 0, 0, 5, "command overhead of a read that goes to the media when the previous command was a write (DiskSim's Read miss over. after write); 0 = controller_overhead_ms"},
    {"cache_hit_overhead_after_write_us", "us", DBT_KIND_PARAM(hdd, cache_hit_overhead_after_write_us), 0, 0, 5000, "command overhead of a read served from the buffer when the previous command was a write (Read hit over. after write); 0 = cache_hit_overhead_us"},
    {"write_overhead_after_write_us", "us", DBT_KIND_PARAM(hdd, write_overhead_after_write_us), 0, 0, 5000, "command overhead of a write when the previous command was a write (Write hit over. after write with a write cache, Write miss over. without); 0 = write_overhead_us"},
    {"readahead_kib", "KiB", DBT_KIND_PARAM(hdd, readahead_kib), 0, 0, 4194304, "how far the drive reads ahead after a read; 0 = a segment (cache_mib / cache_segments)"},
    {"readahead_includes_request", "0/1", DBT_KIND_PARAM(hdd, readahead_includes_request), 0, 0, 1, "1: the read-ahead is counted from the request's start (the request is part of it), 0: from its end"},
    {"read_watermark", "fraction", DBT_KIND_PARAM(hdd, read_watermark), 0, 0, 1, "the drive starts sending a read's data to the host once this fraction of it is in its buffer (SCSI reconnection); 0 = with the first sector"},
    {"readahead_track", "0/1/2", DBT_KIND_PARAM(hdd, readahead_track), 0, 0, 2, "0: the read-ahead goes readahead_kib on; 1: no further than the end of the track either (no head switch); 2: to the end of the track after the request, one more if the segment began on an earlier one, whatever readahead_kib says, the segment keeping the last of it (DEC's prefetch scheme)"},
    {"readahead_on_hit", "0/1", DBT_KIND_PARAM(hdd, readahead_on_hit), 0, 0, 1, "1: a read served wholly from the segment being read ahead into carries the read-ahead on from its own end, restarting it if it had stopped; 0: the read-ahead stops where the media read set it"},
    {"head_switch_ms", "ms", DBT_KIND_PARAM(hdd, head_switch_ms), 0, 0, 10, "time lost at each track boundary a transfer crosses (head switch, track skew); 0 = none"},
    {"queue_depth", "commands", DBT_KIND_PARAM(hdd, queue_depth), 1, 1, DBT_MAX_QUEUE_DEPTH, "commands the drive holds and reorders (SATA NCQ: up to 32; SCSI TCQ: more), starting next the one it reaches soonest; 1 = one command at a time, in arrival order"},
    {"span_scale", "x", DBT_KIND_PARAM(hdd, span_scale), 1, 1, 1e6, "a scale model's stretch of the data's span: a seek beyond a read segment's reach crosses this many times as many cylinders, so data 1/F of the size seeks as the full-size data did; 1 = as laid out"},
    {"seek_knee_cyl", "cylinders", DBT_KIND_PARAM(hdd, seek_knee_cyl), 0, 0, 10000000, "a measured seek curve instead of the three figures: a + b sqrt(d) up to this distance, c + e d beyond (Ruemmler & Wilkes); 0 = fit through track, average and full-stroke seeks"},
    {"seek_a_ms", "ms", DBT_KIND_PARAM(hdd, seek_a_ms), 0, -50, 50, "seek curve a (with seek_knee_cyl)"},
    {"seek_b_ms", "ms", DBT_KIND_PARAM(hdd, seek_b_ms), 0, 0, 50, "seek curve b, per square root of a cylinder (with seek_knee_cyl)"},
    {"seek_c_ms", "ms", DBT_KIND_PARAM(hdd, seek_c_ms), 0, -50, 50, "seek curve c (with seek_knee_cyl)"},
    {"seek_e_ms", "ms", DBT_KIND_PARAM(hdd, seek_e_ms), 0, 0, 1, "seek curve e, per cylinder (with seek_knee_cyl)"},
    DBT_ARRAY_PARAMS,
    DBT_DURABILITY_PARAMS(0.5),
};

DBT_FITS_SPEC(hdd_params);

/* HDD: Ruemmler & Wilkes style. Geometry: outer radius 1, inner r_in = inner/outer rate, constant
 * linear density, so capacity outside radius r is proportional to 1 - r^2. */

static double frac(double x) { return x - floor(x); }

static double hdd_radius(const struct dbt_hdd_derived *d, uint64_t addr) {
    double f = fmod((double)addr, d->cap_bytes) / d->cap_bytes;
    return sqrt(1.0 - f * (1.0 - d->r_in * d->r_in));
}

double dbt_hdd_cyl_of(const struct dbt_hdd_derived *d, uint64_t addr) {
    if (d->r_in > 1.0 - 1e-9) /* one zone: every track holds the same, so cylinders follow the address */
        return fmod((double)addr, d->cap_bytes) / d->cap_bytes * d->cyl;
    return (1.0 - hdd_radius(d, addr)) / (1.0 - d->r_in) * d->cyl;
}

double dbt_hdd_media_bpns(const struct dbt_hdd_derived *d, uint64_t addr) {
    return d->outer_bytes_per_ns * hdd_radius(d, addr);
}

double dbt_hdd_seek_ns(const struct dbt_hdd_derived *d, double dist, int is_write) {
    /* A scale model: a step within a read segment's reach is a stream's, as long as at full size; a
     * farther jump crosses span_scale times as many cylinders, as the full-size data lay, up to the
     * full stroke. */
    if (d->span > 1.0 && dist > d->span_from) dist = fmin(d->span_from + (dist - d->span_from) * d->span, d->cyl);
    if (dist < 1.0) return 0.0; /* same cylinder: a head switch, charged in the overhead */
    if (is_write)
        return dist <= d->knee ? d->seek_a_w + d->seek_b_w * sqrt(dist) : d->seek_c_w + d->seek_e_w * dist;
    return dist <= d->knee ? d->seek_a_r + d->seek_b_r * sqrt(dist) : d->seek_c_r + d->seek_e_r * dist;
}

/* Angular position of a byte address within its track, in turns. */
static double hdd_angle(const struct dbt_hdd_derived *d, uint64_t addr) {
    double track_bytes = dbt_hdd_media_bpns(d, addr) * d->rot_ns;
    return frac((double)addr / track_bytes);
}

/* Bytes in the track holding addr, and where that track ends (tracks as hdd_angle lays them out). */
static double hdd_track_bytes(const struct dbt_hdd_derived *d, uint64_t addr) { return dbt_hdd_media_bpns(d, addr) * d->rot_ns; }

static uint64_t hdd_track_end(const struct dbt_hdd_derived *d, uint64_t addr) {
    double track = hdd_track_bytes(d, addr);
    return (uint64_t)((floor((double)addr / track) + 1.0) * track);
}

/* The host sees a read's media transfer end no sooner than its data crossed the interface, which
 * starts once the drive's read water mark of it is in the buffer (the first sector, at 0): a slow
 * bus, not the platters, may be the limit. */
static uint64_t hdd_host_done(const struct dbt_hdd_derived *d, uint64_t media_done, uint64_t addr, uint32_t len) {
    double media = (double)len / dbt_hdd_media_bpns(d, addr);
    double first = (double)media_done - media + d->watermark * media;
    double host = first + (double)len / d->bytes_per_ns_iface;
    return host > (double)media_done ? (uint64_t)host : media_done;
}

/* Positions the head from cylinder `from` starting at t, after the command overhead and no sooner
 * than `lead_ns` after it, and transfers [addr, addr+len) at the media rate. Returns when the last
 * byte is off (or on) the media. */
static uint64_t hdd_media_with(const struct dbt_hdd_derived *d, double from, uint64_t t, uint64_t addr, uint32_t len,
                               int is_write, double overhead_ns, double lead_ns) {
    double seek = dbt_hdd_seek_ns(d, fabs(dbt_hdd_cyl_of(d, addr) - from), is_write);
    double ta = (double)t + overhead_ns + (seek > lead_ns ? seek : lead_ns);
    double rot = frac(hdd_angle(d, addr) - frac(ta / d->rot_ns)) * d->rot_ns;
    double xfer = (double)len / dbt_hdd_media_bpns(d, addr);
    if (d->head_switch_ns > 0) { /* each track boundary inside the transfer: a head (or track) switch */
        double track = dbt_hdd_media_bpns(d, addr) * d->rot_ns;
        double crossings = floor(hdd_angle(d, addr) + (double)len / track);
        xfer += crossings * d->head_switch_ns;
    }
    return (uint64_t)(ta + rot + xfer);
}

/* A write the drive does not cache: the head writes it once the whole of its data has crossed the
 * interface into the buffer, from the end of the command overhead (the seek goes on meanwhile), and
 * a start position the data misses costs a revolution. Measured on DiskSim's two write-through
 * traces, demerits hp_c2247a / dec_rz26: 0.232 / 0.498 ms this way (0.212 for the HP once a hit
 * carried its read-ahead on, 0.470 for the DEC once its overheads followed the previous command's
 * kind); 0.452 / 0.543 with the head starting as soon as it can stay behind
 * the bus sector by sector; 0.411 / 0.539 with the bus transfer taken as overlapping the write,
 * its end the host's. DiskSim itself, probed with pairs of
 * sequential writes, does start the head once it can stay behind the bus (at the write block rate);
 * that rule with the diskspecs' write rate and overheads still scores 0.26-0.33 here, as a stream's
 * writes wait on the exact phase of its controller's disconnect and reselection sequence. */
static uint64_t hdd_write_through(const struct dbt_hdd_derived *d, double from, uint64_t t, uint64_t addr, uint32_t len,
                                  double overhead_ns) {
    return hdd_media_with(d, from, t, addr, len, 1, overhead_ns, (double)len / d->bytes_per_ns_iface);
}

uint64_t dbt_hdd_media(const struct dbt_hdd_derived *d, double from, uint64_t t, uint64_t addr, uint32_t len,
                       int is_write) {
    return hdd_media_with(d, from, t, addr, len, is_write, d->ctrl_overhead_ns[0], 0.0);
}

static void hdd_init(struct dbt_drive *st, const struct dbt_params *p) {
    const struct dbt_hdd_params *hp = &p->k.hdd;
    struct dbt_hdd_derived *d = &st->u.hdd.d;
    d->cap_bytes = p->capacity_gb * 1e9;
    d->cyl = hp->cylinders;
    d->r_in = hp->inner_mb_s / hp->outer_mb_s;
    if (d->r_in > 1.0) d->r_in = 1.0;
    d->outer_bytes_per_ns = hp->outer_mb_s * 1e6 / 1e9;
    d->bytes_per_ns_iface = hp->interface_mb_s * 1e6 / 1e9;
    d->rot_ns = 60e9 / hp->rpm;
    /* The command overheads after a read ([0]) and after a write ([1]); an after-write figure left 0
     * is the after-read one, and a write's left 0 is a read's, after the same command. */
    d->ctrl_overhead_ns[0] = hp->controller_overhead_ms * 1e6;
    d->ctrl_overhead_ns[1] = hp->controller_overhead_after_write_ms > 0 ? hp->controller_overhead_after_write_ms * 1e6
                                                                        : d->ctrl_overhead_ns[0];
    d->hit_overhead_ns[0] = hp->cache_hit_overhead_us * 1e3;
    d->hit_overhead_ns[1] = hp->cache_hit_overhead_after_write_us > 0 ? hp->cache_hit_overhead_after_write_us * 1e3
                                                                      : d->hit_overhead_ns[0];
    double write_us[2] = {hp->write_overhead_us, hp->write_overhead_us};
    if (hp->write_overhead_after_write_us > 0) write_us[1] = hp->write_overhead_after_write_us;
    for (int i = 0; i < 2; i++) {
        d->wack_overhead_ns[i] = write_us[i] > 0 ? write_us[i] * 1e3 : d->hit_overhead_ns[i];
        d->wthrough_overhead_ns[i] = write_us[i] > 0 ? write_us[i] * 1e3 : d->ctrl_overhead_ns[i];
    }
    /* Seek curve through (1, track), (D/3, average) with a + b sqrt(d); linear on to (D, full). */
    double D = d->cyl, knee = D / 3.0;
    double t1 = hp->seek_track_ms * 1e6, tavg = hp->seek_avg_read_ms * 1e6, tfull = hp->seek_full_ms * 1e6;
    if (tfull < tavg) tfull = tavg;
    if (tavg < t1) tavg = t1;
    d->knee = knee;
    d->seek_b_r = (tavg - t1) / (sqrt(knee) - 1.0);
    d->seek_a_r = t1 - d->seek_b_r;
    d->seek_e_r = (tfull - tavg) / (D - knee);
    d->seek_c_r = tavg - d->seek_e_r * knee;
    if (hp->seek_knee_cyl > 0) { /* the drive's own measured curve */
        d->knee = hp->seek_knee_cyl;
        d->seek_a_r = hp->seek_a_ms * 1e6;
        d->seek_b_r = hp->seek_b_ms * 1e6;
        d->seek_c_r = hp->seek_c_ms * 1e6;
        d->seek_e_r = hp->seek_e_ms * 1e6;
    }
    double settle = (hp->seek_avg_write_ms - hp->seek_avg_read_ms) * 1e6;
    if (settle < 0) settle = 0;
    d->seek_a_w = d->seek_a_r + settle;
    d->seek_b_w = d->seek_b_r;
    d->seek_c_w = d->seek_c_r + settle;
    d->seek_e_w = d->seek_e_r;
    d->nseg = (int)hp->cache_segments;
    if (d->nseg < 1) d->nseg = 1;
    if (d->nseg > DBT_HDD_MAX_SEGMENTS) d->nseg = DBT_HDD_MAX_SEGMENTS;
    d->seg_bytes = hp->cache_mib * 1048576.0 / d->nseg;
    d->ra_bytes = hp->readahead_kib > 0 ? hp->readahead_kib * 1024.0 : d->seg_bytes;
    d->span = hp->span_scale;
    d->queue_depth = hp->queue_depth >= 1 ? (int)hp->queue_depth : 1;
    d->span_from = d->seg_bytes / (d->cap_bytes / d->cyl); /* a segment's reach, in (average) cylinders */
    if (d->ra_bytes > d->seg_bytes) d->ra_bytes = d->seg_bytes; /* a segment holds no more */
    d->ra_from_start = hp->readahead_includes_request > 0.5;
    d->ra_track = (int)(hp->readahead_track + 0.5);
    d->ra_on_hit = hp->readahead_on_hit > 0.5;
    d->watermark = hp->read_watermark;
    d->head_switch_ns = hp->head_switch_ms * 1e6;
    d->wc_bytes = hp->write_cache > 0.5 ? hp->write_cache_mib * 1048576.0 : 0.0;
    d->wc_protected = d->wc_bytes > 0 && hp->write_cache_protected > 0.5;
    struct dbt_hdd_state *h = &st->u.hdd.s;
    memset(h, 0, sizeof *h);
    h->active = -1;
}

/* The first byte a segment still holds when its data ends at seg_end: it keeps the last seg_bytes. */
static uint64_t hdd_seg_start(const struct dbt_hdd_derived *d, const struct dbt_hdd_seg *s, uint64_t seg_end) {
    uint64_t keep = (uint64_t)d->seg_bytes;
    return seg_end - s->start > keep ? seg_end - keep : s->start;
}

/* End of the data the active segment holds at time t (read-ahead runs at the media rate). */
static uint64_t hdd_fill_end(const struct dbt_hdd_state *h, uint64_t t) {
    const struct dbt_hdd_seg *s = &h->seg[h->active];
    if (t <= h->fill_t) return s->end;
    double e = (double)s->end + (double)(t - h->fill_t) * h->fill_bpns;
    return e >= (double)h->fill_limit ? h->fill_limit : (uint64_t)e;
}

/* Stops the read-ahead at t: the head leaves for another request. */
static void hdd_stop_readahead(const struct dbt_hdd_derived *d, struct dbt_hdd_state *h, uint64_t t) {
    if (h->active < 0) return;
    struct dbt_hdd_seg *s = &h->seg[h->active];
    uint64_t end = hdd_fill_end(h, t);
    s->start = hdd_seg_start(d, s, end);
    s->end = end;
    h->head_cyl = dbt_hdd_cyl_of(d, end);
    h->head_pos = end;
    uint64_t free_at = t > h->fill_t ? t : h->fill_t; /* the read's own transfer is not abandoned */
    if (free_at > h->act_free) h->act_free = free_at;
    h->active = -1;
}

/* When the read-ahead in progress reaches its limit (0 if none): until then it has the actuator
 * before the destage, as host reads do. */
static uint64_t hdd_readahead_end(const struct dbt_hdd_state *h) {
    if (h->active < 0) return 0;
    const struct dbt_hdd_seg *s = &h->seg[h->active];
    if (h->fill_limit <= s->end) return h->fill_t;
    return h->fill_t + (uint64_t)((double)(h->fill_limit - s->end) / h->fill_bpns);
}

/* ---- The write-back buffer. Dirty data is a set of extents sorted by address, merged when they
 * overlap or touch (a rewrite of any cached block is absorbed, adjacent writes become one run).
 * The drive destages in idle time, C-LOOK from the head (the next extent at or after it, else the
 * lowest), at most a track per operation so a host read waits at most one track's write; it
 * destages at once only when the buffer is full or flushed. */

/* First extent whose start is at or after addr. */
static uint32_t wb_lower(const struct dbt_hdd_state *h, uint64_t addr) {
    uint32_t lo = 0, hi = h->wb_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (h->wb[mid].start < addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Dirty bytes in the buffer at t: the set, and the extent being destaged until it is on the media. */
static uint64_t wb_dirty_at(const struct dbt_hdd_state *h, uint64_t t) {
    return h->wb_dirty + (h->inflight_done > t ? h->inflight_end - h->inflight_start : 0);
}

/* The extents [*first, *last) that [a, b) overlaps or touches, and the bytes they hold. */
static uint64_t wb_touching(const struct dbt_hdd_state *h, uint64_t a, uint64_t b, uint32_t *first, uint32_t *last) {
    uint32_t i = wb_lower(h, a);
    if (i > 0 && h->wb[i - 1].end >= a) i--;
    uint32_t j = i;
    uint64_t held = 0;
    for (; j < h->wb_count && h->wb[j].start <= b; j++) held += h->wb[j].end - h->wb[j].start;
    *first = i;
    *last = j;
    return held;
}

/* What adding [a, b) would add to the dirty bytes, and whether it needs a new slot. */
static uint64_t wb_growth(const struct dbt_hdd_state *h, uint64_t a, uint64_t b, int *new_slot) {
    uint32_t i, j;
    uint64_t held = wb_touching(h, a, b, &i, &j);
    if (i == j) {
        *new_slot = 1;
        return b - a;
    }
    uint64_t lo = h->wb[i].start < a ? h->wb[i].start : a;
    uint64_t hi = h->wb[j - 1].end > b ? h->wb[j - 1].end : b;
    *new_slot = 0;
    return (hi - lo) - held;
}

static void wb_insert(struct dbt_hdd_state *h, uint64_t a, uint64_t b, uint64_t ready) {
    uint32_t i, j;
    uint64_t held = wb_touching(h, a, b, &i, &j);
    struct dbt_hdd_extent e = {a, b, ready};
    if (j > i) {
        if (h->wb[i].start < e.start) e.start = h->wb[i].start;
        if (h->wb[j - 1].end > e.end) e.end = h->wb[j - 1].end;
    }
    /* Replace [i, j) by the one merged extent. */
    uint32_t keep = h->wb_count - j;
    memmove(&h->wb[i + 1], &h->wb[j], keep * sizeof e);
    h->wb[i] = e;
    h->wb_count = i + 1 + keep;
    h->wb_dirty += (e.end - e.start) - held;
}

/* The extent C-LOOK takes next among those acknowledged by t, or -1. */
static int wb_next(const struct dbt_hdd_state *h, uint64_t t) {
    uint32_t n = h->wb_count, from = wb_lower(h, h->head_pos);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (from + k) % n;
        if (h->wb[i].ready <= t) return (int)i;
    }
    return -1;
}

static uint64_t wb_first_ready(const struct dbt_hdd_state *h) {
    uint64_t r = UINT64_MAX;
    for (uint32_t i = 0; i < h->wb_count; i++)
        if (h->wb[i].ready < r) r = h->wb[i].ready;
    return r;
}

/* Destages up to a track of extent i, starting at t with the actuator free. */
static void wb_destage(const struct dbt_hdd_derived *d, struct dbt_hdd_state *h, uint32_t i, uint64_t t) {
    struct dbt_hdd_extent *e = &h->wb[i];
    uint64_t track = (uint64_t)(dbt_hdd_media_bpns(d, e->start) * d->rot_ns);
    uint64_t len = e->end - e->start;
    if (track && len > track) len = track;
    uint64_t done;
    if (e->start == h->head_pos && t == h->act_free) /* the head is there as the last operation ends */
        done = t + (uint64_t)((double)len / dbt_hdd_media_bpns(d, e->start));
    else
        done = dbt_hdd_media(d, h->head_cyl, t, e->start, (uint32_t)len, 1);
    h->inflight_start = e->start;
    h->inflight_end = e->start + len;
    h->inflight_done = done;
    h->wb_dirty -= len;
    e->start += len;
    if (e->start == e->end) {
        memmove(&h->wb[i], &h->wb[i + 1], (h->wb_count - i - 1) * sizeof *e);
        h->wb_count--;
    }
    h->head_pos = h->inflight_end;
    h->head_cyl = dbt_hdd_cyl_of(d, h->head_pos);
    h->act_free = done;
    h->destage_ops++;
}

/* Destages what the drive would in its idle time before t: whenever the actuator is free, no
 * read-ahead is running and some dirty data is acknowledged. */
static void wb_idle(const struct dbt_hdd_derived *d, struct dbt_hdd_state *h, uint64_t t) {
    while (h->wb_count) {
        uint64_t s = h->act_free, ra = hdd_readahead_end(h), first = wb_first_ready(h);
        if (ra > s) s = ra;
        if (first > s) s = first;
        if (s >= t) return;
        hdd_stop_readahead(d, h, s); /* it reached its limit by s */
        wb_destage(d, h, (uint32_t)wb_next(h, s), s);
    }
}

/* One destage operation at once (buffer full, or a flush), from t or when the actuator frees;
 * it stops any read-ahead. */
static void wb_force(const struct dbt_hdd_derived *d, struct dbt_hdd_state *h, uint64_t t) {
    uint64_t s = t > h->act_free ? t : h->act_free, first = wb_first_ready(h);
    if (first > s) s = first;
    hdd_stop_readahead(d, h, s);
    if (h->act_free > s) s = h->act_free;
    wb_destage(d, h, (uint32_t)wb_next(h, s), s);
}

/* The dirty data covers [a, b): a read is served from the buffer. */
static int wb_holds(const struct dbt_hdd_state *h, uint64_t a, uint64_t b, uint64_t t) {
    if (h->inflight_done > t && a >= h->inflight_start && b <= h->inflight_end) return 1;
    uint32_t i = wb_lower(h, a + 1);
    return i > 0 && h->wb[i - 1].start <= a && b <= h->wb[i - 1].end;
}

/* Where the read-ahead after a read of [addr, end) into a segment that begins at seg_start stops:
 * readahead_kib past its end, or counted from its start when the drive's read-ahead includes the
 * request; or as readahead_track bounds it by the tracks. */
static uint64_t hdd_readahead_limit(const struct dbt_hdd_derived *d, uint64_t seg_start, uint64_t addr, uint64_t end) {
    if (d->ra_track == DBT_RA_NEXT_TRACK) {
        uint64_t track_end = hdd_track_end(d, end);
        double track = hdd_track_bytes(d, end);
        return (double)seg_start < (double)track_end - track ? track_end + (uint64_t)track : track_end;
    }
    uint64_t limit = d->ra_from_start ? (addr + (uint64_t)d->ra_bytes > end ? addr + (uint64_t)d->ra_bytes : end)
                                      : end + (uint64_t)d->ra_bytes;
    if (d->ra_track == DBT_RA_TRACK_END) {
        uint64_t track_end = hdd_track_end(d, end - 1);
        if (limit > track_end) limit = track_end;
    }
    return limit;
}

/* A read of [addr, end) served from the active segment carries its read-ahead on as far as a read
 * there would have set it. Still running, the read-ahead just goes further; stopped at its limit,
 * with the head on the track since, it starts again when that point next comes under the head. */
static void hdd_readahead_on(const struct dbt_hdd_derived *d, struct dbt_hdd_state *h, uint64_t t, uint64_t addr,
                             uint64_t end) {
    struct dbt_hdd_seg *s = &h->seg[h->active];
    uint64_t limit = hdd_readahead_limit(d, s->start, addr, end);
    if (limit <= h->fill_limit) return;
    uint64_t reached = hdd_readahead_end(h);
    if (reached < t) {
        double turns = ceil((double)(t - reached) / d->rot_ns);
        s->end = h->fill_limit;
        s->start = hdd_seg_start(d, s, s->end);
        h->fill_t = reached + (uint64_t)(turns * d->rot_ns);
    }
    h->fill_limit = limit;
}

static int hdd_seg_victim(const struct dbt_hdd_derived *d, const struct dbt_hdd_state *h) {
    int best = 0;
    for (int i = 0; i < d->nseg; i++) {
        if (h->seg[i].end == 0) return i;
        if (h->seg[i].last_use < h->seg[best].last_use) best = i;
    }
    return best;
}

static void hdd_read(struct dbt_drive *st, const struct dbt_request *rq, struct dbt_result *out) {
    const struct dbt_hdd_derived *d = &st->u.hdd.d;
    struct dbt_hdd_state *h = &st->u.hdd.s;
    uint64_t start = rq->arrival_ns > h->busy_until ? rq->arrival_ns : h->busy_until;
    uint64_t end = rq->addr + rq->len;
    double xfer_iface = (double)rq->len / d->bytes_per_ns_iface;
    /* its overheads are those after the previous command's kind (DiskSim's lastflags); the next
     * command's, those after a read */
    int aw = h->after_write;
    h->after_write = 0;
    wb_idle(d, h, start);
    out->start_ns = start;
    out->flags = 0;

    /* Served from the buffer: a read-ahead segment, or dirty data not yet destaged. */
    int hit = wb_holds(h, rq->addr, end, start), hit_active = 0;
    for (int i = 0; i < d->nseg && !hit; i++) {
        struct dbt_hdd_seg *s = &h->seg[i];
        uint64_t s_end = (i == h->active) ? hdd_fill_end(h, start) : s->end;
        if (s->end > s->start && rq->addr >= hdd_seg_start(d, s, s_end) && end <= s_end) {
            s->last_use = ++h->use_clock;
            hit = 1;
            hit_active = i == h->active;
        }
    }
    if (hit) {
        if (hit_active && d->ra_on_hit) hdd_readahead_on(d, h, start, rq->addr, end);
        out->complete_ns = start + (uint64_t)(d->hit_overhead_ns[aw] + xfer_iface);
        out->flags = DBT_RES_CACHE_HIT;
        h->busy_until = out->complete_ns;
        return;
    }
    /* The head is already streaming towards it: wait for the read-ahead to get there. That covers a
     * short forward skip too (index order over a table: pages 2, 4, 8...), when waiting for the
     * read-ahead beats stopping it for a media access, as the drive's firmware would choose. */
    if (h->active >= 0) {
        struct dbt_hdd_seg *s = &h->seg[h->active];
        uint64_t cur = hdd_fill_end(h, start);
        int reachable = rq->addr >= hdd_seg_start(d, s, cur) && cur < h->fill_limit && rq->addr < h->fill_limit;
        if (reachable && rq->addr > cur) {
            uint64_t ready = h->fill_t + (uint64_t)((double)(end - s->end) / h->fill_bpns);
            uint64_t media =
                hdd_media_with(d, dbt_hdd_cyl_of(d, cur), start, rq->addr, rq->len, 0, d->ctrl_overhead_ns[aw], 0.0);
            reachable = ready <= media;
        }
        if (reachable) {
            uint64_t limit = hdd_readahead_limit(d, s->start, rq->addr, end);
            if (limit > h->fill_limit) h->fill_limit = limit;
            uint64_t ready = h->fill_t + (uint64_t)((double)(end - s->end) / h->fill_bpns);
            uint64_t quick = start + (uint64_t)(d->hit_overhead_ns[aw] + xfer_iface);
            out->complete_ns = ready > quick ? ready : quick;
            out->flags = DBT_RES_STREAM;
            /* Keep the segment to its size: it holds the most recent part of the stream. */
            s->end = end;
            h->fill_t = ready;
            s->start = hdd_seg_start(d, s, s->end);
            s->last_use = ++h->use_clock;
            h->busy_until = out->complete_ns;
            return;
        }
    }
    /* Media access, once a destage operation under way ends (reads go before waiting destage). */
    hdd_stop_readahead(d, h, start);
    uint64_t go = start > h->act_free ? start : h->act_free;
    uint64_t done = hdd_media_with(d, h->head_cyl, go, rq->addr, rq->len, 0, d->ctrl_overhead_ns[aw], 0.0);
    int v = hdd_seg_victim(d, h);
    h->seg[v].start = rq->addr;
    h->seg[v].end = end;
    h->seg[v].last_use = ++h->use_clock;
    h->active = v;
    h->fill_t = done;
    h->fill_bpns = dbt_hdd_media_bpns(d, end);
    h->fill_limit = hdd_readahead_limit(d, rq->addr, rq->addr, end);
    h->head_cyl = dbt_hdd_cyl_of(d, end);
    h->head_pos = end;
    h->act_free = done;
    out->complete_ns = h->busy_until = hdd_host_done(d, done, rq->addr, rq->len);
}

static void hdd_write(struct dbt_drive *st, const struct dbt_request *rq, struct dbt_result *out) {
    const struct dbt_hdd_derived *d = &st->u.hdd.d;
    struct dbt_hdd_state *h = &st->u.hdd.s;
    uint64_t start = rq->arrival_ns > h->busy_until ? rq->arrival_ns : h->busy_until;
    uint64_t end = rq->addr + rq->len;
    int aw = h->after_write; /* as a read's, after the previous command's kind; the next follows a write */
    h->after_write = 1;
    out->flags = 0;
    if (d->wc_bytes <= 0) { /* write-through: the command ends when the data is on the media */
        hdd_stop_readahead(d, h, start);
        uint64_t go = start > h->act_free ? start : h->act_free;
        uint64_t done = hdd_write_through(d, h->head_cyl, go, rq->addr, rq->len, d->wthrough_overhead_ns[aw]);
        h->head_cyl = dbt_hdd_cyl_of(d, end);
        h->head_pos = end;
        h->act_free = done;
        out->start_ns = start;
        out->complete_ns = h->busy_until = done;
        return;
    }
    wb_idle(d, h, start);
    /* No room: the drive destages at once until there is. The operation under way frees its bytes
     * when it ends; then the next starts. */
    int new_slot;
    uint64_t grow;
    for (;;) {
        grow = wb_growth(h, rq->addr, end, &new_slot);
        int full = (double)(wb_dirty_at(h, start) + grow) > d->wc_bytes ||
                   (new_slot && h->wb_count == DBT_HDD_WB_EXTENTS);
        if (!full) break;
        if (h->inflight_done > start) start = h->inflight_done;
        else if (h->wb_count) wb_force(d, h, start);
        else break; /* larger than the whole buffer: it goes in alone */
    }
    out->start_ns = start;
    uint64_t acked = start + (uint64_t)(d->wack_overhead_ns[aw] + (double)rq->len / d->bytes_per_ns_iface);
    if (grow == 0) out->flags = DBT_RES_CACHE_HIT; /* a rewrite of data still in the buffer */
    wb_insert(h, rq->addr, end, acked);
    /* The buffer is one memory: the written data takes a segment from the read cache (the least
     * recently used), where a later read finds it. */
    int v = hdd_seg_victim(d, h);
    if (v == h->active) hdd_stop_readahead(d, h, start);
    h->seg[v].start = rq->addr;
    h->seg[v].end = end;
    h->seg[v].last_use = ++h->use_clock;
    out->complete_ns = h->busy_until = acked;
}

static void hdd_flush(struct dbt_drive *st, const struct dbt_request *rq, struct dbt_result *out) {
    const struct dbt_hdd_derived *d = &st->u.hdd.d;
    struct dbt_hdd_state *h = &st->u.hdd.s;
    uint64_t start = rq->arrival_ns > h->busy_until ? rq->arrival_ns : h->busy_until;
    /* DiskSim has no flush: it pays the after-read hit overhead, whatever came before, and leaves the
     * next command's overheads to the read or write before it */
    uint64_t done = start + (uint64_t)d->hit_overhead_ns[0];
    out->start_ns = start;
    out->flags = 0;
    if (!d->wc_protected) { /* the flush returns once every dirty byte is on the media */
        wb_idle(d, h, start);
        while (h->wb_count) wb_force(d, h, start);
        if (h->inflight_done > done) done = h->inflight_done;
    } /* else the data is safe in the cache already: destage goes on behind */
    out->complete_ns = h->busy_until = done;
}

static void hdd_submit(struct dbt_drive *st, const struct dbt_request *rq, struct dbt_result *out) {
    switch (rq->op) {
    case DBT_OP_READ: hdd_read(st, rq, out); break;
    case DBT_OP_WRITE: hdd_write(st, rq, out); break;
    default: hdd_flush(st, rq, out); break;
    }
}


/* One drive's time for rq begun at t, as hdd_read and hdd_write would take it, without changing the
 * drive: a hit in the buffer, a ride on the read-ahead, a write the write cache takes, or a media
 * access from where the head is (after a destage under way). */
static uint64_t hdd_estimate(const struct dbt_drive *st, const struct dbt_request *rq, uint64_t t) {
    const struct dbt_hdd_derived *d = &st->u.hdd.d;
    const struct dbt_hdd_state *h = &st->u.hdd.s;
    uint64_t s = t > h->busy_until ? t : h->busy_until, end = rq->addr + rq->len;
    double xfer_iface = (double)rq->len / d->bytes_per_ns_iface;
    int aw = h->after_write; /* rq would follow the command served last */
    double from = h->head_cyl;
    uint64_t go = s > h->act_free ? s : h->act_free;
    if (h->active >= 0) { /* a media access stops the read-ahead where it got to */
        uint64_t cur = hdd_fill_end(h, s);
        from = dbt_hdd_cyl_of(d, cur);
        if (h->fill_t > go) go = h->fill_t;
    }
    if (rq->op == DBT_OP_WRITE) {
        if (d->wc_bytes > 0 && (double)(wb_dirty_at(h, s) + rq->len) <= d->wc_bytes)
            return (uint64_t)(d->wack_overhead_ns[aw] + xfer_iface);
        double oh = d->wc_bytes > 0 ? d->ctrl_overhead_ns[aw] : d->wthrough_overhead_ns[aw];
        uint64_t done = d->wc_bytes > 0 ? hdd_media_with(d, from, go, rq->addr, rq->len, 1, oh, 0.0)
                                         : hdd_write_through(d, from, go, rq->addr, rq->len, oh);
        return done - s;
    }
    uint64_t hit = (uint64_t)(d->hit_overhead_ns[aw] + xfer_iface);
    if (wb_holds(h, rq->addr, end, s)) return hit;
    for (int i = 0; i < d->nseg; i++) {
        const struct dbt_hdd_seg *g = &h->seg[i];
        uint64_t g_end = (i == h->active) ? hdd_fill_end(h, s) : g->end;
        if (g->end > g->start && rq->addr >= hdd_seg_start(d, g, g_end) && end <= g_end) return hit;
    }
    uint64_t media = hdd_host_done(d, hdd_media_with(d, from, go, rq->addr, rq->len, 0, d->ctrl_overhead_ns[aw], 0.0),
                                   rq->addr, rq->len);
    if (h->active >= 0) { /* the read-ahead may get there first */
        const struct dbt_hdd_seg *g = &h->seg[h->active];
        if (rq->addr >= hdd_seg_start(d, g, hdd_fill_end(h, s)) && rq->addr < h->fill_limit && end > g->end) {
            uint64_t ready = h->fill_t + (uint64_t)((double)(end - g->end) / h->fill_bpns);
            if (ready < s + hit) ready = s + hit;
            if (ready < media) media = ready;
        }
    }
    return media > s ? media - s : 0;
}


/* ---- what the command queue and a state's check ask of a drive */

static int hdd_queue_depth(const struct dbt_drive *st) { return st->u.hdd.d.queue_depth; }

static uint64_t hdd_free_at(const struct dbt_drive *st) { return st->u.hdd.s.busy_until; }

static int hdd_check(const struct dbt_drive *dr, int m, char *err, size_t errlen) {
    const struct dbt_hdd_state *h = &dr->u.hdd.s;
    int nseg = dr->u.hdd.d.nseg;
    if (nseg < 1 || nseg > DBT_HDD_MAX_SEGMENTS) {
        snprintf(err, errlen, "its member %d has %d buffer segments, outside 1..%d", m, nseg, DBT_HDD_MAX_SEGMENTS);
        return -1;
    }
    if (h->active < -1 || h->active >= nseg) {
        snprintf(err, errlen, "its member %d's active segment %d is outside -1..%d", m, h->active, nseg - 1);
        return -1;
    }
    if (h->after_write != 0 && h->after_write != 1) { /* it indexes the overheads */
        snprintf(err, errlen, "its member %d's previous command kind %d is neither 0 (read) nor 1 (write)", m,
                 h->after_write);
        return -1;
    }
    if (h->wb_count > DBT_HDD_WB_EXTENTS) {
        snprintf(err, errlen, "its member %d's write-back buffer holds %u extents, more than its %u", m, h->wb_count,
                 DBT_HDD_WB_EXTENTS);
        return -1;
    }
    return 0;
}

const struct dbt_device_ops dbt_hdd_ops = {
    .name = "hdd",
    .version = DBT_OPS_VERSION,
    .kind = DBT_KIND_HDD,
    .caps = DBT_CAP_ADDRESSED | DBT_CAP_REORDERS,
    .params = hdd_params,
    .nparams = NELEM(hdd_params),
    .params_size = sizeof(struct dbt_hdd_params),
    .help = "spinning disk: seek curve, rotation, zoned media rate, read-ahead segments, a write-back buffer "
            "destaged sorted (C-LOOK) in idle time, a command queue reordered (NCQ/TCQ) at queue_depth > 1",
    .init = hdd_init,
    .submit = hdd_submit,
    .check = hdd_check,
    .queue_depth = hdd_queue_depth,
    .free_at = hdd_free_at,
    .estimate = hdd_estimate,
};
