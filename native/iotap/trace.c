/* Per-process trace writer. See trace.h. Runs inside intercepted calls, with the recursion guard
 * set, so its own open/ftruncate pass straight through. */
#define _GNU_SOURCE
#include "trace.h"

#include <errno.h>
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
static _Atomic int trace_failed; /* read without the lock on every record */
static _Atomic uint64_t *failure_count;

void dbt_trace_configure(const char *dir, uint32_t procno, _Atomic uint64_t *failures) {
    if (!dir || !*dir || strlen(dir) >= sizeof trace_dir) return;
    strcpy(trace_dir, dir);
    trace_proc = procno;
    failure_count = failures;
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
    atomic_store(&trace_failed, 0);
}

/* No space, no permission, or the name taken: the trace stops, the process runs on, and the stop is
 * counted in the state (so a run's report can say its trace is incomplete) and said once. */
static void trace_stopped(const char *path, int why) {
    atomic_store(&trace_failed, 1);
    if (failure_count) atomic_fetch_add(failure_count, 1);
    char msg[1400];
    int n = snprintf(msg, sizeof msg, "dbtier-iotap: pid %d: cannot create trace file %s: %s; its trace stops here\n",
                     (int)getpid(), path, strerror(why));
    if (n > 0) (void)!write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
}

static struct dbt_trace_rec *map_segment(uint32_t seg) {
    pthread_mutex_lock(&seg_lock);
    struct dbt_trace_rec *s = atomic_load(&segs[seg]);
    if (!s && !atomic_load(&trace_failed)) {
        char path[1200];
        snprintf(path, sizeof path, "%s/iotap-%u-%u.trc", trace_dir, trace_proc, seg);
        /* O_EXCL | O_NOFOLLOW: a name that exists already, or a symlink planted in the folder, is
         * never written through (the launcher gives a fresh folder) */
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        int why = errno;
        if (fd >= 0) {
            void *m = ftruncate(fd, (off_t)SEG_BYTES) == 0
                          ? mmap(NULL, SEG_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                          : MAP_FAILED;
            why = errno;
            if (m != MAP_FAILED) s = m;
            close(fd);
        }
        if (!s) trace_stopped(path, why);
        atomic_store(&segs[seg], s);
    }
    pthread_mutex_unlock(&seg_lock);
    return s;
}

int dbt_trace_active(void) {
    return trace_dir[0] && !atomic_load_explicit(&trace_failed, memory_order_relaxed);
}

struct dbt_trace_rec *dbt_trace_reserve(void) {
    if (!trace_dir[0] || atomic_load_explicit(&trace_failed, memory_order_relaxed)) return NULL;
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
