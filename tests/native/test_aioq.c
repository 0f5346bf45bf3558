/* Asynchronous requests in flight (aioq.c), against queues worked out by hand.
 *
 * 1. Flash, 32 reads in flight: 4 channels, 100 us a page, 16 KiB pieces at 100,000 MB/s on each
 *    channel and on the interface (163 ns each, truncated as the model does). Submitted together,
 *    request 4k + j (j = 0..3) is read on channel j in round k + 1, so its media is done at
 *    (k + 1) x 100,163 ns, and the interface sends the four of a round one after another, 163 ns each:
 *    it completes at (k + 1) x 100,163 + 163 x (j + 1). A reap returns exactly those due by its time,
 *    the earliest first, no more than asked; what is left says when the next one is due.
 * 2. A queueing drive (NCQ, depth 4): R0, then a far R1 and a near R2 while R0 is served. Reaped as
 *    they are due, R0 comes back first, then the near one, then the far one, each at the completion
 *    the drive model gives for its media access from where the head was.
 * 3. A call made while the emulation is paused completes when its real I/O ended; a context cleared
 *    holds nothing.
 *
 *   test_aioq [WORKDIR]  (default: a fresh folder under /tmp, removed at the end) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aioq.h"
#include "check.h"
#include "dev_hdd.h"
#include "devmodel.h"
#include "state.h"
#include "workdir.h"

static struct dbt_aio_req *submit(struct dbt_aio_queue *q, struct dbt_state *s, int64_t file, uint64_t t0,
                                  uint64_t off, uint64_t len, uint64_t tag) {
    struct dbt_aio_req *r = dbt_aio_new(q);
    r->call = (struct dbt_call){t0, t0, off, len, UINT64_MAX, file, 0, DBT_TOP_READ, 0, DBT_TF_DIRECT};
    r->ev = (struct dbt_aio_event){tag, tag, (int64_t)len, 0};
    dbt_aio_submit(q, s, r, NULL);
    return r;
}

static void flash_32_in_flight(void) {
    struct test_device ssd = {"ssd", "ssd", "/nonexistent/ssd",
                              {{"channels", 4}, {"read_latency_us", 100}, {"channel_read_mb_s", 100000},
                               {"interface_mb_s", 100000}, {"page_kib", 16}}};
    struct dbt_state *s = make_state("flash", ssd, NULL);
    int64_t file = dbt_state_file_index(s, 0, 1, 200, "/nonexistent/ssd/ibdata1", 64 << 20);
    struct dbt_aio_queue q = {0};
    const uint64_t T0 = 1000000000ull, PAGE = 16384;
    for (uint64_t i = 0; i < 32; i++) submit(&q, s, file, T0, i * PAGE * 7, PAGE, i);
    CHECK(q.count == 32, "32 in flight (%u)", q.count);
    uint64_t expect[32];
    for (int i = 0; i < 32; i++) expect[i] = T0 + (uint64_t)(i / 4 + 1) * 100163 + 163 * (uint64_t)(i % 4 + 1);

    struct dbt_aio_req *out[32];
    uint64_t next;
    uint32_t n = dbt_aio_reap(&q, s, NULL, expect[0] - 1, 32, out, &next);
    CHECK(n == 0 && next == expect[0], "nothing before the first completion; next %llu (expected %llu)",
          (unsigned long long)next, (unsigned long long)expect[0]);
    n = dbt_aio_reap(&q, s, NULL, expect[3], 32, out, &next);
    CHECK(n == 4, "the first round's four by its last completion (%u)", n);
    for (uint32_t i = 0; i < n; i++) {
        CHECK(out[i]->ev.data == i && out[i]->done == expect[i], "request %u done at %llu (expected %llu)",
              (unsigned)out[i]->ev.data, (unsigned long long)out[i]->done, (unsigned long long)expect[i]);
        dbt_aio_release(&q, out[i]);
    }
    CHECK(next == expect[4], "then the second round's first (%llu, expected %llu)", (unsigned long long)next,
          (unsigned long long)expect[4]);
    n = dbt_aio_reap(&q, s, NULL, expect[31], 5, out, &next);
    CHECK(n == 5 && next == expect[9], "no more than asked: %u, the next due %llu", n, (unsigned long long)next);
    for (uint32_t i = 0; i < n; i++) {
        CHECK(out[i]->ev.data == 4 + i && out[i]->done == expect[4 + i], "earliest first: %llu at %llu",
              (unsigned long long)out[i]->ev.data, (unsigned long long)out[i]->done);
        dbt_aio_release(&q, out[i]);
    }
    n = dbt_aio_reap(&q, s, NULL, expect[31], 32, out, &next);
    CHECK(n == 23 && next == UINT64_MAX && q.count == 0, "the rest (%u), none left (%u)", n, q.count);
    for (uint32_t i = 0; i < n; i++) {
        CHECK(out[i]->done == expect[9 + i], "request %llu at %llu (expected %llu)", (unsigned long long)out[i]->ev.data,
              (unsigned long long)out[i]->done, (unsigned long long)expect[9 + i]);
        dbt_aio_release(&q, out[i]);
    }
    CHECK(s->dev[0].c.reads == 32 && s->dev[0].c.read_bytes == 32 * PAGE, "counted once each: %llu reads",
          (unsigned long long)s->dev[0].c.reads);
    dbt_aio_clear(&q);
}

static uint64_t media_from(const struct dbt_hdd_derived *d, uint64_t prev_end, uint64_t t, uint64_t addr) {
    return dbt_hdd_media(d, dbt_hdd_cyl_of(d, prev_end), t, addr, 8192, 0);
}

static void queueing_drive_reorders(void) {
    struct test_device disk = {"disk", "hdd", "/nonexistent/ncq",
                               {{"capacity_gb", 10}, {"cache_mib", 0}, {"write_cache", 0}, {"queue_depth", 4}}};
    struct dbt_state *s = make_state("ncq", disk, NULL);
    int64_t file = dbt_state_file_index(s, 0, 1, 300, "/nonexistent/ncq/ibdata1", 6000ull << 20);
    const struct dbt_hdd_derived *d = &s->dev[0].model.drive[0].u.hdd.d;
    const uint64_t T0 = 1000000000ull, FAR = 5000ull << 20, NEAR = 10ull << 20;
    struct dbt_aio_queue q = {0};
    submit(&q, s, file, T0, 0, 8192, 0);
    submit(&q, s, file, T0 + 1000, FAR, 8192, 1);
    submit(&q, s, file, T0 + 2000, NEAR, 8192, 2);
    uint64_t done0 = media_from(d, 0, T0, 0), near = media_from(d, 8192, done0, NEAR),
             far = media_from(d, NEAR + 8192, near, FAR);
    struct dbt_aio_req *out[3];
    uint64_t next;
    uint32_t n = dbt_aio_reap(&q, s, NULL, done0, 3, out, &next);
    CHECK(n == 1 && out[0]->ev.data == 0 && out[0]->done == done0, "R0 first, at %llu", (unsigned long long)done0);
    if (n) dbt_aio_release(&q, out[0]);
    CHECK(next <= near, "the next is asked for by the near one's completion (%llu <= %llu)", (unsigned long long)next,
          (unsigned long long)near);
    n = dbt_aio_reap(&q, s, NULL, near, 3, out, &next);
    CHECK(n == 1 && out[0]->ev.data == 2 && out[0]->done == near, "then the near one (%u: %llu at %llu, expected %llu)",
          n, n ? (unsigned long long)out[0]->ev.data : 99ull, n ? (unsigned long long)out[0]->done : 0ull,
          (unsigned long long)near);
    if (n) dbt_aio_release(&q, out[0]);
    n = dbt_aio_reap(&q, s, NULL, far, 3, out, &next);
    CHECK(n == 1 && out[0]->ev.data == 1 && out[0]->done == far, "the far one last (at %llu, expected %llu)",
          n ? (unsigned long long)out[0]->done : 0ull, (unsigned long long)far);
    if (n) dbt_aio_release(&q, out[0]);
    CHECK(q.count == 0 && next == UINT64_MAX, "none left");
    dbt_aio_clear(&q);
}

static void paused_and_cleared(void) {
    struct test_device ram = {"ram", "ram", "/nonexistent/ram", {{0}}};
    struct dbt_state *s = make_state("paused", ram, NULL);
    int64_t file = dbt_state_file_index(s, 0, 1, 400, "/nonexistent/ram/f", 1 << 20);
    atomic_store(&s->paused, 1u);
    struct dbt_aio_queue q = {0};
    struct dbt_aio_req *r = dbt_aio_new(&q);
    r->call = (struct dbt_call){5000, 9000, 0, 4096, UINT64_MAX, file, 0, DBT_TOP_READ, 0, DBT_TF_DIRECT};
    dbt_aio_submit(&q, s, r, NULL);
    struct dbt_aio_req *out[1];
    uint64_t next;
    CHECK(dbt_aio_reap(&q, s, NULL, 8999, 1, out, &next) == 0 && next == 9000, "paused: due when its real I/O ended");
    CHECK(dbt_aio_reap(&q, s, NULL, 9000, 1, out, &next) == 1 && s->dev[0].c.reads == 0, "and not counted");
    dbt_aio_release(&q, out[0]);
    atomic_store(&s->paused, 0u);
    submit(&q, s, file, 10000, 0, 4096, 7);
    dbt_aio_clear(&q);
    CHECK(q.count == 0 && !q.inflight && !q.spare, "cleared");
}

int main(int argc, char **argv) {
    if (work_begin(argc, argv, "dbtier-test-aioq") != 0) return 1;
    flash_32_in_flight();
    queueing_drive_reorders();
    paused_and_cleared();
    work_done();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
