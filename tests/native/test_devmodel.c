/* Device model unit tests: hand-computed cases. Prints "N passed, N failed". */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "devmodel.h"
#include "state.h"

#include "check.h"

static int near(double a, double b, double rel) { return fabs(a - b) <= rel * fabs(b) + 1.0; }

static void set(struct dbt_params *p, int kind, const char *k, double v) {
    char err[256];
    if (dbt_params_set(p, kind, k, v, err, sizeof err) != 0) printf("setup: %s\n", err);
}

static struct dbt_result submit(struct dbt_model_state *st, uint64_t t, int op, uint64_t addr, uint32_t len) {
    struct dbt_request rq = {t, addr, len, (uint8_t)op};
    struct dbt_result r;
    dbt_model_submit(st, &rq, &r);
    return r;
}

static void hdd_defaults(struct dbt_params *p) {
    dbt_params_defaults(p, DBT_KIND_HDD); /* 7200 rpm, 0.8/8.5/17 ms seeks, 125/65 MB/s, 0.3 ms overhead */
}

/* A sequential run streams at the media rate once the head is there. */
static void test_sequential_streams_at_media_rate(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    struct dbt_model_state st;
    dbt_model_init(&st, DBT_KIND_HDD, &p);
    const uint32_t len = 65536;
    uint64_t t = 0, first_done = 0, done = 0;
    for (int i = 0; i < 200; i++) {
        struct dbt_result r = submit(&st, t, DBT_OP_READ, (uint64_t)i * len, len);
        if (i == 0) first_done = r.complete_ns;
        done = r.complete_ns;
        t = done;
    }
    /* Near address 0 the radius is ~1: 125 MB/s, so 199 more requests of 64 KiB take 199*524288 ns. */
    double expect = 199.0 * len / (125e6 / 1e9);
    CHECK(near((double)(done - first_done), expect, 0.01), "streamed %llu ns, expected %.0f",
          (unsigned long long)(done - first_done), expect);
    CHECK(near(dbt_hdd_media_bpns(&st.drive[0].u.hdd.d, 0), 0.125, 1e-9), "outer rate %.6f B/ns", dbt_hdd_media_bpns(&st.drive[0].u.hdd.d, 0));
    uint64_t inner = (uint64_t)(p.capacity_gb * 1e9) - 1;
    CHECK(near(dbt_hdd_media_bpns(&st.drive[0].u.hdd.d, inner), 0.065, 1e-3), "inner rate %.6f B/ns",
          dbt_hdd_media_bpns(&st.drive[0].u.hdd.d, inner));
}

/* The fitted seek curve passes through the profile's three figures. */
static void test_seek_curve_points(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    struct dbt_model_state st;
    dbt_model_init(&st, DBT_KIND_HDD, &p);
    double D = p.k.hdd.cylinders;
    CHECK(near(dbt_hdd_seek_ns(&st.drive[0].u.hdd.d, 1, 0), 0.8e6, 1e-9), "track-to-track %.0f", dbt_hdd_seek_ns(&st.drive[0].u.hdd.d, 1, 0));
    CHECK(near(dbt_hdd_seek_ns(&st.drive[0].u.hdd.d, D / 3, 0), 8.5e6, 1e-9), "one-third %.0f", dbt_hdd_seek_ns(&st.drive[0].u.hdd.d, D / 3, 0));
    CHECK(near(dbt_hdd_seek_ns(&st.drive[0].u.hdd.d, D, 0), 17e6, 1e-9), "full stroke %.0f", dbt_hdd_seek_ns(&st.drive[0].u.hdd.d, D, 0));
    CHECK(near(dbt_hdd_seek_ns(&st.drive[0].u.hdd.d, D, 1), 18e6, 1e-9), "full stroke write +1 ms settle %.0f",
          dbt_hdd_seek_ns(&st.drive[0].u.hdd.d, D, 1));
    CHECK(dbt_hdd_seek_ns(&st.drive[0].u.hdd.d, 0.5, 0) == 0, "same cylinder costs no seek");
    /* Monotonic */
    double prev = 0;
    int mono = 1;
    for (double d = 1; d <= D; d *= 1.3) {
        double s = dbt_hdd_seek_ns(&st.drive[0].u.hdd.d, d, 0);
        if (s < prev) mono = 0;
        prev = s;
    }
    CHECK(mono, "seek time grows with distance");
}

/* A scale model's span: a step within a read segment's reach (r cylinders) is as laid out; a jump of
 * d cylinders beyond it crosses r + (d - r) * F, at most the full stroke. */
static void test_span_scale(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    struct dbt_model_state plain, st;
    dbt_model_init(&plain, DBT_KIND_HDD, &p);
    p.k.hdd.span_scale = 100;
    dbt_model_init(&st, DBT_KIND_HDD, &p);
    const struct dbt_hdd_derived *d = &st.drive[0].u.hdd.d, *d0 = &plain.drive[0].u.hdd.d;
    double reach = p.k.hdd.cache_mib * 1048576.0 / p.k.hdd.cache_segments / (p.capacity_gb * 1e9 / p.k.hdd.cylinders);
    CHECK(reach > 0 && reach < 1, "a segment's reach is %.3f cylinders", reach);
    CHECK(dbt_hdd_seek_ns(d, reach, 0) == 0, "a stream's step within reach: no seek");
    CHECK(near(dbt_hdd_seek_ns(d, 0.5, 0), dbt_hdd_seek_ns(d0, reach + (0.5 - reach) * 100, 0), 1e-12),
          "half a cylinder jumps as %.1f", reach + (0.5 - reach) * 100);
    CHECK(near(dbt_hdd_seek_ns(d, 5, 0), dbt_hdd_seek_ns(d0, reach + (5 - reach) * 100, 0), 1e-12), "5 cylinders");
    CHECK(near(dbt_hdd_seek_ns(d, p.k.hdd.cylinders / 2, 1), dbt_hdd_seek_ns(d0, p.k.hdd.cylinders, 1), 1e-12),
          "no farther than the full stroke");
}

/* A full-stroke access costs overhead + full seek + transfer, plus less than one rotation. */
static void test_full_stroke_access(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    struct dbt_model_state st;
    dbt_model_init(&st, DBT_KIND_HDD, &p);
    const uint32_t len = 8192;
    struct dbt_result a = submit(&st, 0, DBT_OP_READ, 0, len);
    uint64_t inner = (uint64_t)(p.capacity_gb * 1e9) - len;
    uint64_t t = a.complete_ns + 1000000;
    struct dbt_result b = submit(&st, t, DBT_OP_READ, inner, len);
    double fixed = 0.3e6 + dbt_hdd_seek_ns(&st.drive[0].u.hdd.d, dbt_hdd_cyl_of(&st.drive[0].u.hdd.d, inner), 0) + len / dbt_hdd_media_bpns(&st.drive[0].u.hdd.d, inner);
    double lat = (double)(b.complete_ns - t);
    double rot = 60e9 / 7200;
    CHECK(lat >= fixed - 2 && lat < fixed + rot, "full stroke latency %.0f not in [%.0f, %.0f)", lat, fixed, fixed + rot);
    CHECK(near(dbt_hdd_cyl_of(&st.drive[0].u.hdd.d, inner), p.k.hdd.cylinders, 1e-3), "innermost address at the last cylinder");
    CHECK(fixed > 17e6, "the full stroke is in it");
}

/* Re-reading what the drive just read is a buffer hit: overhead plus interface transfer. */
static void test_buffer_hit(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    struct dbt_model_state st;
    dbt_model_init(&st, DBT_KIND_HDD, &p);
    struct dbt_result a = submit(&st, 0, DBT_OP_READ, 1 << 20, 8192);
    struct dbt_result b = submit(&st, a.complete_ns + 10, DBT_OP_READ, 1 << 20, 8192);
    double expect = 50e3 + 8192 / 0.3; /* 50 us + 8 KiB at 300 MB/s */
    CHECK(b.flags & DBT_RES_CACHE_HIT, "second read is a hit");
    CHECK(near((double)(b.complete_ns - (a.complete_ns + 10)), expect, 1e-6), "hit took %llu ns, expected %.0f",
          (unsigned long long)(b.complete_ns - a.complete_ns - 10), expect);
}

/* A short forward skip lands inside the read-ahead in progress: served when the read-ahead gets
 * there, not after a full turn; a skip far beyond the window is a media access. */
static void test_forward_skip_rides_the_readahead(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    struct dbt_model_state st;
    dbt_model_init(&st, DBT_KIND_HDD, &p);
    struct dbt_result a = submit(&st, 0, DBT_OP_READ, 1 << 20, 8192);
    uint64_t t = a.complete_ns + 100000; /* 0.1 ms later: the read-ahead is ~12 KB further */
    struct dbt_result b = submit(&st, t, DBT_OP_READ, (1 << 20) + 4 * 8192, 8192);
    double expect = 4 * 8192 / 0.125 - 100000; /* the read-ahead reaches the end of page 4 */
    CHECK(b.flags & DBT_RES_STREAM, "the skip rides the read-ahead");
    CHECK(near((double)(b.complete_ns - t), expect, 0.01),
          "skip took %llu ns, expected about %.0f", (unsigned long long)(b.complete_ns - t), expect);
    struct dbt_result c = submit(&st, b.complete_ns, DBT_OP_READ, (uint64_t)(1 << 20) + (3u << 20), 8192);
    CHECK(!(c.flags & (DBT_RES_STREAM | DBT_RES_CACHE_HIT)), "3 MiB ahead is beyond the window: a media access");
}

/* Where the track holding addr ends, as the model lays tracks out (a revolution of the media rate). */
static uint64_t track_end_at(const struct dbt_hdd_derived *d, uint64_t addr) {
    double track = dbt_hdd_media_bpns(d, addr) * d->rot_ns;
    return (uint64_t)((floor((double)addr / track) + 1.0) * track);
}

static int hit_after(struct dbt_model_state *st, uint64_t t, uint64_t addr) {
    return (submit(st, t, DBT_OP_READ, addr, 8192).flags & DBT_RES_CACHE_HIT) != 0;
}

/* readahead_track 1: the read-ahead stops where the track ends (no head switch); 0: it goes its
 * amount on (2 MiB here, a segment). Read 8 KiB at 512 KiB, wait 20 ms (the read-ahead is done),
 * then read the 8 KiB before the track's end (about 1.04 MB: 125 MB/s for 8.33 ms) and the 8 KiB
 * from 4 KiB past it. Each case on a fresh drive. */
static void test_readahead_stops_at_the_track_end(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    const uint64_t a = 512 << 10;
    for (int scheme = 0; scheme <= 1; scheme++) {
        set(&p, DBT_KIND_HDD, "readahead_track", scheme ? 1 : 0);
        struct dbt_model_state st;
        dbt_model_init(&st, DBT_KIND_HDD, &p);
        uint64_t end = track_end_at(&st.drive[0].u.hdd.d, a);
        CHECK(end > 1000000 && end < 1050000, "the first track ends at %llu", (unsigned long long)end);
        uint64_t t = submit(&st, 0, DBT_OP_READ, a, 8192).complete_ns + 20000000;
        CHECK(hit_after(&st, t, end - 16384), "scheme %d: the track's last pages were read ahead", scheme);
        dbt_model_init(&st, DBT_KIND_HDD, &p);
        t = submit(&st, 0, DBT_OP_READ, a, 8192).complete_ns + 20000000;
        int beyond = hit_after(&st, t, end + 4096);
        CHECK(beyond == !scheme, "scheme %d: past the track's end %s", scheme, beyond ? "read ahead" : "not read ahead");
    }
}

/* The defaults with 16 segments of 64 KiB, reading 32 KiB ahead. */
static void small_segments(struct dbt_params *p) {
    hdd_defaults(p);
    set(p, DBT_KIND_HDD, "cache_mib", 1);
    set(p, DBT_KIND_HDD, "readahead_kib", 32);
}

/* readahead_track 2 (DEC's scheme): the read-ahead runs to the end of the track whatever
 * readahead_kib says, and a 64 KiB segment keeps the last 64 KiB of it: 20 ms after a read at
 * 256 KiB, the pages right after it are gone and the track's last ones are there. With scheme 0 and
 * readahead_kib 32, the other way round. */
static void test_readahead_to_the_track_end_keeps_its_last_part(void) {
    struct dbt_params p;
    small_segments(&p);
    const uint64_t a = 256 << 10;
    for (int scheme = 0; scheme <= 2; scheme += 2) {
        set(&p, DBT_KIND_HDD, "readahead_track", scheme ? 2 : 0);
        struct dbt_model_state st;
        dbt_model_init(&st, DBT_KIND_HDD, &p);
        uint64_t end = track_end_at(&st.drive[0].u.hdd.d, a + 8192);
        uint64_t t = submit(&st, 0, DBT_OP_READ, a, 8192).complete_ns + 20000000;
        int next = hit_after(&st, t, a + 8192);
        CHECK(next == !scheme, "scheme %d: the next pages %s", scheme, next ? "hit" : "miss");
        dbt_model_init(&st, DBT_KIND_HDD, &p);
        t = submit(&st, 0, DBT_OP_READ, a, 8192).complete_ns + 20000000;
        int last = hit_after(&st, t, end - 16384);
        CHECK(last == !!scheme, "scheme %d: the track's last pages %s", scheme, last ? "hit" : "miss");
    }
}

/* readahead_on_hit 1: a read served from the segment carries the read-ahead on from its own end. Read
 * 8 KiB at 256 KiB: the read-ahead stops 32 KiB past it. 20 ms later read the next 8 KiB (a hit): the
 * read-ahead starts again when its stopping point next comes under the head, a whole number of turns
 * after it stopped, and a read of the 8 KiB past that point rides it, done 8 KiB of media time after
 * the restart. With 0 that read is a media access. */
static void test_readahead_carried_on_by_a_hit(void) {
    struct dbt_params p;
    small_segments(&p);
    const uint64_t a = 256 << 10;
    for (int on = 0; on <= 1; on++) {
        set(&p, DBT_KIND_HDD, "readahead_on_hit", on ? 1 : 0);
        struct dbt_model_state st;
        dbt_model_init(&st, DBT_KIND_HDD, &p);
        const struct dbt_hdd_derived *d = &st.drive[0].u.hdd.d;
        struct dbt_result r1 = submit(&st, 0, DBT_OP_READ, a, 8192);
        uint64_t t2 = r1.complete_ns + 20000000;
        struct dbt_result r2 = submit(&st, t2, DBT_OP_READ, a + 8192, 8192);
        CHECK(r2.flags & DBT_RES_CACHE_HIT, "on_hit %d: the next 8 KiB were read ahead", on);
        struct dbt_result r3 = submit(&st, r2.complete_ns, DBT_OP_READ, a + 40960, 8192);
        if (!on) {
            CHECK(!(r3.flags & (DBT_RES_CACHE_HIT | DBT_RES_STREAM)), "on_hit 0: past the read-ahead, a media access");
            continue;
        }
        double bpns = dbt_hdd_media_bpns(d, a + 8192); /* the read-ahead's rate, from the first read's end */
        double reached = (double)r1.complete_ns + 32768 / bpns;
        double restart = reached + ceil(((double)t2 - reached) / d->rot_ns) * d->rot_ns;
        double expect = restart + 8192 / bpns;
        CHECK(r3.flags & DBT_RES_STREAM, "on_hit 1: the read rides the restarted read-ahead");
        CHECK(near((double)r3.complete_ns, expect, 1e-7), "on_hit 1: done at %llu ns, expected %.0f",
              (unsigned long long)r3.complete_ns, expect);
        CHECK(expect - (double)t2 < d->rot_ns + 8192 / bpns + 1, "the restart waits less than a turn");
    }
    /* Asked for 20 ms after the hit, those 8 KiB are in the buffer with on_hit 1 (50 us + 8 KiB at
     * 300 MB/s), and a media access with 0 (the 0.3 ms command overhead at least). */
    for (int on = 0; on <= 1; on++) {
        set(&p, DBT_KIND_HDD, "readahead_on_hit", on ? 1 : 0);
        struct dbt_model_state st;
        dbt_model_init(&st, DBT_KIND_HDD, &p);
        struct dbt_result r1 = submit(&st, 0, DBT_OP_READ, a, 8192);
        struct dbt_result r2 = submit(&st, r1.complete_ns + 20000000, DBT_OP_READ, a + 8192, 8192);
        uint64_t t3 = r2.complete_ns + 20000000;
        struct dbt_result r3 = submit(&st, t3, DBT_OP_READ, a + 40960, 8192);
        CHECK(!!(r3.flags & DBT_RES_CACHE_HIT) == on, "on_hit %d: 20 ms later the read %s", on,
              r3.flags & DBT_RES_CACHE_HIT ? "hits" : "misses");
        double took = (double)(r3.complete_ns - t3);
        if (on) CHECK(near(took, 50e3 + 8192 / 0.3, 1e-6), "on_hit 1: the hit took %.0f ns", took);
        else CHECK(took >= 0.3e6, "on_hit 0: the media access took %.0f ns", took);
    }
}

/* RAID 0: pieces go to the members in turn; members work in parallel, one member's pieces are
 * one request, and the array is only as fast as its slowest member. */
static void test_raid0_stripes_over_members(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    set(&p, DBT_KIND_HDD, "members", 4);
    set(&p, DBT_KIND_HDD, "stripe_kib", 64);
    struct dbt_model_state arr, one;
    dbt_model_init(&arr, DBT_KIND_HDD, &p);
    set(&p, DBT_KIND_HDD, "members", 1);
    dbt_model_init(&one, DBT_KIND_HDD, &p);
    CHECK(arr.members == 4 && arr.stripe_bytes == 65536, "4 members, 64 KiB stripe");
    /* 4 x 64 KiB from address 0: each member reads 64 KiB at its own address 0, in parallel. */
    struct dbt_result a = submit(&arr, 0, DBT_OP_READ, 0, 4 * 65536);
    struct dbt_result b = submit(&one, 0, DBT_OP_READ, 0, 65536);
    CHECK(a.complete_ns == b.complete_ns, "a full stripe row takes one member's 64 KiB read: %llu vs %llu",
          (unsigned long long)a.complete_ns, (unsigned long long)b.complete_ns);
    /* 8 x 64 KiB: each member gets two consecutive rows as one contiguous 128 KiB request. */
    struct dbt_model_state arr2, one2;
    set(&p, DBT_KIND_HDD, "members", 4);
    dbt_model_init(&arr2, DBT_KIND_HDD, &p);
    set(&p, DBT_KIND_HDD, "members", 1);
    dbt_model_init(&one2, DBT_KIND_HDD, &p);
    struct dbt_result c = submit(&arr2, 0, DBT_OP_READ, 0, 8 * 65536);
    struct dbt_result e = submit(&one2, 0, DBT_OP_READ, 0, 2 * 65536);
    CHECK(c.complete_ns == e.complete_ns, "two rows: one 128 KiB request per member");
    /* Two 8 KiB reads in different stripes land on different members and overlap in time. */
    uint64_t t = 1000000000ull;
    struct dbt_result r1 = submit(&arr, t, DBT_OP_READ, 700ull << 20, 8192);
    struct dbt_result r2 = submit(&arr, t, DBT_OP_READ, (700ull << 20) + 65536, 8192);
    CHECK(r2.start_ns == t && r1.start_ns == t, "different members: no queueing behind each other");
    struct dbt_result r3 = submit(&arr, t, DBT_OP_READ, (700ull << 20) + 4 * 65536 + 16384, 8192);
    CHECK(r3.start_ns >= r1.complete_ns, "same member as the first: it queues behind it");
    struct dbt_result f = submit(&arr, r3.complete_ns, DBT_OP_FLUSH, 0, 0);
    CHECK(f.complete_ns >= r3.complete_ns, "a flush waits for every member");
}

/* A protected (battery-backed) write cache: the flush does not wait for the destage. */
static void test_protected_write_cache_flush(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    set(&p, DBT_KIND_HDD, "write_cache_protected", 1);
    struct dbt_model_state st;
    dbt_model_init(&st, DBT_KIND_HDD, &p);
    struct dbt_result w = submit(&st, 0, DBT_OP_WRITE, 500ull << 20, 8192);
    struct dbt_result f = submit(&st, w.complete_ns, DBT_OP_FLUSH, 0, 0);
    CHECK(f.complete_ns - w.complete_ns <= 60000, "flush after a write took %llu ns, not a destage",
          (unsigned long long)(f.complete_ns - w.complete_ns));
    /* the destage still happens: a full cache makes writes wait */
    uint64_t t = f.complete_ns, last = 0;
    for (int i = 0; i < 4000; i++) {
        struct dbt_result r = submit(&st, t, DBT_OP_WRITE, (uint64_t)((i * 7919) % 100000) << 20, 8192);
        last = r.complete_ns - t;
        t = r.complete_ns;
    }
    CHECK(last > 1000000, "with the cache full a random write waits for a destage (%llu ns)", (unsigned long long)last);
}

/* A drive that ignores flushes (flush_honoured = 0) answers one at once, however much its cache
 * holds; one that obeys waits for the destage (HDD) or pays its flush cost (flash). */
static void test_ignored_flush(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    struct dbt_model_state st;
    dbt_model_init(&st, DBT_KIND_HDD, &p);
    struct dbt_result w = submit(&st, 0, DBT_OP_WRITE, 500ull << 20, 8192);
    struct dbt_result f = submit(&st, w.complete_ns, DBT_OP_FLUSH, 0, 0);
    CHECK(f.complete_ns - w.complete_ns > 1000000, "an obeyed flush waits for the destage (%llu ns)",
          (unsigned long long)(f.complete_ns - w.complete_ns));
    set(&p, DBT_KIND_HDD, "flush_honoured", 0);
    dbt_model_init(&st, DBT_KIND_HDD, &p);
    w = submit(&st, 0, DBT_OP_WRITE, 500ull << 20, 8192);
    f = submit(&st, w.complete_ns, DBT_OP_FLUSH, 0, 0);
    CHECK(f.start_ns == w.complete_ns && f.complete_ns == w.complete_ns, "an ignored flush is answered at once (%llu ns)",
          (unsigned long long)(f.complete_ns - w.complete_ns));
    dbt_params_defaults(&p, DBT_KIND_SSD);
    dbt_model_init(&st, DBT_KIND_SSD, &p);
    f = submit(&st, 0, DBT_OP_FLUSH, 0, 0);
    CHECK(near((double)f.complete_ns, 1.5e6, 1e-6), "flash pays its flush_ms (%llu ns)", (unsigned long long)f.complete_ns);
    set(&p, DBT_KIND_SSD, "flush_honoured", 0);
    dbt_model_init(&st, DBT_KIND_SSD, &p);
    f = submit(&st, 0, DBT_OP_FLUSH, 0, 0);
    CHECK(f.complete_ns == 0, "flash ignoring the flush answers at once (%llu ns)", (unsigned long long)f.complete_ns);
}

/* Write-back: writes are acknowledged at interface speed; a flush waits for the destage. */
static void test_write_back_and_flush(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    struct dbt_model_state st;
    dbt_model_init(&st, DBT_KIND_HDD, &p);
    struct dbt_result w = submit(&st, 0, DBT_OP_WRITE, 100 << 20, 8192);
    double ack = 50e3 + 8192 / 0.3;
    CHECK(near((double)w.complete_ns, ack, 1e-6), "write acked at %llu, expected %.0f", (unsigned long long)w.complete_ns, ack);
    struct dbt_result f = submit(&st, w.complete_ns, DBT_OP_FLUSH, 0, 0);
    double media_min = ack + 0.3e6 + 8192 / 0.125 * 0.9;
    CHECK((double)f.complete_ns > media_min, "flush waited for the destage (%llu)", (unsigned long long)f.complete_ns);
    /* Without the write cache the write itself pays the positioning. */
    set(&p, DBT_KIND_HDD, "write_cache", 0);
    dbt_model_init(&st, DBT_KIND_HDD, &p);
    struct dbt_result wt = submit(&st, 0, DBT_OP_WRITE, 100 << 20, 8192);
    CHECK((double)wt.complete_ns > 0.3e6 + 8192 / 0.125 * 0.9, "write-through pays the media (%llu)",
          (unsigned long long)wt.complete_ns);
    struct dbt_result ft = submit(&st, wt.complete_ns, DBT_OP_FLUSH, 0, 0);
    CHECK(near((double)(ft.complete_ns - wt.complete_ns), 50e3, 1e-6), "flush of nothing costs the overhead");
}

/* ---- The write-back buffer, hand-scheduled: each case states the order and start time of every
 * media operation, and the expected completion is chained through dbt_hdd_media (the one media
 * access, checked above through the seek curve and the media rate). No read-ahead (cache_mib 0) so
 * that the actuator is idle exactly when no command holds it. */
#define MB (1ull << 20)

static void wb_drive(struct dbt_model_state *st) {
    struct dbt_params p;
    hdd_defaults(&p);
    set(&p, DBT_KIND_HDD, "cache_mib", 0);
    dbt_model_init(st, DBT_KIND_HDD, &p);
}

static uint64_t ack_after(uint64_t start, uint32_t len) { return start + (uint64_t)(50e3 + len / 0.3); }

/* Sorted destage: writes at 500, 300, 100, 200 MB. The first is destaged alone in the idle moment
 * before the third arrives; the flush then destages the rest C-LOOK from the head at 500 MB: it
 * wraps to 100, then 200, then 300 (arrival order would be 300, 100, 200). */
static void test_destage_is_sorted(void) {
    struct dbt_model_state st;
    wb_drive(&st);
    const struct dbt_hdd_derived *d = &st.drive[0].u.hdd.d;
    const struct dbt_hdd_state *h = &st.drive[0].u.hdd.s;
    const uint64_t addr[4] = {500 * MB, 300 * MB, 100 * MB, 200 * MB};
    uint64_t t = 0, acks[4];
    for (int i = 0; i < 4; i++) {
        struct dbt_result r = submit(&st, t, DBT_OP_WRITE, addr[i], 8192);
        CHECK(r.complete_ns == ack_after(t, 8192), "write %d acked from the buffer at %llu", i,
              (unsigned long long)r.complete_ns);
        t = acks[i] = r.complete_ns;
    }
    /* W0 became ready at acks[0]; W2 arriving at acks[1] found the actuator idle since then. */
    uint64_t d0 = dbt_hdd_media(d, 0.0, acks[0], addr[0], 8192, 1);
    CHECK(h->destage_ops == 1 && h->act_free == d0, "the first write destaged alone in idle time (%llu ops)",
          (unsigned long long)h->destage_ops);
    struct dbt_result f = submit(&st, t, DBT_OP_FLUSH, 0, 0);
    uint64_t e = d0;
    double cyl = dbt_hdd_cyl_of(d, addr[0] + 8192);
    const uint64_t order[3] = {100 * MB, 200 * MB, 300 * MB};
    for (int i = 0; i < 3; i++) {
        e = dbt_hdd_media(d, cyl, e, order[i], 8192, 1);
        cyl = dbt_hdd_cyl_of(d, order[i] + 8192);
    }
    CHECK(f.complete_ns == e, "flush done at %llu, the C-LOOK schedule at %llu", (unsigned long long)f.complete_ns,
          (unsigned long long)e);
    CHECK(h->head_pos == 300 * MB + 8192 && h->wb_count == 0, "the destage ended at 300 MB with nothing left");
}

/* Merging and absorbed rewrites: back-to-back writes at X, X+8K, X+16K (contiguous), then a rewrite
 * of X+4K..X+12K, are one 24 KiB extent, destaged by the flush in one media operation. */
static void test_destage_merges_and_absorbs(void) {
    struct dbt_model_state st;
    wb_drive(&st);
    const struct dbt_hdd_derived *d = &st.drive[0].u.hdd.d;
    const struct dbt_hdd_state *h = &st.drive[0].u.hdd.s;
    const uint64_t X = 700 * MB;
    uint64_t t = 0;
    const uint64_t at[4] = {X, X + 8192, X + 16384, X + 4096};
    for (int i = 0; i < 4; i++) {
        struct dbt_result r = submit(&st, t, DBT_OP_WRITE, at[i], 8192);
        if (i == 3) CHECK(r.flags & DBT_RES_CACHE_HIT, "the rewrite is absorbed (flags %u)", r.flags);
        t = r.complete_ns;
    }
    CHECK(h->wb_count == 1 && h->wb_dirty == 24576 && h->destage_ops == 0, "one extent of 24576 bytes (%u, %llu)",
          h->wb_count, (unsigned long long)h->wb_dirty);
    struct dbt_result f = submit(&st, t, DBT_OP_FLUSH, 0, 0);
    uint64_t e = dbt_hdd_media(d, 0.0, t, X, 24576, 1);
    CHECK(f.complete_ns == e && h->destage_ops == 1, "one destage of 24 KiB ends at %llu, flush at %llu",
          (unsigned long long)e, (unsigned long long)f.complete_ns);
    /* A write adjacent to the extent being destaged is new work, not merged into the operation. */
}

/* Read priority: with two extents waiting and one being destaged, a read waits only for the
 * operation in progress; the waiting destage comes after it. */
static void test_read_goes_before_waiting_destage(void) {
    struct dbt_model_state st;
    wb_drive(&st);
    const struct dbt_hdd_derived *d = &st.drive[0].u.hdd.d;
    const struct dbt_hdd_state *h = &st.drive[0].u.hdd.s;
    struct dbt_result w0 = submit(&st, 0, DBT_OP_WRITE, 600 * MB, 8192);
    struct dbt_result w1 = submit(&st, w0.complete_ns, DBT_OP_WRITE, 200 * MB, 8192); /* W0 destages from w0's ack */
    struct dbt_result w2 = submit(&st, w1.complete_ns, DBT_OP_WRITE, 400 * MB, 8192);
    uint64_t d0 = dbt_hdd_media(d, 0.0, w0.complete_ns, 600 * MB, 8192, 1);
    CHECK(h->act_free == d0 && h->wb_count == 2, "W0 being destaged until %llu, two waiting", (unsigned long long)d0);
    struct dbt_result r = submit(&st, w2.complete_ns, DBT_OP_READ, 900 * MB, 8192);
    uint64_t re = dbt_hdd_media(d, dbt_hdd_cyl_of(d, 600 * MB + 8192), d0, 900 * MB, 8192, 0);
    CHECK(r.complete_ns == re, "the read ran from %llu to %llu, expected to end at %llu", (unsigned long long)d0,
          (unsigned long long)r.complete_ns, (unsigned long long)re);
    CHECK(h->wb_count == 2, "the waiting destage waited for the read");
    /* Then C-LOOK from 900 MB wraps to 200, then 400. */
    struct dbt_result f = submit(&st, r.complete_ns, DBT_OP_FLUSH, 0, 0);
    uint64_t e = dbt_hdd_media(d, dbt_hdd_cyl_of(d, 900 * MB + 8192), re, 200 * MB, 8192, 1);
    e = dbt_hdd_media(d, dbt_hdd_cyl_of(d, 200 * MB + 8192), e, 400 * MB, 8192, 1);
    CHECK(f.complete_ns == e, "flush at %llu, expected %llu", (unsigned long long)f.complete_ns, (unsigned long long)e);
}

/* A full buffer: the write waits for destage operations at once until its data fits. */
static void test_full_buffer_destages_at_once(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    set(&p, DBT_KIND_HDD, "cache_mib", 0);
    set(&p, DBT_KIND_HDD, "write_cache_mib", 0.015625); /* 16 KiB: two 8 KiB extents */
    struct dbt_model_state st;
    dbt_model_init(&st, DBT_KIND_HDD, &p);
    const struct dbt_hdd_derived *d = &st.drive[0].u.hdd.d;
    struct dbt_result w0 = submit(&st, 0, DBT_OP_WRITE, 100 * MB, 8192);
    struct dbt_result w1 = submit(&st, w0.complete_ns, DBT_OP_WRITE, 300 * MB, 8192); /* W0 destaging */
    uint64_t d0 = dbt_hdd_media(d, 0.0, w0.complete_ns, 100 * MB, 8192, 1);
    /* W2 needs 8 KiB more while W0 (in flight until d0) and W1 fill the 16: it starts at d0. */
    struct dbt_result w2 = submit(&st, w1.complete_ns, DBT_OP_WRITE, 500 * MB, 8192);
    CHECK(w2.start_ns == d0 && w2.complete_ns == ack_after(d0, 8192), "W2 accepted at %llu when W0 left (%llu)",
          (unsigned long long)w2.start_ns, (unsigned long long)d0);
}


/* Three interleaved append streams (heap, index, WAL on one disk), each write issued when the last
 * is acknowledged: sorted, merged destage sweeps the buffer with a positioning per stream, so the
 * rate is at least the buffer over (its transfer at the inner rate + 3 worst positionings: full
 * seek, a rotation, the overhead). Destaged in arrival order it was 1.0 MB/s. */
static void test_interleaved_streams_destage_in_sweeps(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    struct dbt_model_state st;
    dbt_model_init(&st, DBT_KIND_HDD, &p);
    const uint64_t base[3] = {100 * MB, 400 * MB, 800 * MB};
    const int n = 3000;
    uint64_t t = 0;
    for (int i = 0; i < n; i++) t = submit(&st, t, DBT_OP_WRITE, base[i % 3] + (uint64_t)(i / 3) * 8192, 8192).complete_ns;
    uint64_t done = submit(&st, t, DBT_OP_FLUSH, 0, 0).complete_ns;
    double rate = (double)n * 8192 / (double)done * 1e3; /* MB/s */
    double cache = p.k.hdd.write_cache_mib * 1048576.0;
    double sweep_ns = cache / (p.k.hdd.inner_mb_s * 1e-3) + 3 * (p.k.hdd.seek_full_ms * 1e6 + 60e9 / p.k.hdd.rpm + p.k.hdd.controller_overhead_ms * 1e6);
    double bound = cache / sweep_ns * 1e3;
    CHECK(rate >= bound, "three streams at %.1f MB/s, the sweep bound is %.1f MB/s", rate, bound);
}

/* A bus slower than the platters: a read's data reaches the host once the drive's read water mark of
 * it is in the buffer plus its transfer over the bus; a write command pays its own overhead, and the
 * head writes once the whole of its data is in the buffer. */
static void test_slow_bus_and_write_overhead(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    set(&p, DBT_KIND_HDD, "interface_mb_s", 3);
    set(&p, DBT_KIND_HDD, "read_watermark", 0.75);
    set(&p, DBT_KIND_HDD, "write_cache", 0);
    set(&p, DBT_KIND_HDD, "write_overhead_us", 800);
    struct dbt_model_state st;
    dbt_model_init(&st, DBT_KIND_HDD, &p);
    const struct dbt_hdd_derived *d = &st.drive[0].u.hdd.d;
    const uint64_t a = 300 * MB;
    struct dbt_result r = submit(&st, 0, DBT_OP_READ, a, 8192);
    uint64_t media_done = dbt_hdd_media(d, 0.0, 0, a, 8192, 0);
    double media = 8192 / dbt_hdd_media_bpns(d, a);
    double expect = (double)media_done - media + 0.75 * media + 8192 / 0.003;
    CHECK(near((double)r.complete_ns, expect, 1e-9), "read done at %llu, expected %.0f", (unsigned long long)r.complete_ns,
          expect);
    /* A write-through write: 0.8 ms of command overhead in place of the read's 0.3 ms, then the head
     * waits for the seek or for the whole write's data to cross the bus, whichever is longer (here the
     * bus: 2.73 ms), and for the rotation; done when the data is on the media. */
    struct dbt_model_state st2;
    dbt_model_init(&st2, DBT_KIND_HDD, &p);
    struct dbt_result w = submit(&st2, 0, DBT_OP_WRITE, a, 8192);
    double seek = dbt_hdd_seek_ns(d, dbt_hdd_cyl_of(d, a), 1), bus = 8192 / 0.003;
    CHECK(bus > seek, "the case is the bus's: %.0f ns against a seek of %.0f ns", bus, seek);
    /* from the target cylinder (no seek), 0.5 ms + the bus later: the same start with 0.3 ms overhead */
    double wexpect = (double)dbt_hdd_media(d, dbt_hdd_cyl_of(d, a), (uint64_t)(500000 + bus), a, 8192, 1);
    CHECK(near((double)w.complete_ns, wexpect, 1e-9), "write done at %llu, expected %.0f", (unsigned long long)w.complete_ns,
          wexpect);
}

/* The command overheads follow the previous command's kind, as DiskSim's "after read" and "after
 * write" figures: a read after a write pays the after-write overhead, a read after a read the
 * after-read one (a hit, exactly; a media access, as a drive whose after-read figure is that one);
 * a write likewise. Before any command, the drive counts as after a read. */
static void after_write_overheads(struct dbt_params *p) {
    hdd_defaults(p); /* controller_overhead_ms 0.3, cache_hit_overhead_us 50 */
    set(p, DBT_KIND_HDD, "controller_overhead_after_write_ms", 0.9);
    set(p, DBT_KIND_HDD, "cache_hit_overhead_after_write_us", 400);
    set(p, DBT_KIND_HDD, "write_overhead_us", 200);
    set(p, DBT_KIND_HDD, "write_overhead_after_write_us", 700);
}

static void test_overheads_follow_the_previous_command(void) {
    struct dbt_params p;
    after_write_overheads(&p);
    struct dbt_model_state st;
    dbt_model_init(&st, DBT_KIND_HDD, &p);
    const double xfer = 8192 / 0.3; /* 8 KiB at 300 MB/s */
    const uint64_t a = 100 * MB;
    struct dbt_result r0 = submit(&st, 0, DBT_OP_READ, a, 8192);
    struct dbt_result r1 = submit(&st, r0.complete_ns + 10, DBT_OP_READ, a, 8192);
    struct dbt_result w0 = submit(&st, r1.complete_ns + 10, DBT_OP_WRITE, 500 * MB, 8192);
    struct dbt_result w1 = submit(&st, w0.complete_ns + 10, DBT_OP_WRITE, 501 * MB, 8192);
    struct dbt_result r2 = submit(&st, w1.complete_ns + 10, DBT_OP_READ, a, 8192);
    struct dbt_result r3 = submit(&st, r2.complete_ns + 10, DBT_OP_READ, a, 8192);
    struct { const char *what; struct dbt_result r; double overhead; } cases[] = {
        {"a read hit after a read", r1, 50e3},   {"a write after a read", w0, 200e3},
        {"a write after a write", w1, 700e3},    {"a read hit after a write", r2, 400e3},
        {"a read hit after a read again", r3, 50e3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double took = (double)(cases[i].r.complete_ns - cases[i].r.start_ns);
        CHECK(near(took, cases[i].overhead + xfer, 1e-6), "%s took %.0f ns, expected %.0f", cases[i].what, took,
              cases[i].overhead + xfer);
    }
    CHECK((r1.flags & DBT_RES_CACHE_HIT) && (r2.flags & DBT_RES_CACHE_HIT), "the re-reads are hits");
    CHECK(st.drive[0].u.hdd.s.after_write == 0, "the drive remembers a read last");

    /* A read that goes to the media right after a write: 0.9 ms, as on a drive whose after-read
     * figure is 0.9 ms; on one with 0.3 ms throughout it ends elsewhere (at an address where the
     * rotation does not absorb the difference). */
    struct dbt_model_state m[3];
    uint64_t at = 0;
    for (int k = 0; k < 3; k++) {
        struct dbt_params q;
        if (k == 0) after_write_overheads(&q);
        else {
            hdd_defaults(&q);
            set(&q, DBT_KIND_HDD, "write_overhead_us", 200);
            set(&q, DBT_KIND_HDD, "controller_overhead_ms", k == 1 ? 0.9 : 0.3);
        }
        dbt_model_init(&m[k], DBT_KIND_HDD, &q);
        struct dbt_result w = submit(&m[k], 0, DBT_OP_WRITE, 500 * MB, 8192);
        CHECK(near((double)w.complete_ns, 200e3 + xfer, 1e-6), "drive %d: the first write counts as after a read", k);
        CHECK(m[k].drive[0].u.hdd.s.after_write == 1, "drive %d remembers a write last", k);
        at = w.complete_ns;
    }
    uint64_t addr = 200 * MB;
    while (dbt_hdd_media(&m[1].drive[0].u.hdd.d, 0.0, at, addr, 8192, 0) ==
           dbt_hdd_media(&m[2].drive[0].u.hdd.d, 0.0, at, addr, 8192, 0))
        addr += 4096;
    uint64_t done[3];
    for (int k = 0; k < 3; k++) {
        struct dbt_result r = submit(&m[k], at, DBT_OP_READ, addr, 8192);
        CHECK(!(r.flags & (DBT_RES_CACHE_HIT | DBT_RES_STREAM)), "drive %d: the read goes to the media", k);
        done[k] = r.complete_ns;
    }
    CHECK(done[0] == done[1], "a read miss after a write ends at %llu, as with 0.9 ms after a read at %llu",
          (unsigned long long)done[0], (unsigned long long)done[1]);
    CHECK(done[0] > done[2], "and later than with 0.3 ms (%llu)", (unsigned long long)done[2]);
}

/* A head switch at each track boundary a transfer crosses. */
static void test_head_switch_per_track_crossed(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    set(&p, DBT_KIND_HDD, "cache_mib", 0);
    struct dbt_model_state plain, sw;
    dbt_model_init(&plain, DBT_KIND_HDD, &p);
    set(&p, DBT_KIND_HDD, "head_switch_ms", 1);
    dbt_model_init(&sw, DBT_KIND_HDD, &p);
    const struct dbt_hdd_derived *d = &plain.drive[0].u.hdd.d;
    double track = dbt_hdd_media_bpns(d, 0) * 60e9 / 7200; /* bytes on the outermost track */
    uint32_t len = (uint32_t)(2.5 * track);                  /* from the track's start: crosses 2 boundaries */
    uint64_t t0 = dbt_hdd_media(d, 0.0, 0, 0, len, 0);
    struct dbt_result r1 = submit(&plain, 0, DBT_OP_READ, 0, len), r2 = submit(&sw, 0, DBT_OP_READ, 0, len);
    CHECK(r1.complete_ns == t0, "no switch time: the media access alone");
    CHECK(r2.complete_ns - r1.complete_ns == 2000000 || r2.complete_ns - r1.complete_ns == 1999999 ||
              r2.complete_ns - r1.complete_ns == 2000001,
          "two track boundaries cost 2 ms (%lld ns)", (long long)(r2.complete_ns - r1.complete_ns));
}

/* N channels serve N requests at once; the N+1th waits for a channel. */
static void test_channels_in_parallel(void) {
    struct dbt_params p;
    dbt_params_defaults(&p, DBT_KIND_SSD);
    set(&p, DBT_KIND_SSD, "channels", 4);
    set(&p, DBT_KIND_SSD, "read_latency_us", 100);
    set(&p, DBT_KIND_SSD, "channel_read_mb_s", 100);
    set(&p, DBT_KIND_SSD, "interface_mb_s", 100000);
    struct dbt_model_state st;
    dbt_model_init(&st, DBT_KIND_SSD, &p);
    double one = 100e3 + 8192 / 0.1; /* 100 us + 8 KiB at 100 MB/s = 181.92 us */
    double x = 8192 / 100.0;         /* interface transfer, 81.92 ns */
    for (int i = 0; i < 4; i++) {
        struct dbt_result r = submit(&st, 0, DBT_OP_READ, (uint64_t)i << 20, 8192);
        CHECK(near((double)r.complete_ns, one + (i + 1) * x, 1e-4), "request %d done at %llu, expected %.0f", i,
              (unsigned long long)r.complete_ns, one + (i + 1) * x);
    }
    struct dbt_result r5 = submit(&st, 0, DBT_OP_READ, 5 << 20, 8192);
    CHECK(near((double)r5.complete_ns, 2 * one + x, 1e-4), "fifth waits a full service: %llu, expected %.0f",
          (unsigned long long)r5.complete_ns, 2 * one + x);
    /* A large request spreads over the channels: 64 KiB = 4 pages of 16 KiB, one per channel. */
    dbt_model_init(&st, DBT_KIND_SSD, &p);
    struct dbt_result big = submit(&st, 0, DBT_OP_READ, 0, 65536);
    double expect = 100e3 + 16384 / 0.1 + 65536 / 100.0;
    CHECK(near((double)big.complete_ns, expect, 1e-4), "64 KiB striped: %llu, expected %.0f",
          (unsigned long long)big.complete_ns, expect);
}

static void test_flash_flush_and_plp(void) {
    struct dbt_params p;
    dbt_params_defaults(&p, DBT_KIND_SSD);
    set(&p, DBT_KIND_SSD, "flush_ms", 2);
    struct dbt_model_state st;
    dbt_model_init(&st, DBT_KIND_SSD, &p);
    struct dbt_result f = submit(&st, 1000, DBT_OP_FLUSH, 0, 0);
    CHECK(f.complete_ns == 1000 + 2000000, "flush costs flush_ms (%llu)", (unsigned long long)f.complete_ns);
    set(&p, DBT_KIND_SSD, "flush_ms", 0);
    dbt_model_init(&st, DBT_KIND_SSD, &p);
    f = submit(&st, 1000, DBT_OP_FLUSH, 0, 0);
    CHECK(f.complete_ns == 1000, "power-loss protected flush is free");
}

static void test_ram_latency_and_cap(void) {
    struct dbt_params p;
    dbt_params_defaults(&p, DBT_KIND_RAM); /* 60 us, 100 MB/s */
    struct dbt_model_state st;
    dbt_model_init(&st, DBT_KIND_RAM, &p);
    struct dbt_result r = submit(&st, 0, DBT_OP_READ, 0, 8192);
    CHECK(near((double)r.complete_ns, 60e3 + 81920, 1e-6), "QD1 read = latency + transfer (%llu)",
          (unsigned long long)r.complete_ns);
    /* Ten at once: the interface serialises them, 100 MB/s overall. */
    dbt_model_init(&st, DBT_KIND_RAM, &p);
    uint64_t last = 0;
    for (int i = 0; i < 10; i++) last = submit(&st, 0, DBT_OP_READ, (uint64_t)i * 8192, 8192).complete_ns;
    CHECK(near((double)last, 60e3 + 10 * 81920, 1e-6), "10 reads end at %llu", (unsigned long long)last);
}

static void test_deterministic(void) {
    struct dbt_params p;
    hdd_defaults(&p);
    uint64_t sums[2] = {0, 0};
    for (int run = 0; run < 2; run++) {
        struct dbt_model_state st;
        dbt_model_init(&st, DBT_KIND_HDD, &p);
        uint64_t t = 0, x = 7;
        for (int i = 0; i < 5000; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            int op = (x >> 60) & 1 ? DBT_OP_READ : DBT_OP_WRITE;
            if (((x >> 50) & 63) == 0) op = DBT_OP_FLUSH;
            struct dbt_result r = submit(&st, t, op, (x >> 20) % (1ull << 32), 8192);
            sums[run] = sums[run] * 31 + r.complete_ns;
            t += (x >> 40) % 3000000;
        }
    }
    CHECK(sums[0] == sums[1], "the same request stream gives the same completions");
}

static void test_option_table(void) {
    struct dbt_params p;
    char err[256];
    dbt_params_defaults(&p, DBT_KIND_HDD);
    CHECK(dbt_params_set(&p, DBT_KIND_HDD, "rpm", 15000, err, sizeof err) == 0 && p.k.hdd.rpm == 15000, "set rpm");
    CHECK(dbt_params_set(&p, DBT_KIND_HDD, "rpm", 99, err, sizeof err) != 0 && strstr(err, "outside"), "range: %s", err);
    CHECK(dbt_params_set(&p, DBT_KIND_HDD, "channels", 4, err, sizeof err) != 0 && strstr(err, "no parameter"),
          "kind's own names only: %s", err);
    CHECK(dbt_params_set(&p, DBT_KIND_HDD, "rpm", NAN, err, sizeof err) != 0, "not a number: %s", err);
    dbt_params_defaults(&p, DBT_KIND_SSD);
    CHECK(p.capacity_gb == 240 && p.k.flash.interface_mb_s == 550, "defaults are per kind");
}

/* Each kind's ops: its own index and version, the hooks its capabilities promise, and an option table
 * whose every row lies in the options all kinds share or in the kind's own struct (a row pointing into
 * another kind's struct would read that kind's values). */
static void test_kinds_table(void) {
    for (int k = 0; k < DBT_KIND_COUNT; k++) {
        const struct dbt_device_ops *o = dbt_ops_by_kind(k);
        CHECK(o && o->kind == k && o->version == DBT_OPS_VERSION && o->init && o->submit, "kind %d's ops", k);
        if (!o) continue;
        CHECK(dbt_ops_by_name(o->name) == o, "%s is found by its name", o->name);
        if (o->caps & DBT_CAP_REORDERS)
            CHECK(o->queue_depth && o->free_at && o->estimate, "%s reorders without its queue hooks", o->name);
        CHECK(o->nparams <= DBT_MAX_PARAMS, "%s has %d options, a spec holds %d", o->name, o->nparams, DBT_MAX_PARAMS);
        size_t own = offsetof(struct dbt_params, k);
        for (int i = 0; i < o->nparams; i++) {
            size_t at = o->params[i].offset;
            int shared = at == offsetof(struct dbt_params, capacity_gb) || at == offsetof(struct dbt_params, members) ||
                         at == offsetof(struct dbt_params, stripe_kib) ||
                         at == offsetof(struct dbt_params, flush_honoured) ||
                         at == offsetof(struct dbt_params, atomic_write_kib);
            CHECK(shared || (at >= own && at + sizeof(double) <= own + o->params_size),
                  "%s option %s lies outside its own struct", o->name, o->params[i].name);
        }
    }
    CHECK(!dbt_ops_by_kind(-1) && !dbt_ops_by_kind(DBT_KIND_COUNT) && !dbt_ops_by_name("tape"), "no other kinds");
}

static void test_lateness_buckets(void) {
    int ok = 1;
    for (uint64_t v = 1; v < (1ull << 40); v = v * 3 / 2 + 1) {
        int b = dbt_lat_bucket(v);
        uint64_t lo = dbt_lat_bucket_floor(b), hi = dbt_lat_bucket_floor(b + 1);
        if (!(lo <= v && (b == DBT_LAT_BUCKETS - 1 || v < hi) && (v < 16 || (double)(v - lo) / (double)v < 0.125)))
            ok = 0;
    }
    CHECK(ok, "every value lands in a bucket whose floor is within 12.5%% below it");
}

int main(void) {
    test_sequential_streams_at_media_rate();
    test_forward_skip_rides_the_readahead();
    test_readahead_stops_at_the_track_end();
    test_readahead_to_the_track_end_keeps_its_last_part();
    test_readahead_carried_on_by_a_hit();
    test_raid0_stripes_over_members();
    test_protected_write_cache_flush();
    test_ignored_flush();
    test_seek_curve_points();
    test_span_scale();
    test_full_stroke_access();
    test_buffer_hit();
    test_write_back_and_flush();
    test_destage_is_sorted();
    test_destage_merges_and_absorbs();
    test_read_goes_before_waiting_destage();
    test_full_buffer_destages_at_once();
    test_interleaved_streams_destage_in_sweeps();
    test_slow_bus_and_write_overhead();
    test_overheads_follow_the_previous_command();
    test_head_switch_per_track_crossed();
    test_channels_in_parallel();
    test_flash_flush_and_plp();
    test_ram_latency_and_cap();
    test_deterministic();
    test_option_table();
    test_kinds_table();
    test_lateness_buckets();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
