/* Interposer semantics: a randomized sequence of file operations, in several processes and threads,
 * logging every return value, errno and a checksum of the data read. run_semantics.cmake runs it
 * plainly and under the interposer and requires byte-identical logs.
 *
 *   test_semantics run SEED ROOT LOG       the sequence, in ROOT (with subdirs a/ b/ out/)
 *   test_semantics mkstate SIMLIB ROOT STATE [pc]   the devices a and b under ROOT (pc: with a small
 *                                          page cache), built through the simulator library, with the
 *                                          durability log on for the runs given its folder
 *   test_semantics check SIMLIB STATE      the interposer saw reads, writes and flushes on a and b
 *   test_semantics highfd ROOT             I/O on fds above 2000 after raising RLIMIT_NOFILE (below)
 *   test_semantics counts SIMLIB STATE KEY=N...   the state's dump has these counters (devN.key: device N's)
 *   test_semantics tracefiles DIR          every trace file in DIR is a regular file of mode 0600
 *   test_semantics bypass ROOT LOG         calls the interposer passes through but counts as bypasses (below)
 *   (counts also takes bypass.KIND=N: the state's count of that kind of bypass) */
#define _GNU_SOURCE
#include <aio.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/aio_abi.h>
#include <linux/io_uring.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mix.h"
#include "statefile.h" /* the device specs a state is built from */

#define WORKERS_PER_PROC 2
#define PROCS 2
#define STEPS 700
#define NFILES 6
#define MAXIO 65536

struct worker {
    int id;
    uint64_t rng;
    char *log;
    size_t len, cap;
    int fd[NFILES];
    int mode[NFILES]; /* O_ACCMODE of the open fd */
    char path[NFILES][64];
    aio_context_t aio; /* its Linux AIO context (0: none) */
};

static uint64_t next(struct worker *w) { return dbt_splitmix64(&w->rng); }

static uint32_t crc32(const unsigned char *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

static void logf_(struct worker *w, const char *fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (w->len + (size_t)n + 1 > w->cap) {
        w->cap = (w->cap + (size_t)n + 1) * 2;
        w->log = realloc(w->log, w->cap);
    }
    memcpy(w->log + w->len, line, (size_t)n);
    w->len += (size_t)n;
}

/* Logs a result: the value and, on failure, errno. Successful calls log no errno (libc may leave
 * any value there), but the interposer must not turn success into failure or change errno on failure. */
#define RES(w, name, r, fail)                                                                      \
    do {                                                                                           \
        int e_ = errno;                                                                            \
        if (fail) logf_(w, "%s %lld errno=%d\n", name, (long long)(r), e_);                       \
        else logf_(w, "%s %lld\n", name, (long long)(r));                                          \
    } while (0)

static void fill(struct worker *w, unsigned char *buf, size_t n) {
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(next(w) >> 56);
}

static int open_flags(uint64_t x) {
    static const int choices[] = {O_RDWR | O_CREAT, O_RDONLY, O_WRONLY | O_CREAT | O_APPEND, O_RDWR | O_CREAT | O_TRUNC,
                                  O_RDWR | O_CREAT | O_EXCL, O_WRONLY | O_CREAT | O_DSYNC, O_RDWR | O_CREAT | O_SYNC};
    return choices[x % (sizeof choices / sizeof choices[0])];
}

static void do_open(struct worker *w, int i, uint64_t x) {
    if (w->fd[i] >= 0) {
        int r = close(w->fd[i]);
        RES(w, "close", r, r != 0);
        w->fd[i] = -1;
    }
    int flags = open_flags(x);
    int r;
    switch ((x >> 8) % 4) {
    case 0: r = open(w->path[i], flags, 0644); break;
    case 1: r = openat(AT_FDCWD, w->path[i], flags, 0644); break;
    case 2: r = open64(w->path[i], flags, 0644); break;
    default: {
        char dir[64];
        strcpy(dir, w->path[i]);
        *strrchr(dir, '/') = '\0';
        int dfd = open(dir, O_RDONLY | O_DIRECTORY);
        r = openat(dfd, strrchr(w->path[i], '/') + 1, flags, 0644);
        int e = errno;
        close(dfd);
        errno = e;
    }
    }
    RES(w, "open", r >= 0 ? 0 : r, r < 0);
    if (r >= 0) {
        w->fd[i] = r;
        w->mode[i] = flags & O_ACCMODE;
    }
}

/* Linux AIO through syscall(), as MariaDB reaps: up to four iocbs of one batch on one file (reads,
 * writes, vectored, an fsync; some refused at submission: a write to a read-only file, an fsync
 * with a buffer), then their events, logged by their tag: the order requests complete in is the
 * device's, not the program's. The alarm storm may interrupt a kernel's wait (EINTR): the reap
 * goes on for what is left. */
static void aio_batch(struct worker *w, int fd, unsigned char *buf, unsigned char *buf2, uint64_t x) {
    if (!w->aio || fd < 0) return;
    struct iocb cb[4], *cbs[4];
    struct iovec iov[4][2];
    int n = 1 + (int)((x >> 8) % 4);
    memset(cb, 0, sizeof cb);
    for (int k = 0; k < n; k++) {
        uint64_t y = next(w);
        size_t len = (size_t)(y % 16384);
        unsigned char *b = (k < 2 ? buf : buf2) + (k % 2) * 16384 * 2;
        static const int codes[] = {IOCB_CMD_PREAD, IOCB_CMD_PWRITE, IOCB_CMD_PREADV, IOCB_CMD_PWRITEV, IOCB_CMD_FDSYNC,
                                    IOCB_CMD_FSYNC};
        cb[k].aio_lio_opcode = (uint16_t)codes[(y >> 16) % 6];
        cb[k].aio_fildes = (uint32_t)fd;
        cb[k].aio_data = (uint64_t)k + 1;
        if (cb[k].aio_lio_opcode == IOCB_CMD_PWRITE || cb[k].aio_lio_opcode == IOCB_CMD_PWRITEV) fill(w, b, len);
        if (cb[k].aio_lio_opcode == IOCB_CMD_PREADV || cb[k].aio_lio_opcode == IOCB_CMD_PWRITEV) {
            iov[k][0] = (struct iovec){b, len / 2};
            iov[k][1] = (struct iovec){b + 16384, len - len / 2};
            cb[k].aio_buf = (uint64_t)(uintptr_t)iov[k];
            cb[k].aio_nbytes = 2;
        } else if (cb[k].aio_lio_opcode == IOCB_CMD_PREAD || cb[k].aio_lio_opcode == IOCB_CMD_PWRITE) {
            cb[k].aio_buf = (uint64_t)(uintptr_t)b;
            cb[k].aio_nbytes = len;
        } else if ((y >> 24) % 8 == 0) {
            cb[k].aio_nbytes = 1; /* an fsync with a length: refused */
        }
        cb[k].aio_offset = (int64_t)((y >> 32) % (256 * 1024));
        cbs[k] = &cb[k];
    }
    long r = syscall(SYS_io_submit, w->aio, n, cbs);
    RES(w, "io_submit", r, r < 0);
    struct io_event ev[4];
    long got = 0;
    while (r > 0 && got < r) {
        long k = syscall(SYS_io_getevents, w->aio, r - got, r - got, ev + got, NULL);
        if (k < 0 && errno == EINTR) continue;
        RES(w, "io_getevents", k, k < 0);
        if (k < 0) break;
        got += k;
    }
    for (long tag = 1; tag <= got; tag++)
        for (long k = 0; k < got; k++) {
            if (ev[k].data != (uint64_t)tag) continue;
            const struct iocb *c = (const struct iocb *)(uintptr_t)ev[k].obj;
            logf_(w, "aio %llu op %u res %lld", (unsigned long long)tag, (unsigned)c->aio_lio_opcode, (long long)ev[k].res);
            if (ev[k].res > 0 && c->aio_lio_opcode == IOCB_CMD_PREAD)
                logf_(w, " crc %08x", crc32((const unsigned char *)(uintptr_t)c->aio_buf, (size_t)ev[k].res));
            logf_(w, "\n");
        }
}

static void one_step(struct worker *w, unsigned char *buf, unsigned char *buf2) {
    uint64_t x = next(w);
    int i = (int)(x % NFILES);
    int fd = w->fd[i];
    size_t n = (size_t)((x >> 16) % MAXIO);
    off_t off = (off_t)((x >> 32) % (256 * 1024));
    ssize_t r;
    int op = (int)((x >> 48) % 28);
    if (fd < 0 && op < 22) op = 0;
    switch (op) {
    case 0: do_open(w, i, x >> 4); break;
    case 1: case 2: r = pread(fd, buf, n, off); RES(w, "pread", r, r < 0); if (r > 0) logf_(w, "crc %08x\n", crc32(buf, (size_t)r)); break;
    case 3: case 4: fill(w, buf, n); r = pwrite(fd, buf, n, off); RES(w, "pwrite", r, r < 0); break;
    case 5: r = read(fd, buf, n); RES(w, "read", r, r < 0); if (r > 0) logf_(w, "crc %08x\n", crc32(buf, (size_t)r)); break;
    case 6: fill(w, buf, n); r = write(fd, buf, n); RES(w, "write", r, r < 0); break;
    case 7: {
        struct iovec iov[3] = {{buf, n / 3}, {buf2, n / 3}, {buf + n / 3, n - 2 * (n / 3)}};
        r = preadv(fd, iov, 3, off);
        RES(w, "preadv", r, r < 0);
        if (r > 0) logf_(w, "crc %08x %08x\n", crc32(buf, n / 3), crc32(buf2, n / 3));
        break;
    }
    case 8: {
        fill(w, buf, n);
        struct iovec iov[2] = {{buf, n / 2}, {buf + n / 2, n - n / 2}};
        r = pwritev(fd, iov, 2, off);
        RES(w, "pwritev", r, r < 0);
        break;
    }
    case 9: {
        struct iovec iov[1] = {{buf, n}};
        r = preadv2(fd, iov, 1, (x & 1) ? -1 : off, 0);
        RES(w, "preadv2", r, r < 0);
        if (r > 0) logf_(w, "crc %08x\n", crc32(buf, (size_t)r));
        break;
    }
    case 10: {
        fill(w, buf, n);
        struct iovec iov[1] = {{buf, n}};
        r = pwritev2(fd, iov, 1, (x & 1) ? -1 : off, 0);
        RES(w, "pwritev2", r, r < 0);
        break;
    }
    case 11: {
        struct iovec iov[2] = {{buf, n / 2}, {buf2, n / 2}};
        r = (x & 1) ? readv(fd, iov, 2) : writev(fd, iov, 2);
        RES(w, (x & 1) ? "readv" : "writev", r, r < 0);
        break;
    }
    case 12: r = (x & 1) ? fsync(fd) : fdatasync(fd); RES(w, "fsync", r, r < 0); break;
    case 13: r = ftruncate(fd, off); RES(w, "ftruncate", r, r < 0); break;
    case 14: r = truncate(w->path[i], off / 2); RES(w, "truncate", r, r < 0); break; /* relative path */
    case 15: r = (x & 1) ? posix_fallocate(fd, off, (off_t)n + 1) : fallocate(fd, 0, off, (off_t)n + 1); RES(w, "fallocate", r, r < 0); break;
    case 16: r = posix_fadvise(fd, off, (off_t)n, (x & 1) ? POSIX_FADV_DONTNEED : 999); RES(w, "fadvise", r, 0); break;
    case 17: r = sync_file_range(fd, off, (off_t)n, SYNC_FILE_RANGE_WRITE); RES(w, "sync_file_range", r, r < 0); break;
    case 18: { /* a duplicate shares the file position */
        int d = dup(fd);
        int d2 = (x & 1) ? dup2(d, d) : d;
        fill(w, buf, 100);
        r = write(d2, buf, 100);
        RES(w, "dup-write", r, r < 0);
        off_t pos = lseek(fd, 0, SEEK_CUR);
        logf_(w, "pos %lld\n", (long long)pos);
        int c = close(d);
        RES(w, "close-dup", c, c < 0);
        break;
    }
    case 19: {
        int j = (i + 1) % NFILES;
        if (w->fd[j] < 0) break;
        off64_t a = off, b = off / 2;
        /* The alarm stays out of this call: Linux's splice fallback stops between pipe fills when a
         * signal is pending, so with the alarm storm a plain run's count is short now and then, and
         * the comparison would judge the host's timing, not the interposer. */
        sigset_t alarm, saved;
        sigemptyset(&alarm);
        sigaddset(&alarm, SIGALRM);
        pthread_sigmask(SIG_BLOCK, &alarm, &saved);
        r = (x & 1) ? copy_file_range(fd, &a, w->fd[j], &b, n, 0) : copy_file_range(fd, NULL, w->fd[j], NULL, n, 0);
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        RES(w, "copy_file_range", r, r < 0);
        if (x & 1) logf_(w, "offs %lld %lld\n", (long long)a, (long long)b);
        break;
    }
    case 20: { off_t p = lseek(fd, off, SEEK_SET); RES(w, "lseek", p, p < 0); break; }
    case 21: r = syncfs(fd); RES(w, "syncfs", r, r < 0); break;
    /* error paths: errno must come through unchanged */
    case 22: r = pread(999999, buf, 10, 0); RES(w, "pread-badf", r, r < 0); break;
    case 23: r = pwrite(w->fd[i] >= 0 ? w->fd[i] : 999999, buf, 10, -5); RES(w, "pwrite-neg", r, r < 0); break;
    case 24: {
        int d = open(w->path[i], O_RDONLY | O_DIRECTORY);
        RES(w, "open-notdir", d, d < 0);
        int e = open("a/nonexistent/file", O_RDONLY);
        RES(w, "open-noent", e, e < 0);
        char dir[64];
        strcpy(dir, w->path[i]);
        *strrchr(dir, '/') = '\0';
        int dfd = open(dir, O_RDONLY | O_DIRECTORY);
        r = read(dfd, buf, 10);
        RES(w, "read-dir", r, r < 0);
        r = fsync(999999);
        RES(w, "fsync-badf", r, r < 0);
        r = posix_fallocate(999999, 0, 10);
        RES(w, "fallocate-badf", r, 0);
        close(dfd);
        break;
    }
    case 26: case 27: aio_batch(w, fd, buf, buf2, x); break;
    default: { /* stdio: invisible to the interposer, but its fclose must not confuse fd tracking */
        FILE *f = fopen(w->path[i], "r");
        if (!f) { RES(w, "fopen", -1, 1); break; }
        size_t got = fread(buf, 1, 1000, f);
        logf_(w, "fread %zu crc %08x\n", got, crc32(buf, got));
        RES(w, "fclose", fclose(f), 0);
        DIR *dir = opendir("b");
        logf_(w, "opendir %d\n", dir != NULL);
        if (dir) closedir(dir);
    }
    }
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    /* zeroed: some writes send buffers no read has filled yet, and their bytes must not depend on the
     * heap's history (which differs under the interposer) */
    unsigned char *buf = calloc(1, MAXIO), *buf2 = calloc(1, MAXIO);
    const char *dirs[NFILES] = {"a", "a", "a", "b", "b", "out"};
    for (int i = 0; i < NFILES; i++) {
        snprintf(w->path[i], sizeof w->path[i], "%s/w%d_f%d", dirs[i], w->id, i);
        w->fd[i] = -1;
    }
    w->aio = 0;
    if (syscall(SYS_io_setup, 16, &w->aio) != 0) w->aio = 0;
    for (int s = 0; s < STEPS; s++) one_step(w, buf, buf2);
    if (w->aio) syscall(SYS_io_destroy, w->aio);
    if (w->id == 0) { /* a fork from a thread: the child's I/O goes through the interposer too */
        pid_t pid = fork();
        if (pid == 0) {
            int fd = open("a/child", O_RDWR | O_CREAT | O_TRUNC, 0644);
            unsigned char b[8192];
            memset(b, 7, sizeof b);
            ssize_t t = 0;
            for (int k = 0; k < 50; k++) t += pwrite(fd, b, sizeof b, k * 8192);
            for (int k = 0; k < 50; k++) t += pread(fd, b, sizeof b, k * 8192);
            fsync(fd);
            close(fd);
            _exit((int)(t % 251));
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) { /* the alarm storm interrupts waits */
        }
        logf_(w, "child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    for (int i = 0; i < NFILES; i++) {
        if (w->fd[i] >= 0) close(w->fd[i]);
        int fd = open(w->path[i], O_RDONLY);
        ssize_t r = fd >= 0 ? pread(fd, buf, MAXIO, 0) : -1;
        struct stat st;
        int sr = stat(w->path[i], &st);
        logf_(w, "final %d %lld size %lld crc %08x\n", i, (long long)r, sr == 0 ? (long long)st.st_size : -1LL,
              r > 0 ? crc32(buf, (size_t)r) : 0u);
        if (fd >= 0) close(fd);
    }
    free(buf);
    free(buf2);
    return NULL;
}

static volatile sig_atomic_t alarms;
static void on_alarm(int sig) {
    (void)sig;
    alarms++;
}

static int run(uint64_t seed, const char *root, const char *logpath) {
    if (chdir(root) != 0) return perror("chdir"), 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* no SA_RESTART: waits inside the interposer see EINTR */
    sigaction(SIGALRM, &sa, NULL);
    pid_t kids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        kids[p] = p == 0 ? 0 : fork();
        if (kids[p] != 0) continue;
        struct itimerval it = {{0, 300}, {0, 300}};
        setitimer(ITIMER_REAL, &it, NULL);
        struct worker w[WORKERS_PER_PROC];
        pthread_t th[WORKERS_PER_PROC];
        memset(w, 0, sizeof w);
        for (int t = 0; t < WORKERS_PER_PROC; t++) {
            w[t].id = p * WORKERS_PER_PROC + t;
            w[t].rng = seed * 1000 + (uint64_t)w[t].id;
            pthread_create(&th[t], NULL, worker_main, &w[t]);
        }
        for (int t = 0; t < WORKERS_PER_PROC; t++) pthread_join(th[t], NULL);
        struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_REAL, &off, NULL);
        /* close_range in a single-threaded moment: a block of fds, one of them a device file */
        int base = open("a/w_range", O_RDWR | O_CREAT, 0644);
        int extra = dup(base);
        int cr = close_range((unsigned)base, (unsigned)extra, 0);
        int after = write(base, "x", 1);
        struct worker fin = {0};
        fin.id = 100 + p;
        logf_(&fin, "close_range %d write-after %d errno=%d\n", cr, after, after < 0 ? errno : 0);
        /* stdio on a device file: what fwrite hands over reads back the same through fread */
        char sname[64], sbuf[40000], sback[40000];
        snprintf(sname, sizeof sname, "b/stdio%d", p);
        for (size_t i = 0; i < sizeof sbuf; i++) sbuf[i] = (char)(i * 7 + (size_t)p);
        FILE *sf = fopen(sname, "w+");
        size_t wrote = fwrite(sbuf, 4, sizeof sbuf / 4, sf);
        int flushed = fflush(sf);
        rewind(sf);
        size_t got = fread(sback, 1, sizeof sback, sf);
        size_t past = fread(sback, 1, 10, sf);
        logf_(&fin, "stdio fwrite %zu fflush %d fread %zu same %d at-eof %zu feof %d\n", wrote, flushed, got,
              memcmp(sbuf, sback, sizeof sbuf) == 0, past, feof(sf) != 0);
        fclose(sf);
        for (int t = 0; t < WORKERS_PER_PROC; t++) {
            char path[4200];
            snprintf(path, sizeof path, "%s.w%d", logpath, w[t].id);
            FILE *f = fopen(path, "w");
            fwrite(w[t].log, 1, w[t].len, f);
            fwrite(fin.log, 1, fin.len, f);
            fclose(f);
            free(w[t].log);
        }
        free(fin.log);
        if (p != 0) _exit(0);
    }
    int status, bad = 0;
    for (int p = 1; p < PROCS; p++) {
        while (waitpid(kids[p], &status, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status)) bad = 1;
    }
    FILE *out = fopen(logpath, "w");
    for (int id = 0; id < PROCS * WORKERS_PER_PROC; id++) {
        char path[4200], chunk[65536];
        snprintf(path, sizeof path, "%s.w%d", logpath, id);
        FILE *f = fopen(path, "r");
        if (!f) return fprintf(stderr, "missing %s\n", path), 2;
        fprintf(out, "== worker %d\n", id);
        size_t got;
        while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, got, out);
        fclose(f);
        unlink(path);
    }
    fclose(out);
    fprintf(stderr, "sequence done (%d alarms in the parent)\n", (int)alarms);
    return bad;
}

/* ---- fds above 2000 ------------------------------------------------------------------------ */

/* A program that raises RLIMIT_NOFILE after the interposer started (here from a soft limit of 1024)
 * and does I/O on a device file's fds above 2000: first in a signal handler (which is where the fd
 * table grows to that fd), then in the main thread, then in threads that start together on fds of
 * one fresh chunk of the table (they race to create it). Every call must be counted: run_semantics
 * checks the totals, HIGHFD_READS and HIGHFD_WRITES each, and one flush. */
#define HIGHFD_MAIN 2345
#define HIGHFD_THREAD 3500
#define HIGHFD_THREADS 4
#define HIGHFD_OPS 5
#define HIGHFD_BLOCK 4096
/* handler 1 + main 10 + threads 4 x 5 */
#define HIGHFD_READS (1 + 10 + HIGHFD_THREADS * HIGHFD_OPS)

static volatile sig_atomic_t highfd_handler_ok;
static pthread_barrier_t highfd_start;

static void *small_stack_thread(void *arg) {
    (void)arg;
    char b[512];
    memset(b, 5, sizeof b);
    return pwrite(HIGHFD_MAIN, b, sizeof b, 0) == (ssize_t)sizeof b ? NULL : (void *)1;
}

static void highfd_on_usr1(int sig) {
    (void)sig;
    static char b[HIGHFD_BLOCK];
    memset(b, 1, sizeof b);
    highfd_handler_ok = pwrite(HIGHFD_MAIN, b, sizeof b, 0) == (ssize_t)sizeof b &&
                        pread(HIGHFD_MAIN, b, sizeof b, 0) == (ssize_t)sizeof b;
}

static void *highfd_thread(void *arg) {
    int fd = HIGHFD_THREAD + (int)(intptr_t)arg, bad = 0;
    char b[HIGHFD_BLOCK];
    memset(b, 2, sizeof b);
    pthread_barrier_wait(&highfd_start);
    for (int i = 0; i < HIGHFD_OPS; i++) {
        off_t off = (off_t)((intptr_t)arg * HIGHFD_OPS + i) * HIGHFD_BLOCK;
        bad |= pwrite(fd, b, sizeof b, off) != (ssize_t)sizeof b;
        bad |= pread(fd, b, sizeof b, off) != (ssize_t)sizeof b;
    }
    return bad ? arg : NULL;
}

static int highfd(const char *root) {
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    if (rl.rlim_max < 4096) rl.rlim_cur = rl.rlim_max = 4096; /* allowed to a privileged process */
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < 4096) {
        printf("SKIP: RLIMIT_NOFILE cannot be raised to 4096 here (%llu)\n", (unsigned long long)rl.rlim_cur);
        return 77;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/a/highfd", root);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, HIGHFD_MAIN) != HIGHFD_MAIN) return perror("open/dup2"), 2;
    close(fd);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = highfd_on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    raise(SIGUSR1);
    int bad = !highfd_handler_ok;
    char b[HIGHFD_BLOCK];
    memset(b, 3, sizeof b);
    for (int i = 0; i < 8; i++) bad |= pwrite(HIGHFD_MAIN, b, sizeof b, (off_t)i * HIGHFD_BLOCK) != (ssize_t)sizeof b;
    for (int i = 0; i < 2; i++) bad |= write(HIGHFD_MAIN, b, sizeof b) != (ssize_t)sizeof b;
    lseek(HIGHFD_MAIN, 0, SEEK_SET);
    for (int i = 0; i < 8; i++) bad |= pread(HIGHFD_MAIN, b, sizeof b, (off_t)i * HIGHFD_BLOCK) != (ssize_t)sizeof b;
    for (int i = 0; i < 2; i++) bad |= read(HIGHFD_MAIN, b, sizeof b) != (ssize_t)sizeof b;
    bad |= fsync(HIGHFD_MAIN) != 0;
    pthread_t th[HIGHFD_THREADS];
    pthread_barrier_init(&highfd_start, NULL, HIGHFD_THREADS);
    for (intptr_t t = 0; t < HIGHFD_THREADS; t++) {
        bad |= dup2(HIGHFD_MAIN, HIGHFD_THREAD + (int)t) < 0;
        pthread_create(&th[t], NULL, highfd_thread, (void *)t);
    }
    for (int t = 0; t < HIGHFD_THREADS; t++) {
        void *r;
        pthread_join(th[t], &r);
        bad |= r != NULL;
        close(HIGHFD_THREAD + t);
    }
    /* A thread given the least stack: the interposer's thread-local storage comes out of it, so it
     * must be small (MariaDB's timer thread has 64 KiB), and the thread's I/O is emulated there too. */
    pthread_attr_t small;
    pthread_attr_init(&small);
    pthread_attr_setstacksize(&small, PTHREAD_STACK_MIN);
    pthread_t tiny;
    int made = pthread_create(&tiny, &small, small_stack_thread, NULL);
    if (made != 0) printf("highfd: a thread of %d bytes of stack could not be made: %s\n", (int)PTHREAD_STACK_MIN,
                          strerror(made));
    bad |= made != 0;
    if (made == 0) {
        void *r;
        pthread_join(tiny, &r);
        bad |= r != NULL;
    }
    pthread_attr_destroy(&small);
    close(HIGHFD_MAIN);
    printf("highfd: %d reads and writes each on fds %d and %d..%d, limit %llu: %s\n", HIGHFD_READS, HIGHFD_MAIN,
           HIGHFD_THREAD, HIGHFD_THREAD + HIGHFD_THREADS - 1, (unsigned long long)rl.rlim_cur, bad ? "FAILED" : "ok");
    return bad;
}

/* Starts highfd from a soft limit of 1024, so that the interposer starts with that limit too. */
static int highfd_from_1024(const char *self, const char *root) {
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur > 1024) rl.rlim_cur = 1024;
    setrlimit(RLIMIT_NOFILE, &rl);
    execl(self, self, "highfd-run", root, (char *)NULL);
    perror("exec");
    return 2;
}

/* ---- bypasses ---------------------------------------------------------------------------------- */

struct reaper {
    aio_context_t ctx;
    long got;
    struct io_event ev[1];
};

static void *reaper_main(void *arg) {
    struct reaper *rp = arg;
    struct timespec limit = {10, 0}; /* never reached, unless the submission is lost */
    rp->got = syscall(SYS_io_getevents, rp->ctx, 1, 1, rp->ev, &limit);
    return NULL;
}

/* Each call here works on a device file (a/), on another file (out/), or starts a program. The log
 * holds every result, errno and checksum, and must be the same plainly and interposed; interposed,
 * run_semantics checks that each kind of bypass was counted exactly as often as it happened on a
 * device file (BYPASS_EXPECT): a call on another file, anonymous memory, a failed call, or a program
 * started with the interposer in its environment counts nothing. */
#define BP_BYTES 65536

/* a call's result and errno, read straight after it */
#define TRY(w, name, expr)                                                                         \
    do {                                                                                           \
        long long r_ = (long long)(expr);                                                          \
        int e_ = errno;                                                                            \
        if (r_ < 0) logf_(w, "%s %lld errno=%d\n", name, r_, e_);                                \
        else logf_(w, "%s %lld\n", name, r_);                                                     \
    } while (0)

static void log_buf(struct worker *w, const char *what, const void *p, size_t n) {
    logf_(w, "%s crc %08x\n", what, crc32(p, n));
}

static void log_map(struct worker *w, const char *what, void *m, size_t n) {
    if (m == MAP_FAILED) {
        RES(w, what, -1, 1);
        return;
    }
    log_buf(w, what, m, n);
    munmap(m, n);
}

/* a child that runs `how` and exits with its status (127: the start failed) */
static int spawn_status(struct worker *w, const char *what, int how, char *const env[]) {
    char *argv[] = {"true", NULL};
    pid_t pid = fork();
    if (pid == 0) {
        switch (how) {
        case 0: execv("/bin/true", argv); break;
        case 1: execvp("true", argv); break;
        case 2: execl("/bin/true", "true", (char *)NULL); break;
        case 3: execlp("true", "true", (char *)NULL); break;
        case 4: execle("/bin/true", "true", (char *)NULL, env); break;
        case 5: execve("/bin/true", argv, env); break;
        case 6: execvpe("true", argv, env); break;
        }
        _exit(127);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    logf_(w, "%s exit %d\n", what, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return status;
}

static int bypass(const char *root, const char *logpath) {
    if (chdir(root) != 0) return perror("chdir"), 2;
    struct worker w = {0};
    unsigned char *data = malloc(BP_BYTES), *back = malloc(BP_BYTES);
    for (size_t i = 0; i < BP_BYTES; i++) data[i] = (unsigned char)(i * 31 + 7);
    int dev = open("a/bp", O_RDWR | O_CREAT | O_TRUNC, 0644), other = open("out/bp", O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (dev < 0 || other < 0) return perror("open"), 2;
    TRY(&w, "pwrite dev", pwrite(dev, data, BP_BYTES, 0));
    TRY(&w, "pwrite other", pwrite(other, data, BP_BYTES, 0));

    /* mmap: 3 device maps (read-only, shared and written, mmap64); none of the rest counts */
    log_map(&w, "mmap dev ro", mmap(NULL, BP_BYTES, PROT_READ, MAP_PRIVATE, dev, 0), BP_BYTES);
    unsigned char *m = mmap(NULL, BP_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, dev, 0);
    if (m != MAP_FAILED) {
        memset(m + 100, 0xab, 1000);
        msync(m, BP_BYTES, MS_SYNC);
    }
    log_map(&w, "mmap dev shared", m, BP_BYTES);
    TRY(&w, "pread after map", pread(dev, back, BP_BYTES, 0));
    log_buf(&w, "written through the map", back, BP_BYTES);
    log_map(&w, "mmap64 dev", mmap64(NULL, 8192, PROT_READ, MAP_SHARED, dev, 8192), 8192);
    log_map(&w, "mmap other", mmap(NULL, BP_BYTES, PROT_READ, MAP_PRIVATE, other, 0), BP_BYTES);
    void *anon = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    log_map(&w, "mmap anon", anon, 1 << 20);
    log_map(&w, "mmap dev odd offset", mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, dev, 3), 4096);
    log_map(&w, "mmap bad fd", mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, 999999, 0), 4096);
    log_map(&w, "mmap dev write-only fd", mmap(NULL, 4096, PROT_READ, MAP_SHARED, open("a/bp", O_WRONLY), 0), 4096);

    /* splice: one from the device file into a pipe; one from the other file */
    int p[2];
    if (pipe(p) != 0) return perror("pipe"), 2;
    loff_t off = 4096;
    ssize_t r = splice(dev, &off, p[1], NULL, 4096, 0);
    RES(&w, "splice dev", r, r < 0);
    TRY(&w, "pipe read", read(p[0], back, 4096));
    log_buf(&w, "spliced", back, 4096);
    off = 0;
    r = splice(other, &off, p[1], NULL, 4096, 0);
    RES(&w, "splice other", r, r < 0);
    TRY(&w, "pipe read", read(p[0], back, 4096));
    r = splice(999999, NULL, p[1], NULL, 10, 0);
    RES(&w, "splice bad fd", r, r < 0);
    close(p[0]);
    close(p[1]);

    /* sendfile: one from the device file (to a file outside), one between other files */
    off_t soff = 0;
    r = sendfile(other, dev, &soff, 4096);
    RES(&w, "sendfile dev", r, r < 0);
    logf_(&w, "sendfile offset %lld\n", (long long)soff);
    int null = open("/dev/null", O_WRONLY);
    r = sendfile(null, other, NULL, 4096);
    RES(&w, "sendfile other", r, r < 0);
    r = sendfile64(null, 999999, NULL, 10);
    RES(&w, "sendfile bad fd", r, r < 0);
    close(null);

    /* libaio's calls, made through syscall() as a program without libaio makes them: one read (emulated) */
    aio_context_t ctx = 0;
    long k = syscall(SYS_io_setup, 8, &ctx);
    RES(&w, "io_setup", k, k < 0);
    if (k == 0) {
        struct iocb cb = {0}, *cbs[1] = {&cb};
        cb.aio_lio_opcode = IOCB_CMD_PREAD;
        cb.aio_fildes = (uint32_t)dev;
        cb.aio_buf = (uint64_t)(uintptr_t)back;
        cb.aio_nbytes = 8192;
        cb.aio_offset = 16384;
        k = syscall(SYS_io_submit, ctx, 1, cbs);
        RES(&w, "io_submit", k, k < 0);
        struct io_event ev[1];
        k = syscall(SYS_io_getevents, ctx, 1, 1, ev, NULL);
        logf_(&w, "io_getevents %ld res %lld\n", k, k == 1 ? (long long)ev[0].res : -1LL);
        log_buf(&w, "aio read", back, 8192);
        /* one that asks to be told through an eventfd: the emulation does not notify, so it goes to the
         * kernel, a bypass (the read above is emulated: not one) */
        int efd = (int)syscall(SYS_eventfd2, 0, 0);
        cb.aio_flags = IOCB_FLAG_RESFD;
        cb.aio_resfd = (uint32_t)efd;
        k = syscall(SYS_io_submit, ctx, 1, cbs);
        RES(&w, "io_submit resfd", k, k < 0);
        k = syscall(SYS_io_getevents, ctx, 1, 1, ev, NULL);
        logf_(&w, "io_getevents %ld res %lld\n", k, k == 1 ? (long long)ev[0].res : -1LL);
        close(efd);
        cb.aio_flags = 0;
        cb.aio_fildes = 999999; /* refused by the kernel: not a bypass */
        k = syscall(SYS_io_submit, ctx, 1, cbs);
        RES(&w, "io_submit bad fd", k, k < 0);
        syscall(SYS_io_destroy, ctx);
    }

    /* A reaper that waits before anything is in flight (MariaDB's does, from its start): a request
     * submitted later must still end its wait, emulated or not */
    aio_context_t ctx2 = 0;
    if (syscall(SYS_io_setup, 8, &ctx2) == 0) {
        struct reaper rp = {ctx2, 0, {{0}}};
        pthread_t th;
        pthread_create(&th, NULL, reaper_main, &rp);
        usleep(20000); /* the reaper is in io_getevents by now */
        struct iocb cb = {0}, *cbs[1] = {&cb};
        cb.aio_lio_opcode = IOCB_CMD_PREAD;
        cb.aio_fildes = (uint32_t)dev;
        cb.aio_buf = (uint64_t)(uintptr_t)back;
        cb.aio_nbytes = 8192;
        cb.aio_offset = 8192;
        k = syscall(SYS_io_submit, ctx2, 1, cbs);
        RES(&w, "io_submit to a waiting reaper", k, k < 0);
        pthread_join(th, NULL);
        logf_(&w, "reaper io_getevents %ld res %lld\n", rp.got, rp.got == 1 ? (long long)rp.ev[0].res : -1LL);
        log_buf(&w, "reaped read", back, 8192);
        syscall(SYS_io_destroy, ctx2);
    }

    /* POSIX AIO: one read of the device file, one of the other */
    for (int which = 0; which < 2; which++) {
        struct aiocb a = {0};
        a.aio_fildes = which ? other : dev;
        a.aio_buf = back;
        a.aio_nbytes = 4096;
        a.aio_offset = 12288;
        int e = aio_read(&a);
        RES(&w, which ? "aio_read other" : "aio_read dev", e, e < 0);
        const struct aiocb *list[1] = {&a};
        while (e == 0 && aio_error(&a) == EINPROGRESS) aio_suspend(list, 1, NULL);
        logf_(&w, "aio_return %zd\n", aio_return(&a));
        log_buf(&w, "aio data", back, 4096);
    }

    /* io_uring: what its setup answers must not change (run_semantics counts it when it succeeded) */
    struct io_uring_params up;
    memset(&up, 0, sizeof up);
    long ring = syscall(SYS_io_uring_setup, 4, &up);
    logf_(&w, "io_uring_setup %s\n", ring >= 0 ? "ok" : "refused");
    if (ring >= 0) close((int)ring);

    /* the exec family: the same errno for a program that cannot start */
    char *argv[] = {"x", NULL}, *none[] = {NULL};
    TRY(&w, "execv missing", execv("./no-such-program", argv));
    TRY(&w, "execve missing", execve("no/such/program", argv, environ));
    TRY(&w, "execvp missing", execvp("dbtier-no-such-program", argv));
    TRY(&w, "execvpe missing", execvpe("dbtier-no-such-program", argv, none));
    TRY(&w, "execl missing", execl("./no-such-program", "x", (char *)NULL));
    TRY(&w, "execlp missing", execlp("dbtier-no-such-program", "x", (char *)NULL));
    TRY(&w, "execle missing", execle("./no-such-program", "x", (char *)NULL, environ));
    TRY(&w, "execveat missing", execveat(AT_FDCWD, "no-such-program", argv, environ, 0));
    TRY(&w, "execv folder", execv("a", argv));
    TRY(&w, "execv not executable", execv("a/bp", argv));
    TRY(&w, "fexecve bad fd", fexecve(-1, argv, environ));
    TRY(&w, "fexecve not executable", fexecve(dev, argv, environ));
    pid_t pid;
    TRY(&w, "posix_spawn missing", posix_spawn(&pid, "./no-such-program", NULL, NULL, argv, environ));
    TRY(&w, "posix_spawnp missing", posix_spawnp(&pid, "dbtier-no-such-program", NULL, NULL, argv, environ));

    /* and programs that start: each variant with the environment as it is (no bypass) ... */
    static const char *how[] = {"execv", "execvp", "execl", "execlp", "execle", "execve", "execvpe"};
    for (int i = 0; i < 7; i++) spawn_status(&w, how[i], i, environ);
    char *true_argv[] = {"true", NULL};
    int e = posix_spawnp(&pid, "true", NULL, NULL, true_argv, environ);
    int status = -1;
    if (e == 0) waitpid(pid, &status, 0);
    logf_(&w, "posix_spawnp %d exit %d\n", e, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    /* ... and two without the interposer's variables: an empty environment, and one without LD_PRELOAD */
    spawn_status(&w, "execve empty env", 5, none);
    char *kept[256];
    int nk = 0;
    for (char **v = environ; *v && nk < 255; v++)
        if (strncmp(*v, "LD_PRELOAD=", 11)) kept[nk++] = *v;
    kept[nk] = NULL;
    e = posix_spawn(&pid, "/bin/true", NULL, NULL, true_argv, kept);
    status = -1;
    if (e == 0) waitpid(pid, &status, 0);
    logf_(&w, "posix_spawn without LD_PRELOAD %d exit %d\n", e, WIFEXITED(status) ? WEXITSTATUS(status) : -1);

    close(dev);
    close(other);
    free(data);
    free(back);
    FILE *f = fopen(logpath, "w");
    if (!f) return perror(logpath), 2;
    fwrite(w.log, 1, w.len, f);
    fclose(f);
    free(w.log);
    return 0;
}

/* ---- checks ---------------------------------------------------------------------------------- */

static void *sim(const char *lib, const char *sym) {
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        exit(2);
    }
    return dlsym(h, sym);
}

/* Two emulated devices under root (a RAM device at a/, an SSD at b/), as Python builds them: specs
 * of the kinds' defaults, a few parameters set by name; with_pc: a page cache of 64 pages, so that
 * eviction and writeback run often. */
static int mkstate(const char *lib, const char *root, const char *state, int with_pc) {
    int (*init)(struct dbt_device_spec *, const char *, const char *, const char *, char *, size_t) =
        sim(lib, "dbt_device_spec_init");
    int (*set)(struct dbt_device_spec *, const char *, double, char *, size_t) = sim(lib, "dbt_device_spec_set");
    int (*create)(const char *, uint32_t, const struct dbt_device_spec *, uint32_t, const struct dbt_pc_config *,
                  char *, size_t) = sim(lib, "dbt_create_state");
    static const struct {
        const char *name, *kind;
        struct {
            const char *name;
            double value;
        } params[4];
    } devs[2] = {
        {"a", "ram", {{"latency_us", 20}, {"interface_mb_s", 2000}}},
        {"b", "ssd", {{"read_latency_us", 15}, {"write_latency_us", 5}, {"channels", 2}, {"flush_ms", 0.05}}},
    };
    struct dbt_device_spec specs[2];
    char dir[4096], err[512];
    for (int i = 0; i < 2; i++) {
        snprintf(dir, sizeof dir, "%s/%s", root, devs[i].name);
        if (init(&specs[i], devs[i].name, devs[i].kind, dir, err, sizeof err) != 0)
            return fprintf(stderr, "%s\n", err), 2;
        for (int k = 0; k < 4 && devs[i].params[k].name; k++)
            if (set(&specs[i], devs[i].params[k].name, devs[i].params[k].value, err, sizeof err) != 0)
                return fprintf(stderr, "%s\n", err), 2;
    }
    const struct dbt_pc_config pc = {262144, 32, 10, 20, 0};
    if (create(state, DBT_SPEC_VERSION, specs, 2, with_pc ? &pc : NULL, err, sizeof err) != 0)
        return fprintf(stderr, "%s\n", err), 2;
    /* the durability log kept, for the runs given its folder (DBTIER_IOTAP_DURLOG) */
    int (*durlog)(const char *, int, char *, size_t) = sim(lib, "dbt_set_durlog");
    if (durlog(state, 1, err, sizeof err) != 0) return fprintf(stderr, "%s\n", err), 2;
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "run") == 0) return run(strtoull(argv[2], NULL, 10), argv[3], argv[4]);
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "mkstate") == 0) return mkstate(argv[2], argv[3], argv[4], argc == 6);
    if (argc == 4 && strcmp(argv[1], "check") == 0) {
        char *(*dump)(const char *, char *, size_t) = sim(argv[2], "dbt_dump_state");
        char err[512];
        char *json = dump(argv[3], err, sizeof err);
        if (!json) return fprintf(stderr, "%s\n", err), 2;
        /* each device entry has "reads":N,"writes":N,"flushes":N with N > 0 */
        int ok = 1, devices = 0;
        for (char *p = strstr(json, "\"reads\":"); p; p = strstr(p + 1, "\"reads\":")) {
            long long rd = 0, wr = 0, fl = 0;
            sscanf(p, "\"reads\":%lld,\"writes\":%lld,\"flushes\":%lld", &rd, &wr, &fl);
            printf("device %d: reads %lld writes %lld flushes %lld\n", devices, rd, wr, fl);
            if (rd <= 0 || wr <= 0 || fl <= 0) ok = 0;
            devices++;
        }
        free(json);
        return ok && devices == 2 ? 0 : 1;
    }
    if (argc == 4 && strcmp(argv[1], "bypass") == 0) return bypass(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "highfd") == 0) return highfd_from_1024("/proc/self/exe", argv[2]);
    if (argc == 3 && strcmp(argv[1], "highfd-run") == 0) return highfd(argv[2]);
    if (argc >= 5 && strcmp(argv[1], "counts") == 0) {
        char *(*dump)(const char *, char *, size_t) = sim(argv[2], "dbt_dump_state");
        char err[512];
        char *json = dump(argv[3], err, sizeof err);
        if (!json) return fprintf(stderr, "%s\n", err), 2;
        int ok = 1;
        for (int i = 4; i < argc; i++) {
            char key[128];
            long long want, got = -1;
            int devno = -1;
            int kind = 0;
            if (sscanf(argv[i], "bypass.%127[a-z_]=%lld", key, &want) == 2) kind = 1;
            else if (sscanf(argv[i], "dev%d.%127[a-z_]=%lld", &devno, key, &want) != 3 &&
                     sscanf(argv[i], "%127[a-z_]=%lld", key, &want) != 2)
                return fprintf(stderr, "bad check '%s'\n", argv[i]), 2;
            char *at = json;
            if (devno >= 0) { /* device N's object starts at the N+1-th "name" */
                at = strstr(json, "\"devices\":[");
                for (int d = 0; at && d <= devno; d++) at = strstr(at + 1, "{\"name\":");
            }
            char pat[160];
            snprintf(pat, sizeof pat, kind ? "\"%s\":{\"count\":" : "\"%s\":", key);
            char *p = at ? strstr(at, pat) : NULL;
            if (p) sscanf(p + strlen(pat), "%lld", &got);
            printf("%s: %lld (expected %lld)\n", argv[i], got, want);
            if (got != want) ok = 0;
        }
        free(json);
        return ok ? 0 : 1;
    }
    if (argc == 3 && strcmp(argv[1], "tracefiles") == 0) {
        DIR *d = opendir(argv[2]);
        if (!d) return perror(argv[2]), 2;
        int n = 0, bad = 0;
        for (struct dirent *e; (e = readdir(d));) {
            if (strncmp(e->d_name, "iotap-", 6) != 0) continue;
            struct stat st;
            if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
                (st.st_mode & 07777) != 0600) {
                fprintf(stderr, "%s/%s is not a regular file of mode 0600\n", argv[2], e->d_name);
                bad = 1;
            }
            n++;
        }
        closedir(d);
        printf("%d trace files\n", n);
        return bad;
    }
    fprintf(stderr, "usage: see the comment at the top of test_semantics.c\n");
    return 2;
}
