/* Per-process durability log writer. See durlog.h. Runs inside intercepted calls with the recursion
 * guard set, so its own open and writev pass straight through. */
#define _GNU_SOURCE
#include "durlog.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_PIECES 64 /* the record, and the payload's pieces: a longer iovec is logged in several writes */

static char log_dir[1024];
static uint32_t log_proc;
static int log_fd = -1;
static _Atomic int log_failed;
static _Atomic uint64_t next_seq;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t *failure_count;
static _Atomic uint32_t *log_gate;

void dbt_durlog_configure(const char *dir, uint32_t procno, _Atomic uint64_t *failures, _Atomic uint32_t *gate) {
    if (!dir || !*dir || strlen(dir) >= sizeof log_dir || !gate) return;
    strcpy(log_dir, dir);
    log_proc = procno;
    failure_count = failures;
    log_gate = gate;
}

int dbt_durlog_active(void) {
    return log_dir[0] && atomic_load_explicit(log_gate, memory_order_relaxed) &&
           !atomic_load_explicit(&log_failed, memory_order_relaxed);
}

/* The child writes a file of its own: records of two processes never interleave in one file. */
void dbt_durlog_after_fork(uint32_t procno) {
    if (log_fd >= 0) close(log_fd);
    log_fd = -1;
    log_proc = procno;
    atomic_store(&next_seq, 0);
    atomic_store(&log_failed, 0);
    pthread_mutex_init(&open_lock, NULL);
}

static void log_stopped(const char *what, int why) {
    if (atomic_exchange(&log_failed, 1)) return;
    if (failure_count) atomic_fetch_add(failure_count, 1);
    char msg[1400];
    int n = snprintf(msg, sizeof msg, "dbtier-iotap: pid %d: durability log %s/dur-%u.log: %s: %s; its log stops here\n",
                     (int)getpid(), log_dir, log_proc, what, strerror(why));
    if (n > 0) (void)!write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
}

static int open_log(void) {
    pthread_mutex_lock(&open_lock);
    if (log_fd < 0 && !atomic_load(&log_failed)) {
        char path[1200];
        snprintf(path, sizeof path, "%s/dur-%u.log", log_dir, log_proc);
        /* O_EXCL | O_NOFOLLOW: never an existing name, never through a planted symlink */
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            log_stopped("cannot create it", errno);
        else
            log_fd = fd;
    }
    pthread_mutex_unlock(&open_lock);
    return log_fd;
}

/* One writev per record, O_APPEND: the record and its payload land whole and together, whichever of
 * the process's threads writes at the same time. A short write (no space) stops the log. */
static void write_all(struct iovec *v, int n, size_t total) {
    int fd = log_fd >= 0 ? log_fd : open_log();
    if (fd < 0) return;
    ssize_t r;
    do r = writev(fd, v, n);
    while (r < 0 && errno == EINTR);
    if (r < 0 || (size_t)r != total) log_stopped("cannot write it", r < 0 ? errno : ENOSPC);
}

void dbt_durlog_append(struct dbt_durlog_rec *rec, const struct iovec *iov, int cnt) {
    if (!dbt_durlog_active()) return;
    int saved = errno;
    rec->magic = DBT_DURLOG_MAGIC;
    rec->pad_ = 0;
    struct iovec v[MAX_PIECES];
    /* A payload in more pieces than one writev takes is split into records of consecutive ranges. */
    uint64_t off = rec->off;
    int i = 0;
    do {
        int n = 1;
        size_t bytes = 0;
        for (; i < cnt && n < MAX_PIECES; i++) {
            if (!iov[i].iov_len) continue;
            v[n++] = iov[i];
            bytes += iov[i].iov_len;
        }
        rec->len = (uint32_t)bytes;
        rec->off = off;
        rec->seq = atomic_fetch_add(&next_seq, 1);
        v[0].iov_base = rec;
        v[0].iov_len = sizeof *rec;
        write_all(v, n, sizeof *rec + bytes);
        off += bytes;
    } while (i < cnt && dbt_durlog_active());
    errno = saved;
}
