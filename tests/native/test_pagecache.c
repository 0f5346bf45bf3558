/* Page cache unit tests: hand-computed cases against a fake device that logs each request and
 * completes it LAT ns after its arrival. Prints "N passed, N failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devmodel.h"
#include "pagecache.h"

#include "check.h"

#define LAT 1000000ull /* every device request takes 1 ms */
#define K 1024ull

struct req { int op; int64_t file; uint64_t off, len, arrival; int async; };
static struct req log_[256];
static int nlog;

static uint64_t fake_io(void *ctx, int op, int64_t file, uint64_t off, uint64_t len, uint64_t arrival, int async) {
    (void)ctx;
    if (nlog < 256) log_[nlog++] = (struct req){op, file, off, len, arrival, async};
    return arrival + LAT;
}

static struct dbt_pc *make(uint64_t bytes, uint32_t ra_kb, uint32_t bg, uint32_t limit) {
    struct dbt_pc *pc = calloc(1, dbt_pc_region_size(bytes));
    dbt_pc_init(pc, bytes, ra_kb, bg, limit);
    nlog = 0;
    return pc;
}

static void random_reads(void) {
    struct dbt_pc *pc = make(1 << 20, 128, 10, 20);
    struct dbt_pc_stats st = {0};
    /* Not where the file's reader left off: just the two pages asked for, one request, waited for. */
    uint64_t done = dbt_pc_read(pc, 3, 40 * K, 8 * K, UINT64_MAX, 100, fake_io, NULL, &st);
    CHECK(nlog == 1 && log_[0].op == DBT_OP_READ && log_[0].off == 40 * K && log_[0].len == 8 * K && !log_[0].async,
          "one 8 KiB read at 40 KiB (%d requests)", nlog);
    CHECK(done == 100 + LAT, "the caller waits for the device: %llu", (unsigned long long)done);
    CHECK(st.miss_pages == 2 && st.hit_pages == 0 && st.readahead_bytes == 0, "2 misses, no read-ahead");
    /* The same pages again: in memory, no device time. */
    done = dbt_pc_read(pc, 3, 40 * K, 8 * K, UINT64_MAX, 2 * LAT, fake_io, NULL, &st);
    CHECK(nlog == 1 && done == 2 * LAT && st.hit_pages == 2, "a hit costs nothing (%d requests)", nlog);
    /* Another file's same offset is another page. */
    dbt_pc_read(pc, 4, 40 * K, 8 * K, UINT64_MAX, 3 * LAT, fake_io, NULL, &st);
    CHECK(nlog == 2 && log_[1].file == 4, "files are distinct");
    free(pc);
}

static void sequential_readahead(void) {
    struct dbt_pc *pc = make(1 << 20, 128, 10, 20); /* read-ahead up to 32 pages */
    struct dbt_pc_stats st = {0};
    /* 8 KiB at the start: initial window 2 x 2 = 4 pages, one synchronous read of 16 KiB. */
    uint64_t done = dbt_pc_read(pc, 1, 0, 8 * K, UINT64_MAX, 0, fake_io, NULL, &st);
    CHECK(nlog == 1 && log_[0].off == 0 && log_[0].len == 16 * K && !log_[0].async, "sync read-ahead 16 KiB (len %llu)",
          (unsigned long long)log_[0].len);
    CHECK(done == LAT && st.readahead_bytes == 8 * K, "waited for one read; 8 KiB read ahead");
    /* The next 8 KiB are in memory; reaching the marker (page 2) starts the next window, 4 x 2 = 8
     * pages from page 4, without waiting for it. */
    done = dbt_pc_read(pc, 1, 8 * K, 8 * K, UINT64_MAX, 2 * LAT, fake_io, NULL, &st);
    CHECK(done == 2 * LAT, "hits: no wait");
    CHECK(nlog == 2 && log_[1].off == 16 * K && log_[1].len == 32 * K && log_[1].async,
          "async read-ahead of 32 KiB at 16 KiB (off %llu len %llu)", (unsigned long long)log_[1].off,
          (unsigned long long)log_[1].len);
    /* Reading those pages before they arrive waits for them, and no more. */
    done = dbt_pc_read(pc, 1, 16 * K, 8 * K, UINT64_MAX, 2 * LAT + 10, fake_io, NULL, &st);
    CHECK(done == 3 * LAT, "a page in flight is waited for: %llu", (unsigned long long)done);
    CHECK(nlog == 3 && log_[2].off == 48 * K && log_[2].len == 64 * K && log_[2].async,
          "its marker starts the next window, 16 pages (off %llu len %llu)", (unsigned long long)log_[2].off,
          (unsigned long long)log_[2].len);
    CHECK(st.readahead_bytes == 8 * K + 32 * K + 64 * K, "read-ahead bytes %llu", (unsigned long long)st.readahead_bytes);
    CHECK(st.miss_pages == 2 && st.hit_pages == 4, "misses %llu hits %llu", (unsigned long long)st.miss_pages,
          (unsigned long long)st.hit_pages);
    free(pc);
}

static void full_window_requests(void) {
    struct dbt_pc *pc = make(4 << 20, 128, 10, 20);
    struct dbt_pc_stats st = {0};
    /* 128 KiB requests fill the 128 KiB window: each is read as asked, and the next window is
     * started at once, so a sequential reader finds its next 128 KiB on the way. */
    dbt_pc_read(pc, 1, 0, 128 * K, UINT64_MAX, 0, fake_io, NULL, &st);
    CHECK(nlog == 2 && log_[0].len == 128 * K && !log_[0].async && log_[1].off == 128 * K && log_[1].len == 128 * K &&
              log_[1].async, "sync 128 KiB, then async 128 KiB (%d requests)", nlog);
    uint64_t done = dbt_pc_read(pc, 1, 128 * K, 128 * K, UINT64_MAX, LAT / 2, fake_io, NULL, &st);
    CHECK(done == LAT, "the second 128 KiB arrives with the async read: %llu", (unsigned long long)done);
    CHECK(nlog == 3 && log_[2].off == 256 * K && log_[2].async, "and its marker starts the third");
    free(pc);
}

static void clock_eviction(void) {
    struct dbt_pc *pc = make(4 * 4096, 128, 10, 20); /* 4 pages */
    struct dbt_pc_stats st = {0};
    for (uint64_t p = 0; p < 4; p++) dbt_pc_read(pc, 1, (10 + 2 * p) * 4096, 4096, UINT64_MAX, p * LAT, fake_io, NULL, &st);
    CHECK(nlog == 4, "four misses");
    /* A fifth page: every page has its reference bit, so the hand clears them all and takes the
     * first, page 10. */
    dbt_pc_read(pc, 1, 30 * 4096, 4096, UINT64_MAX, 10 * LAT, fake_io, NULL, &st);
    uint64_t present, dirty;
    dbt_pc_usage(pc, &present, &dirty);
    CHECK(present == 4, "still 4 pages (%llu)", (unsigned long long)present);
    nlog = 0;
    dbt_pc_read(pc, 1, 12 * 4096, 4096, UINT64_MAX, 20 * LAT, fake_io, NULL, &st); /* page 12: still there */
    CHECK(nlog == 0, "page 12 stayed");
    dbt_pc_read(pc, 1, 10 * 4096, 4096, UINT64_MAX, 21 * LAT, fake_io, NULL, &st); /* page 10: evicted */
    CHECK(nlog == 1 && log_[0].off == 10 * 4096, "page 10 was evicted and is read again");
    free(pc);
}

static void writes_and_fsync(void) {
    struct dbt_pc *pc = make(100 * 4096, 128, 10, 20); /* background at 10 pages, limit at 20 */
    struct dbt_pc_stats st = {0};
    uint64_t done = dbt_pc_write(pc, 2, 0, 12 * K, 5, 0, fake_io, NULL, &st);
    CHECK(done == 5 && nlog == 0, "a buffered write costs no device time");
    uint64_t present, dirty;
    dbt_pc_usage(pc, &present, &dirty);
    CHECK(dirty == 3, "3 dirty pages (%llu)", (unsigned long long)dirty);
    /* fsync: the three pages in one request, waited for. */
    done = dbt_pc_writeback(pc, 2, 0, 0, 100, 1, fake_io, NULL, &st);
    CHECK(nlog == 1 && log_[0].op == DBT_OP_WRITE && log_[0].off == 0 && log_[0].len == 12 * K && !log_[0].async,
          "one 12 KiB write");
    CHECK(done == 100 + LAT && st.writeback_bytes == 12 * K, "fsync waits for it");
    dbt_pc_usage(pc, &present, &dirty);
    CHECK(dirty == 0 && present == 3, "clean, still cached");
    CHECK(dbt_pc_read(pc, 2, 0, 12 * K, UINT64_MAX, 200, fake_io, NULL, &st) == 200 && nlog == 1, "reading written data hits");
    free(pc);
}

static void dirty_thresholds(void) {
    struct dbt_pc *pc = make(100 * 4096, 128, 10, 20);
    struct dbt_pc_stats st = {0};
    /* Eleven single-page writes: the eleventh passes the background threshold (10 pages), and the
     * flusher writes the oldest back to half of it, 6 pages in one request, without the writer waiting. */
    uint64_t done = 0;
    for (uint64_t p = 0; p < 11; p++) done = dbt_pc_write(pc, 1, p * 4096, 4096, 7, 0, fake_io, NULL, &st);
    CHECK(done == 7, "the writer did not wait");
    CHECK(nlog == 1 && log_[0].off == 0 && log_[0].len == 6 * 4096 && log_[0].async, "async writeback of 6 pages");
    /* 20 more pages in one call: 25 dirty > 20, the writer writes back to (10 + 20) / 2 = 15 and waits. */
    done = dbt_pc_write(pc, 1, 100 * 4096, 20 * 4096, 50, 0, fake_io, NULL, &st);
    CHECK(done == 50 + LAT, "throttled: the writer waited (%llu)", (unsigned long long)done);
    uint64_t present, dirty;
    dbt_pc_usage(pc, &present, &dirty);
    CHECK(dirty == 15, "15 dirty (%llu)", (unsigned long long)dirty);
    CHECK(nlog == 3 && !log_[1].async && !log_[2].async && log_[1].len == 5 * 4096 && log_[2].len == 5 * 4096,
          "pages 6-10 and 100-104 written, two runs (%d requests)", nlog);
    free(pc);
}

static void write_through_and_drops(void) {
    struct dbt_pc *pc = make(100 * 4096, 128, 10, 20);
    struct dbt_pc_stats st = {0};
    uint64_t done = dbt_pc_write(pc, 1, 0, 8 * K, 10, 1, fake_io, NULL, &st);
    CHECK(done == 10 + LAT && nlog == 1 && !log_[0].async, "O_DSYNC: written through, waited for");
    uint64_t present, dirty;
    dbt_pc_usage(pc, &present, &dirty);
    CHECK(dirty == 0 && present == 2, "clean and cached");
    dbt_pc_write(pc, 1, 8 * K, 4 * K, 20, 0, fake_io, NULL, &st); /* page 2 dirty */
    dbt_pc_drop(pc, 1, 0, 0, 0);                                   /* DONTNEED: clean pages go */
    dbt_pc_usage(pc, &present, &dirty);
    CHECK(present == 1 && dirty == 1, "DONTNEED keeps the dirty page (%llu present)", (unsigned long long)present);
    dbt_pc_drop(pc, 1, 0, 0, 1); /* truncation: gone, dirty or not */
    dbt_pc_usage(pc, &present, &dirty);
    CHECK(present == 0 && dirty == 0, "truncate drops everything");
    nlog = 0;
    dbt_pc_willneed(pc, 1, 0, 64 * K, 30, fake_io, NULL, &st);
    CHECK(nlog == 1 && log_[0].len == 64 * K && log_[0].async, "WILLNEED reads the range without waiting");
    CHECK(dbt_pc_read(pc, 1, 32 * K, 8 * K, UINT64_MAX, 40, fake_io, NULL, &st) == 30 + LAT, "a read waits for it to arrive");
    dbt_pc_clear(pc);
    dbt_pc_usage(pc, &present, &dirty);
    nlog = 0;
    CHECK(present == 0 && dbt_pc_read(pc, 1, 32 * K, 8 * K, UINT64_MAX, 50, fake_io, NULL, &st) == 50 + LAT && nlog == 1,
          "after a clear, a cold miss");
    free(pc);
}

static void readahead_stops_at_end_of_file(void) {
    struct dbt_pc *pc = make(1 << 20, 128, 10, 20);
    struct dbt_pc_stats st = {0};
    /* A 12 KiB file read from its start: the 4-page window is cut to the file's 3 pages, and there
     * is nothing left to read ahead asynchronously. */
    dbt_pc_read(pc, 1, 0, 8 * K, 12 * K, 0, fake_io, NULL, &st);
    CHECK(nlog == 1 && log_[0].len == 12 * K, "read-ahead cut at the end of the file (len %llu)",
          (unsigned long long)log_[0].len);
    dbt_pc_read(pc, 1, 8 * K, 4 * K, 12 * K, LAT, fake_io, NULL, &st);
    CHECK(nlog == 1 && st.readahead_bytes == 4 * K, "no read-ahead past the end (%d requests)", nlog);
    free(pc);
}

int main(void) {
    readahead_stops_at_end_of_file();
    random_reads();
    sequential_readahead();
    full_window_requests();
    clock_eviction();
    writes_and_fsync();
    dirty_thresholds();
    write_through_and_drops();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
