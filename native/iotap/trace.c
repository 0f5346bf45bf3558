/* Per-process trace writer. See trace.h. Runs inside intercepted calls, with the recursion guard
 * set, so its own open/ftruncate pass straight through. */
#define _GNU_SOURCE
#include "trace.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SEG_BYTES ((size_t)DBT_TRACE_SEG_RECS * sizeof(struct dbt_trace_rec))

static char trace_dir[1024];
static uint32_t trace_proc;
static _Atomic uint64_t next_rec;
static struct dbt_trace_rec *_Atomic segs[DBT_TRACE_MAX_SEGS];
static pthread_mutex_t seg_lock = PTHREAD_MUTEX_INITIALIZER;
static int trace_failed;

void dbt_trace_configure(const char *dir, uint32_t procno) {
    if (!dir || !*dir || strlen(dir) >= sizeof trace_dir) return;
    strcpy(trace_dir, dir);
    trace_proc = procno;
}

/* The child starts its own files; the parent's mappings are not its to write. */
void dbt_trace_after_fork(uint32_t procno) {
    for (uint32_t i = 0; i < DBT_TRACE_MAX_SEGS; i++) {
        struct dbt_trace_rec *s = atomic_load(&segs[i]);
        if (s) munmap(s, SEG_BYTES);
        atomic_store(&segs[i], NULL);
    }
    atomic_store(&next_rec, 0);
    pthread_mutex_init(&seg_lock, NULL);
    trace_proc = procno;
    trace_failed = 0;
}

static struct dbt_trace_rec *map_segment(uint32_t seg) {
    pthread_mutex_lock(&seg_lock);
    struct dbt_trace_rec *s = atomic_load(&segs[seg]);
    if (!s && !trace_failed) {
        char path[1200];
        snprintf(path, sizeof path, "%s/iotap-%u-%u.trc", trace_dir, trace_proc, seg);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (fd >= 0 && ftruncate(fd, (off_t)SEG_BYTES) == 0) {
            void *m = mmap(NULL, SEG_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (m != MAP_FAILED) s = m;
        }
        if (fd >= 0) close(fd);
        if (!s) trace_failed = 1; /* no space or no permission: stop tracing, keep running */
        atomic_store(&segs[seg], s);
    }
    pthread_mutex_unlock(&seg_lock);
    return s;
}

struct dbt_trace_rec *dbt_trace_reserve(void) {
    if (!trace_dir[0] || trace_failed) return NULL;
    uint64_t i = atomic_fetch_add(&next_rec, 1);
    uint64_t seg = i / DBT_TRACE_SEG_RECS;
    if (seg >= DBT_TRACE_MAX_SEGS) return NULL;
    struct dbt_trace_rec *s = atomic_load(&segs[seg]);
    if (!s) s = map_segment((uint32_t)seg);
    return s ? &s[i % DBT_TRACE_SEG_RECS] : NULL;
}

void dbt_trace_commit(struct dbt_trace_rec *r, uint8_t op) {
    __atomic_store_n(&r->op, op, __ATOMIC_RELEASE);
}
