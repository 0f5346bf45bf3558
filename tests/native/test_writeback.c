/* Background writeback on a drive that lays files out (an HDD): a page written back whose 1 MiB chunk
 * the program never touched first gets its device space under the device's lock, which the writeback
 * queue already holds. Found hung: MariaDB's ALTER TABLE sorting to a buffered temp file on an
 * emulated disk (the second lock of a lock already held waited forever). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "emulate.h"
#include "state.h"
#include "workdir.h"

static void hung(int sig) {
    (void)sig;
    static const char say[] = "FAIL: the writeback did not return in 20 s (a lock taken twice)\n";
    (void)!write(1, say, sizeof say - 1);
    _exit(1);
}

static void writeback_of_untouched_chunks(void) {
    struct test_device hdd = {"hdd", "hdd", "/nonexistent/hdd", {{0}}};
    /* a 1 MiB page cache: a 4 MiB write leaves most of itself to background writeback */
    struct dbt_pc_config pc = {1 << 20, 64, 5, 20, 0};
    struct dbt_state *s = make_state("writeback", hdd, &pc);
    int64_t file = dbt_state_file_index(s, 0, 1, 300, "/nonexistent/hdd/sortfile", 0);
    const uint64_t T0 = 1000000000ull, LEN = 4 << 20;
    struct dbt_outcome out;
    signal(SIGALRM, hung);
    alarm(20);
    /* the write touches chunk 0 first; chunks 1 to 3 are first seen by the writeback */
    struct dbt_call w = {T0, T0, 0, LEN, UINT64_MAX, file, 0, DBT_TOP_WRITE, 0, 0};
    dbt_emulate(s, &w, NULL, &out);
    struct dbt_call f = {out.complete, out.complete, 0, 0, UINT64_MAX, file, 0, DBT_TOP_FLUSH, 0, 0};
    dbt_emulate(s, &f, NULL, &out);
    alarm(0);
    CHECK(s->dev[0].c.write_bytes == LEN, "the whole write reached the drive: %llu bytes",
          (unsigned long long)s->dev[0].c.write_bytes);
    uint64_t addr[4];
    for (int i = 0; i < 4; i++) addr[i] = dbt_state_addr(s, 0, file, (uint64_t)i << 20);
    for (int i = 1; i < 4; i++)
        CHECK(addr[i] != addr[0] && addr[i] != addr[i - 1], "chunk %d has space of its own (%llu)", i,
              (unsigned long long)addr[i]);
}

int main(int argc, char **argv) {
    if (work_begin(argc, argv, "dbtier-test-writeback") != 0) return 1;
    writeback_of_untouched_chunks();
    work_done();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
