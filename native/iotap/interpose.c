/* iotap: the LD_PRELOAD interposer.
 *
 * For each intercepted call on a file under an emulated device: do the real call, ask the device
 * model when the request would have completed, wait until then, count it and trace it. Calls on
 * other files, and every call made while iotap itself is working (recursion guard), go straight to
 * libc. Return values and errno are those of the real call, always. */
#define _GNU_SOURCE
#include <aio.h>
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/aio_abi.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "aioq.h"
#include "durlog.h"
#include "emulate.h"
#include "state.h"
#include "trace.h"

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- real symbols ------------------------------------------------------------------------- */

#define CALL(category, ret, name, params, ...) static ret(*real_##name) params;
#include "calls.def"
#undef CALL

static __thread int tl_guard __attribute__((tls_model("initial-exec")));
static __thread int tl_resolving __attribute__((tls_model("initial-exec")));
static __thread uint32_t tl_tid __attribute__((tls_model("initial-exec"))); /* 0: not yet asked */
/* CPU time dilation: the thread's CPU clock when it last left an interposed call (0: none yet) */
static __thread uint64_t tl_cpu_mark __attribute__((tls_model("initial-exec")));

/* A system call made here, not through libc's syscall(), which this library wraps: usable before
 * any real symbol is resolved (mmap is called by libc, ld.so and other constructors before ours runs,
 * and inside dlsym), in a signal handler and in a vfork child. -1 with errno, as libc's. */
#if defined(__x86_64__) || defined(__aarch64__)
#define KERNEL_CALL_OWN 1
#else
#define KERNEL_CALL_OWN 0
#endif
static long kernel_call(long n, long a, long b, long c, long d, long e, long f) {
#if defined(__x86_64__)
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long r;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory", "cc");
    long r = x0;
#else /* elsewhere libc's, through our wrapper: resolved in all but the earliest calls */
    return syscall(n, a, b, c, d, e, f);
#endif
#if defined(__x86_64__) || defined(__aarch64__)
    if ((unsigned long)r > -4096ul) {
        errno = (int)-r;
        return -1;
    }
    return r;
#endif
}

static uint32_t thread_id(void) { /* gettid is a syscall: ask once per thread */
    if (UNLIKELY(!tl_tid)) tl_tid = (uint32_t)kernel_call(SYS_gettid, 0, 0, 0, 0, 0, 0);
    return tl_tid;
}

static void resolve(void **slot, const char *name) {
    if (tl_resolving) return; /* dlsym re-entered us: the caller fails with ENOSYS, once */
    tl_resolving = 1;
    void *p = dlsym(RTLD_NEXT, name);
    if (p) __atomic_store_n(slot, p, __ATOMIC_RELEASE);
    tl_resolving = 0;
}

/* Every wrapper begins here: the real symbol found, and (with CPU dilation on) the thread's CPU time
 * since its last interposed call charged before this call takes effect. */
#define ENSURE(name, fail)                                                                         \
    do {                                                                                           \
        ENSURE_REAL(name, fail);                                                                   \
        if (UNLIKELY(g_cpu_excess > 0.0)) cpu_dilate();                                            \
    } while (0)

/* The real symbol alone, no CPU charge: for calls a vfork child makes (exec), whose thread-local
 * CPU mark is its parent's. */
#define ENSURE_REAL(name, fail)                                                                    \
    do {                                                                                           \
        if (UNLIKELY(!real_##name)) {                                                              \
            resolve((void **)&real_##name, #name);                                                 \
            if (!real_##name) {                                                                    \
                errno = ENOSYS;                                                                    \
                return fail;                                                                       \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* ---- run state ---------------------------------------------------------------------------- */

static struct dbt_state *g_state;
/* A slower CPU (DBTIER_IOTAP_CPU_SCALE = K): K - 1; 0 leaves the program's CPU time as it is. */
static double g_cpu_excess;
static uint32_t g_pid;
static uint64_t g_spin_ns = 20000; /* DBTIER_IOTAP_SPIN_NS overrides */

#define FD_RESOLVED (1ull << 63)
#define FD_NONE (1ull << 62) /* resolved: not under any device */
#define FD_UNTRACKED (FD_NONE | 1) /* beyond the fd table: not cached anywhere, counted per call */
#define FD_URING (1ull << 61)      /* with FD_NONE: an io_uring instance (its rings are mapped from it) */
#define FD_DEV(e) ((int)(((e) >> 32) & 0xff))
#define FD_FILE(e) ((int64_t)((e)&0xffffffffu) - 1)
#define FD_FLAGS(e) ((uint8_t)(((e) >> 40) & 0xff))

/* ---- the fd table ------------------------------------------------------------------------- */

/* Per fd: 0 = not yet resolved, else FD_RESOLVED | .... A program may raise RLIMIT_NOFILE after we
 * start, so nothing is sized up front: a fixed array of pointers to chunks of FDTAB_CHUNK entries,
 * each chunk mmap'd at the first I/O on one of its fds and installed with a compare-and-swap (the
 * loser unmaps its own), never freed. A lookup is two loads and no lock; mmap, munmap and the CAS
 * are async-signal-safe, so a signal handler may be the one that grows it; a fork's child gets a
 * copy (MAP_PRIVATE), as it gets the fds. */
#define FDTAB_CHUNK_BITS 10
#define FDTAB_CHUNK (1u << FDTAB_CHUNK_BITS)
#define FDTAB_REACH (1u << 24)
#define FDTAB_CHUNK_BYTES (FDTAB_CHUNK * sizeof(uint64_t))

static _Atomic uint64_t *_Atomic g_fdchunks[FDTAB_REACH / FDTAB_CHUNK];
static uint32_t g_fd_reach = FDTAB_REACH; /* DBTIER_IOTAP_FD_REACH lowers it, to test what lies beyond */

/* The fd's entry if its chunk exists; NULL for a negative fd (it wraps to a huge index) too. */
static inline _Atomic uint64_t *fd_slot(int fd) {
    uint32_t u = (uint32_t)fd;
    if (UNLIKELY(u >= FDTAB_REACH)) return NULL;
    _Atomic uint64_t *chunk = atomic_load_explicit(&g_fdchunks[u >> FDTAB_CHUNK_BITS], memory_order_acquire);
    return chunk ? &chunk[u & (FDTAB_CHUNK - 1)] : NULL;
}

static _Atomic uint64_t *fdtab_chunk(uint32_t c) {
    _Atomic uint64_t *chunk = atomic_load_explicit(&g_fdchunks[c], memory_order_acquire);
    if (chunk) return chunk;
    void *m = mmap(NULL, FDTAB_CHUNK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    if (atomic_compare_exchange_strong_explicit(&g_fdchunks[c], &chunk, (_Atomic uint64_t *)m, memory_order_acq_rel,
                                                memory_order_acquire))
        return m;
    munmap(m, FDTAB_CHUNK_BYTES); /* another thread (or a signal handler) installed one first */
    return chunk;
}

/* The fd's entry, growing the table to it; NULL beyond the table's reach or without memory. */
static _Atomic uint64_t *fd_slot_grow(int fd) {
    uint32_t u = (uint32_t)fd;
    if (u >= g_fd_reach) return NULL;
    _Atomic uint64_t *chunk = fdtab_chunk(u >> FDTAB_CHUNK_BITS);
    return chunk ? &chunk[u & (FDTAB_CHUNK - 1)] : NULL;
}

static void fd_forget(int fd) {
    _Atomic uint64_t *slot = fd_slot(fd);
    if (slot) atomic_store_explicit(slot, 0, memory_order_relaxed);
}

static void fd_forget_range(unsigned int first, unsigned int last) {
    if (first >= FDTAB_REACH || first > last) return;
    if (last >= FDTAB_REACH) last = FDTAB_REACH - 1;
    for (uint32_t c = first >> FDTAB_CHUNK_BITS; c <= last >> FDTAB_CHUNK_BITS; c++) {
        _Atomic uint64_t *chunk = atomic_load_explicit(&g_fdchunks[c], memory_order_acquire);
        if (!chunk) continue;
        uint32_t lo = c == first >> FDTAB_CHUNK_BITS ? first & (FDTAB_CHUNK - 1) : 0;
        uint32_t hi = c == last >> FDTAB_CHUNK_BITS ? last & (FDTAB_CHUNK - 1) : FDTAB_CHUNK - 1;
        for (uint32_t i = lo; i <= hi; i++) atomic_store_explicit(&chunk[i], 0, memory_order_relaxed);
    }
}

/* Straight to the kernel: usable in a constructor, a signal handler, or with our own wrappers unset. */
static void raw_write(int fd, const char *msg, size_t n) { (void)kernel_call(SYS_write, fd, (long)msg, (long)n, 0, 0, 0); }

/* A hint to the CPU inside a spin loop; where there is none, a compiler barrier keeps the loop honest. */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#elif defined(__powerpc__) || defined(__powerpc64__)
    __asm__ __volatile__("or 27,27,27" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* An fd beyond the table's reach (or the table could not grow): its I/O cannot be classified, so it
 * passes through, but never silently: it is counted in the state, and the process says so once. */
static void count_untracked(int fd) {
    static _Atomic int warned;
    if (atomic_load_explicit(&g_state->paused, memory_order_relaxed)) return;
    atomic_fetch_add_explicit(&g_state->untracked_calls, 1, memory_order_relaxed);
    if (atomic_exchange(&warned, 1)) return;
    char msg[320];
    int n = snprintf(msg, sizeof msg,
                     "dbtier-iotap: pid %u: fd %d is beyond what the interposer can track (%u fds, or no memory for "
                     "more): I/O on such fds is not emulated, only counted as untracked_calls\n",
                     g_pid, fd, g_fd_reach);
    if (n > 0) raw_write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
}

/* What device, file and open flags an fd has; resolved from /proc/self/fd at its first I/O. */
static uint64_t fd_resolve(int fd) {
    _Atomic uint64_t *slot = fd_slot_grow(fd);
    if (UNLIKELY(!slot)) return FD_UNTRACKED;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    uint64_t e = FD_RESOLVED | FD_NONE;
    if (n > 0) path[n] = '\0';
    if (n > 0 && !strcmp(path, "anon_inode:[io_uring]")) e |= FD_URING;
    if (n > 0 && path[0] == '/') {
        int dev = dbt_state_device_for_path(g_state, path);
        struct stat st;
        if (dev >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
            int64_t file = dbt_state_file_index(g_state, dev, (uint64_t)st.st_dev, (uint64_t)st.st_ino, path,
                                                (uint64_t)st.st_size);
            int fl = fcntl(fd, F_GETFL);
            uint64_t flags = 0;
            if (fl >= 0 && (fl & O_DIRECT)) flags |= DBT_TF_DIRECT;
            if (fl >= 0 && (fl & O_DSYNC)) flags |= DBT_TF_DSYNC; /* O_SYNC includes O_DSYNC */
            e = FD_RESOLVED | (flags << 40) | ((uint64_t)dev << 32) | (uint64_t)(file + 1);
        }
    }
    atomic_store_explicit(slot, e, memory_order_relaxed);
    return e;
}

/* The fd's entry, resolved at its first sight; FD_NONE outside a run, inside iotap, or for a bad fd. */
static inline uint64_t fd_entry(int fd) {
    if (!g_state || tl_guard) return FD_NONE;
    _Atomic uint64_t *slot = fd_slot(fd);
    uint64_t v = LIKELY(slot != NULL) ? atomic_load_explicit(slot, memory_order_relaxed) : 0;
    if (UNLIKELY(!v)) {
        if (fd < 0) return FD_NONE;
        tl_guard++;
        int saved = errno; /* the lookup's own failures (readlink, mmap) must not show in the call's errno */
        v = fd_resolve(fd);
        if (v == FD_UNTRACKED) count_untracked(fd);
        errno = saved;
        tl_guard--;
    }
    return v;
}

/* Is this fd's I/O ours to emulate? Fills *e on yes. */
static inline int tracked(int fd, uint64_t *e) {
    uint64_t v = fd_entry(fd);
    if (v & FD_NONE) return 0;
    *e = v;
    return 1;
}

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleeps to an absolute time. A timed sleep wakes late by the host's wake-up delay: a few us on
 * bare metal, 20-60 us on some VMs (measured: a 100 us sleep with a timer slack of 1 ns woke 40 us
 * late at the median on a Firecracker guest). So the wait sleeps to `lead` before the completion
 * and spins the rest. `lead` is measured when the run's state is made and learnt on as the run goes,
 * in the state all its processes share: it tracks the 90th percentile of the wake-ups' delays (plus
 * a margin), never less than g_spin_ns. A long sleep on a VM sometimes wakes a whole tick late, so
 * it first ends well early (EARLY_NS) and a second, short sleep from an awake CPU gets close.
 * Spinning is CPU time charged to the program (and reported): it stays as short as the host allows. */
#define EARLY_NS 150000ull
#define LEAD_MAX_NS 2000000ull
#define LEAD_STEP_NS 250ull
#define LEAD_MARGIN_NS 3000ull

static void sleep_until(uint64_t t) {
    struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* One observed wake-up delay moves the estimate: up 9 steps when above it, down 1 when below, so
 * it settles where 10% of the delays are above it. */
static void learn_wake_delay(uint64_t delay) { /* racy updates among processes are harmless */
    uint64_t est = atomic_load_explicit(&g_state->wake_p90_ns, memory_order_relaxed);
    if (delay > est) est = est + 9 * LEAD_STEP_NS < LEAD_MAX_NS ? est + 9 * LEAD_STEP_NS : LEAD_MAX_NS;
    else if (est > LEAD_STEP_NS) est -= LEAD_STEP_NS;
    atomic_store_explicit(&g_state->wake_p90_ns, est, memory_order_relaxed);
}

/* Returns the CPU time spent spinning, which the program would not spend on a real device: read
 * from the thread's CPU clock, since a spinning thread preempted on a busy machine spends wall time
 * that is not its CPU (counted as wall time, 4 backends spinning on 2 CPUs "spun" 116 s in 60).
 * *end: when the wait ended, read before the CPU clock's own cost. */
static uint64_t wait_until(uint64_t target, uint64_t *end) {
    uint64_t now = *end = now_ns();
    if (now >= target) return 0;
    uint64_t lead = atomic_load_explicit(&g_state->wake_p90_ns, memory_order_relaxed) + LEAD_MARGIN_NS;
    if (lead < g_spin_ns) lead = g_spin_ns;
    if (target - now > EARLY_NS + 2 * lead) {
        sleep_until(target - EARLY_NS - lead);
        now = now_ns();
    }
    if (now < target && target - now > lead) {
        uint64_t wake = target - lead;
        sleep_until(wake);
        now = now_ns();
        learn_wake_delay(now > wake ? now - wake : 0);
    }
    if (now >= target) {
        *end = now;
        return 0;
    }
    /* Spinning holds a CPU, which a process waiting on a real device gives up: on a host whose CPUs
     * the run's other processes want, spinners took them (13 backends and their client on 2 CPUs spun
     * 23 CPU-seconds in a 20 s run) and a CPU-bound run went slower than its devices made it. So the
     * spin yields: with nothing else runnable the yield returns at once and the wait stays as close
     * as it was; with other work waiting, that work runs and this thread comes back when the
     * scheduler gives it a CPU again, late as a process woken by a real device would be. */
    uint64_t cpu_from = thread_cpu_ns();
    while ((now = now_ns()) < target) sched_yield();
    *end = now;
    uint64_t cpu_to = thread_cpu_ns();
    return cpu_to > cpu_from ? cpu_to - cpu_from : 0;
}

/* How late a call came back past its completion (and whether the host's own call outlasted it). */
static void record_late(struct dbt_device_slot *d, uint64_t complete, uint64_t host_end, uint64_t end) {
    if (host_end > complete) atomic_fetch_add_explicit(&d->c.overruns, 1, memory_order_relaxed);
    uint64_t late = end > complete ? end - complete : 0;
    atomic_fetch_add_explicit(&d->c.late[dbt_lat_bucket(late)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->c.late_sum_ns, late, memory_order_relaxed);
    uint64_t prev = atomic_load_explicit(&d->c.late_max_ns, memory_order_relaxed);
    while (late > prev && !atomic_compare_exchange_weak(&d->c.late_max_ns, &prev, late)) {
    }
}

/* Waits for a completion and records how late the call came back. */
static uint64_t wait_and_record(struct dbt_device_slot *d, uint64_t complete, uint64_t host_end) {
    uint64_t end;
    uint64_t spun = wait_until(complete, &end);
    if (spun) atomic_fetch_add_explicit(&d->c.spin_ns, spun, memory_order_relaxed);
    record_late(d, complete, host_end, end);
    return end;
}

/* CPU time dilation, without root: a server K times slower spends K times the CPU time between two
 * of its calls, so each interposed call first spends K - 1 times the CPU time the thread used since
 * it left its previous one (an emulated I/O's own time, the host's copy and the wait, is the
 * device's: account marks its end), before it takes effect: before a result is sent, a page written
 * or another process woken. It spins until the thread's CPU clock has advanced that much, as a
 * slower CPU would stay busy: the core is not free for others meanwhile, and the server's CPU time
 * comes out K times the program's. A forked child's clock starts again: it charges from its own
 * first call. The measurement's own backend (state.h's undilated_pid) is not slowed. */
static void cpu_dilate(void) {
    if (tl_guard || !g_state) return;
    int saved = errno;
    uint64_t cpu = thread_cpu_ns(), mark = tl_cpu_mark;
    /* Paused (a run's preparation), the emulation charges nothing, the CPU included: a load before
     * the measurement takes this machine's time, not the slower CPU's. */
    if (mark && cpu > mark && !atomic_load_explicit(&g_state->paused, memory_order_relaxed) &&
        atomic_load_explicit(&g_state->undilated_pid, memory_order_relaxed) != g_pid) {
        uint64_t extra = (uint64_t)((double)(cpu - mark) * g_cpu_excess);
        if (extra) {
            /* CPU time, not wall time: preempted, a slower CPU would not have got on with its work either */
            uint64_t until = cpu + extra;
            while ((cpu = thread_cpu_ns()) < until && cpu) cpu_relax();
            atomic_fetch_add_explicit(&g_state->cpu_dilation_ns, extra, memory_order_relaxed);
        }
    }
    tl_cpu_mark = cpu;
    errno = saved;
}

/* ---- the durability log (durlog.h): the bytes written, and the names and sizes changed --------- */

static void durlog_rec(struct dbt_durlog_rec *rec, int kind, uint64_t e, uint64_t off, uint64_t t0) {
    memset(rec, 0, sizeof *rec);
    rec->kind = (uint8_t)kind;
    rec->dev = (uint8_t)FD_DEV(e);
    uint8_t f = FD_FLAGS(e);
    rec->flags = (uint8_t)(((f & DBT_TF_DIRECT) ? DBT_DLF_DIRECT : 0) | ((f & DBT_TF_DSYNC) ? DBT_DLF_DSYNC : 0) |
                           (atomic_load_explicit(&g_state->paused, memory_order_relaxed) ? DBT_DLF_PAUSED : 0));
    rec->file = FD_FILE(e);
    rec->off = off;
    rec->t0 = t0;
    rec->pid = g_pid;
    rec->tid = thread_id();
}

/* A write's bytes as the program gave them: `n` bytes from buf, or from the iovec. */
static void durlog_write(uint64_t e, uint64_t off, uint64_t n, uint64_t t0, const void *buf, const struct iovec *iov,
                         long cnt) {
    struct dbt_durlog_rec rec;
    durlog_rec(&rec, DBT_DL_WRITE, e, off, t0);
    if (buf) {
        struct iovec one = {(void *)buf, n};
        dbt_durlog_append(&rec, &one, 1);
        return;
    }
    struct iovec part[64]; /* the iovec cut to the n bytes the call moved, 64 pieces per record */
    long i = 0;
    while (n && i < cnt) {
        int k = 0;
        uint64_t bytes = 0;
        for (; i < cnt && k < 64 && n; i++) {
            size_t take = iov[i].iov_len < n ? iov[i].iov_len : (size_t)n;
            if (!take) continue;
            part[k].iov_base = iov[i].iov_base;
            part[k++].iov_len = take;
            n -= take;
            bytes += take;
        }
        rec.off = off;
        dbt_durlog_append(&rec, part, k);
        off += bytes;
    }
}

/* A call's scratch memory, neither on the program's stack nor in thread-local storage: a thread's
 * static TLS is carved out of its stack, and a program may give a thread little (MariaDB's timer
 * thread has 64 KiB; pthread_create fails when the TLS does not fit). Mapped, as a signal handler may. */
static void *scratch_map(size_t n) {
    int saved = errno;
    long p = kernel_call(SYS_mmap, 0, (long)n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    errno = saved;
    return p == -1 ? NULL : (void *)p;
}

static void scratch_unmap(void *p, size_t n) {
    int saved = errno;
    if (p) (void)kernel_call(SYS_munmap, (long)p, (long)n, 0, 0, 0, 0);
    errno = saved;
}

#define REREAD_CHUNK 65536

/* What stdio or the kernel wrote, read back from the file: its buffer is not ours to see. */
static void durlog_reread(int fd, uint64_t e, uint64_t off, uint64_t n, uint64_t t0) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    int rfd = open(link, O_RDONLY | O_CLOEXEC);
    char small[512], *chunk = scratch_map(REREAD_CHUNK);
    size_t cap = chunk ? REREAD_CHUNK : sizeof small; /* no memory: smaller pieces */
    if (!chunk) chunk = small;
    while (n) {
        size_t want = n < cap ? (size_t)n : cap;
        ssize_t got = rfd >= 0 ? pread(rfd, chunk, want, (off_t)off) : -1;
        if (got <= 0) { /* cut short meanwhile: what is not there is zeros, as a hole reads */
            memset(chunk, 0, want);
            got = (ssize_t)want;
        }
        struct dbt_durlog_rec rec;
        durlog_rec(&rec, DBT_DL_WRITE, e, off, t0);
        rec.flags |= DBT_DLF_REREAD;
        struct iovec one = {chunk, (size_t)got};
        dbt_durlog_append(&rec, &one, 1);
        off += (uint64_t)got;
        n -= (uint64_t)got;
    }
    if (rfd >= 0) close(rfd);
    if (chunk != small) scratch_unmap(chunk, REREAD_CHUNK);
}

/* The payload of a transfer call from its arguments: (fd, buf, n, ...) or (fd, iov, cnt, ...). */
#define XFER_PAYLOAD(...) XFER_PAYLOAD_(__VA_ARGS__, 0)
#define XFER_PAYLOAD_(fd_, p_, n_, ...)                                                            \
    _Generic((p_), const struct iovec *: NULL, default: (const void *)(p_)),                        \
        _Generic((p_), const struct iovec *: (const struct iovec *)(p_), default: NULL), (long)(n_)

/* A path as the durability log keeps it: absolute, its folder resolved (pg_wal may be a symlink to
 * another device's folder), the last name as given. 0 when it cannot be made. */
static int durlog_path(int dirfd, const char *path, char *out, size_t cap) {
    char dir[PATH_MAX], joined[PATH_MAX * 2];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (path[0] == '/') {
        snprintf(joined, sizeof joined, "%.*s", slash ? (int)(slash - path) : 0, path);
        if (!joined[0]) strcpy(joined, "/");
    } else {
        if (dirfd == AT_FDCWD) {
            if (!getcwd(dir, sizeof dir)) return 0;
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t k = readlink(link, dir, sizeof dir - 1);
            if (k <= 0) return 0;
            dir[k] = '\0';
        }
        snprintf(joined, sizeof joined, "%s/%.*s", dir, slash ? (int)(slash - path) : 0, path);
    }
    if (!realpath(joined, dir) || !*base) return 0;
    int n = snprintf(out, cap, "%s/%s", strcmp(dir, "/") ? dir : "", base);
    return n > 0 && (size_t)n < cap;
}

struct name_change {
    char old[PATH_MAX], new[PATH_MAX];
    int dev;
    int64_t file;
};

/* Before a rename or unlink: which device file it concerns (a regular file of a device, or nothing). */
static int name_change_before(struct name_change *ch, int odir, const char *old, int ndir, const char *new) {
    struct stat st;
    if (!old || !durlog_path(odir, old, ch->old, sizeof ch->old)) return 0;
    ch->dev = dbt_state_device_for_path(g_state, ch->old);
    if (ch->dev < 0 || lstat(ch->old, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    ch->new[0] = '\0';
    if (new && !durlog_path(ndir, new, ch->new, sizeof ch->new)) return 0;
    ch->file = dbt_state_file_index(g_state, ch->dev, (uint64_t)st.st_dev, (uint64_t)st.st_ino, ch->old,
                                    (uint64_t)st.st_size);
    return 1;
}

static void name_change_log(const struct name_change *ch, uint64_t t0) {
    struct dbt_durlog_rec rec;
    uint64_t e = FD_RESOLVED | ((uint64_t)ch->dev << 32) | (uint64_t)(ch->file + 1);
    durlog_rec(&rec, ch->new[0] ? DBT_DL_RENAME : DBT_DL_UNLINK, e, 0, t0);
    struct iovec v[2] = {{(void *)ch->old, strlen(ch->old) + 1}, {(void *)ch->new, strlen(ch->new) + 1}};
    dbt_durlog_append(&rec, v, ch->new[0] ? 2 : 1);
}

/* Renamed or removed: logged only while a durability log is kept (a crash test); else untouched. */
#define WRAP_NAMES(ret, name, params, args, odir, opath, ndir, npath)                               \
    EXPORT ret name params {                                                                       \
        ENSURE(name, -1);                                                                          \
        if (LIKELY(!g_state || tl_guard || !dbt_durlog_active())) return real_##name args;         \
        tl_guard++;                                                                                \
        struct name_change *ch = scratch_map(sizeof *ch); /* two paths: not on the program's stack */ \
        int before = errno; /* the lookup's own failures are not the call's */                     \
        int known = ch && name_change_before(ch, odir, opath, ndir, npath);                        \
        errno = before;                                                                            \
        uint64_t t0 = now_ns();                                                                    \
        ret r = real_##name args;                                                                  \
        int saved = errno;                                                                         \
        if (r == 0 && known) name_change_log(ch, t0);                                              \
        scratch_unmap(ch, sizeof *ch);                                                             \
        tl_guard--;                                                                                \
        errno = saved;                                                                             \
        return r;                                                                                  \
    }

/* What one call's emulation reported, on its way to the trace. The first device request is held
 * back: if it is the call's only one and carries the call's own bytes, the call's record stands for
 * it too (DBT_TF_WITH_REQUEST); otherwise it is written as it came, before the call's record. */
struct call_trace {
    int fd;
    uint64_t size; /* the file's size, asked for by the core (UINT64_MAX: not asked) */
    int held;
    struct dbt_request_event first;
};

static void write_request(const struct dbt_request_event *ev) {
    struct dbt_trace_rec *r = dbt_trace_reserve();
    if (!r) return;
    r->submit_ns = ev->arrival;
    r->start_ns = ev->start;
    r->complete_ns = ev->complete;
    r->end_ns = (ev->flags & DBT_TF_ASYNC) ? ev->arrival : ev->complete;
    r->offset = ev->off;
    r->len = (uint32_t)(ev->len > UINT32_MAX ? UINT32_MAX : ev->len);
    r->file = (int32_t)ev->file;
    r->pid = g_pid;
    r->aux = 0;
    r->tid = thread_id();
    r->dev = ev->dev;
    r->flags = ev->flags;
    r->kind = DBT_TK_REQUEST;
    dbt_trace_commit(r, ev->op);
}

static void trace_request(void *ctx, const struct dbt_request_event *ev) {
    struct call_trace *ct = ctx;
    if (!ct->held) { /* cheap to hold: the page cache may call here under its lock */
        ct->first = *ev;
        ct->held = 1;
        return;
    }
    if (ct->held == 1) write_request(&ct->first);
    ct->held = 2;
    write_request(ev);
}

/* The program's call, as it asked and as it was answered: what a replay feeds back to the core. */
static void trace_call(struct call_trace *ct, const struct dbt_call *c, const struct dbt_outcome *o, uint64_t end) {
    const struct dbt_request_event *q = &ct->first;
    int fold = ct->held == 1 && q->arrival == c->t0 && q->op == c->op && q->off == c->off && q->len == c->len &&
               q->complete == o->complete;
    if (ct->held == 1 && !fold) write_request(q);
    struct dbt_trace_rec *r = dbt_trace_reserve();
    if (!r) return;
    r->submit_ns = c->t0;
    r->complete_ns = o->complete;
    r->end_ns = end;
    r->offset = c->off;
    r->len = (uint32_t)(c->len > UINT32_MAX ? UINT32_MAX : c->len);
    r->file = (int32_t)c->file;
    r->pid = g_pid;
    r->tid = thread_id();
    r->dev = c->dev;
    if (fold) {
        uint64_t host = c->host_end - c->t0;
        r->start_ns = q->start;
        r->aux = (uint32_t)(host > UINT32_MAX ? UINT32_MAX : host);
        r->flags = (uint8_t)(q->flags | o->flags | DBT_TF_WITH_REQUEST);
    } else {
        r->start_ns = c->host_end;
        r->aux = c->op == DBT_TOP_READ ? dbt_trace_size_pages(ct->size) : c->aux;
        r->flags = (uint8_t)(c->flags | o->flags);
    }
    r->kind = DBT_TK_CALL;
    dbt_trace_commit(r, c->op);
}

/* Read-ahead stops at the end of the file: the core asks for the size only when it reads ahead. */
static uint64_t file_size_of(void *ctx) {
    struct call_trace *ct = ctx;
    struct stat sb;
    if (ct->size == UINT64_MAX && ct->fd >= 0 && fstat(ct->fd, &sb) == 0) ct->size = (uint64_t)sb.st_size;
    return ct->size;
}

/* The heart of it, called after the real call moved `len` bytes (or flushed, or advised), with the
 * guard set: ask the core, wait as it says, record. Returns when the call returned to the program (its
 * record's end), or 0 if the core charged nothing for it. */
static uint64_t account(int fd, uint64_t e, int op, uint64_t off, uint64_t len, uint64_t t0, uint32_t aux) {
    uint64_t host_end = now_ns();
    struct dbt_call c = {t0, host_end, off, len, UINT64_MAX, FD_FILE(e), aux, (uint8_t)op, (uint8_t)FD_DEV(e),
                         FD_FLAGS(e)};
    if (UNLIKELY(op == DBT_TOP_TRUNCATE || op == DBT_TOP_ALLOCATE) && dbt_durlog_active()) {
        struct dbt_durlog_rec rec;
        durlog_rec(&rec, op == DBT_TOP_TRUNCATE ? DBT_DL_TRUNCATE : DBT_DL_ALLOCATE, e, off, t0);
        rec.size = op == DBT_TOP_ALLOCATE ? len : 0;
        rec.aux = aux;
        dbt_durlog_append(&rec, NULL, 0);
    }
    int tracing = dbt_trace_active();
    struct call_trace ct; /* `first` is written before it is read (held says when): not zeroed per call */
    ct.fd = fd;
    ct.size = UINT64_MAX;
    ct.held = 0;
    struct dbt_emulate_hooks hooks = {tracing ? trace_request : NULL, file_size_of, &ct};
    struct dbt_outcome o;
    dbt_emulate(g_state, &c, &hooks, &o);
    /* A queueing drive chooses when it is free, among the requests come by then: sleep until that
     * choice is due and ask again (each waiter makes the choices due when it wakes). */
    while (UNLIKELY(o.ticket)) {
        sleep_until(o.complete);
        dbt_emulate_resume(g_state, &c, &hooks, now_ns(), &o);
    }
    if (!o.charged) return 0;
    struct dbt_device_slot *d = &g_state->dev[c.dev];
    int moves = op == DBT_TOP_READ || op == DBT_TOP_WRITE || op == DBT_TOP_FLUSH;
    if (moves) atomic_fetch_add_explicit(&d->c.host_ns, host_end - t0, memory_order_relaxed);
    uint64_t end = host_end;
    if (o.wait)
        end = wait_and_record(d, o.complete, host_end);
    else if (moves && (d->caps & DBT_CAP_HOST_TIME)) /* the host call was the I/O: on time by definition */
        atomic_fetch_add_explicit(&d->c.late[0], 1, memory_order_relaxed);
    else if (!moves)
        end = now_ns();
    if (tracing) trace_call(&ct, &c, &o, end);
    if (UNLIKELY(g_cpu_excess > 0.0)) { /* the call itself (the host's copy, the emulation, its wait) is the
                                         * device's time, not the program's CPU: the next charge starts here */
        tl_cpu_mark = thread_cpu_ns();
    }
    return end;
}

static uint64_t current_pos_minus(int fd, ssize_t moved) {
    off_t pos = lseek(fd, 0, SEEK_CUR);
    return pos >= moved ? (uint64_t)(pos - moved) : 0;
}

/* ---- wrappers: opening -------------------------------------------------------------------- */

static int has_mode(int flags) { return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE; }

#define AFTER_OPEN(r)                                                                              \
    do {                                                                                           \
        if ((r) >= 0) fd_forget(r);                                                                \
    } while (0)

/* open and openat take a mode only with O_CREAT or O_TMPFILE; read it only then. */
#define WRAP_OPEN_VA(ret, name, params, args)                                                      \
    EXPORT ret name params {                                                                       \
        ENSURE(name, -1);                                                                          \
        mode_t mode = 0;                                                                           \
        if (has_mode(flags)) {                                                                     \
            va_list ap;                                                                            \
            va_start(ap, flags);                                                                   \
            mode = (mode_t)va_arg(ap, int);                                                        \
            va_end(ap);                                                                            \
        }                                                                                          \
        ret r = real_##name args;                                                                  \
        int saved = errno;                                                                         \
        AFTER_OPEN(r);                                                                             \
        errno = saved;                                                                             \
        return r;                                                                                  \
    }

#define WRAP_FD_RESULT(ret, name, params, args, ...)                                               \
    EXPORT ret name params {                                                                       \
        ENSURE(name, -1);                                                                          \
        ret r = real_##name args;                                                                  \
        int saved = errno;                                                                         \
        __VA_ARGS__;                                                                               \
        errno = saved;                                                                             \
        return r;                                                                                  \
    }

/* ---- wrappers: fd lifetime ---------------------------------------------------------------- */

EXPORT int close_range(unsigned int first, unsigned int last, int flags) {
    ENSURE(close_range, -1);
    int r = real_close_range(first, last, flags);
    int saved = errno;
    if (r == 0 && !(flags & CLOSE_RANGE_CLOEXEC)) fd_forget_range(first, last);
    errno = saved;
    return r;
}

/* The bytes a stdio stream holds for writing, not yet handed to the file (glibc's stream layout). */
static size_t stdio_pending(FILE *fp) {
    return fp->_IO_write_ptr > fp->_IO_write_base ? (size_t)(fp->_IO_write_ptr - fp->_IO_write_base) : 0;
}

/* fflush and fclose hand a stream's buffer to the file: a write at the fd's offset. Runs the real
 * call and accounts that write when it succeeded. */
static int stdio_hand_over(FILE *fp, int fd, uint64_t e, int (*real)(FILE *)) {
    size_t pending = stdio_pending(fp);
    off_t at = lseek(fd, 0, SEEK_CUR);
    uint64_t t0 = now_ns();
    int r = real(fp);
    int saved = errno;
    if (r == 0 && at >= 0 && pending) account(fd, e, DBT_OP_WRITE, (uint64_t)at, pending, t0, 0);
    errno = saved;
    return r;
}

EXPORT int fflush(FILE *fp) {
    ENSURE(fflush, EOF);
    uint64_t e;
    int fd = fp ? fileno(fp) : -1; /* fflush(NULL) flushes every stream: not attributable */
    if (LIKELY(fd < 0 || !tracked(fd, &e))) return real_fflush(fp);
    tl_guard++;
    int r = stdio_hand_over(fp, fd, e, real_fflush);
    tl_guard--;
    return r;
}

/* stdio and dirent close their fds inside libc, where we cannot see it. */
EXPORT int fclose(FILE *fp) {
    ENSURE(fclose, EOF);
    FILE *volatile check = fp;
    int fd = check ? fileno(fp) : -1;
    uint64_t e;
    int tracked_fd = fd >= 0 && tracked(fd, &e);
    tl_guard += tracked_fd;
    int r = tracked_fd ? stdio_hand_over(fp, fd, e, real_fclose) : real_fclose(fp);
    int saved = errno;
    fd_forget(fd);
    tl_guard -= tracked_fd;
    errno = saved;
    return r;
}

EXPORT int closedir(DIR *dir) {
    ENSURE(closedir, -1);
    DIR *volatile check = dir; /* declared nonnull, yet glibc answers NULL with EINVAL: keep that */
    int fd = check ? dirfd(dir) : -1;
    int r = real_closedir(dir);
    int saved = errno;
    fd_forget(fd);
    errno = saved;
    return r;
}

/* ---- wrappers: data transfer -------------------------------------------------------------- */

/* Positional: the offset is an argument (-1 in the v2 calls means "at the file position"). */
#define WRAP_XFER_AT(ret, name, params, args, op, offexpr)                                         \
    EXPORT ret name params {                                                                       \
        ENSURE(name, -1);                                                                          \
        uint64_t e;                                                                                \
        if (LIKELY(!tracked(fd, &e))) return real_##name args;                                     \
        tl_guard++;                                                                                \
        uint64_t t0 = now_ns();                                                                    \
        ret r = real_##name args;                                                                  \
        int saved = errno;                                                                         \
        if (r > 0) {                                                                               \
            uint64_t at = (offexpr) == -1 ? current_pos_minus(fd, r) : (uint64_t)(offexpr);        \
            if (op == DBT_OP_WRITE && dbt_durlog_active()) durlog_write(e, at, (uint64_t)r, t0, XFER_PAYLOAD args); \
            account(fd, e, op, at, (uint64_t)r, t0, 0);                                            \
        }                                                                                          \
        tl_guard--;                                                                                \
        errno = saved;                                                                             \
        return r;                                                                                  \
    }

/* Streaming: the offset is where the file position was; read it back after the call. */
#define WRAP_XFER_POS(ret, name, params, args, op) WRAP_XFER_AT(ret, name, params, args, op, (off_t)-1)

/* stdio: libc buffers the stream and moves data with its own internal read and write, which are
 * not interposable. What reached the file is what moved the fd's offset during the call: that span
 * is accounted, once per libc buffer fill or flush (4 KiB), not per fread or fwrite call. */
#define WRAP_STDIO(ret, name, params, args, op)                                                    \
    EXPORT ret name params {                                                                       \
        ENSURE(name, 0);                                                                           \
        uint64_t e;                                                                                \
        FILE *volatile check = fp; /* declared nonnull; keep libc's own answer to NULL */          \
        int fd = check ? fileno(fp) : -1;                                                          \
        if (LIKELY(fd < 0 || !tracked(fd, &e))) return real_##name args;                           \
        tl_guard++;                                                                                \
        off_t k0 = lseek(fd, 0, SEEK_CUR);                                                         \
        uint64_t t0 = now_ns();                                                                    \
        ret r = real_##name args;                                                                  \
        int saved = errno;                                                                         \
        off_t k1 = k0 >= 0 ? lseek(fd, 0, SEEK_CUR) : -1;                                          \
        if (k1 > k0 && op == DBT_OP_WRITE && dbt_durlog_active())                                  \
            durlog_reread(fd, e, (uint64_t)k0, (uint64_t)(k1 - k0), t0);                           \
        if (k1 > k0) account(fd, e, op, (uint64_t)k0, (uint64_t)(k1 - k0), t0, 0);                \
        tl_guard--;                                                                                \
        errno = saved;                                                                             \
        return r;                                                                                  \
    }

EXPORT ssize_t copy_file_range(int fd_in, off64_t *off_in, int fd_out, off64_t *off_out, size_t n,
                               unsigned int flags) {
    ENSURE(copy_file_range, -1);
    uint64_t ein = 0, eout = 0;
    int tin = tracked(fd_in, &ein), tout = tracked(fd_out, &eout);
    if (LIKELY(!tin && !tout)) return real_copy_file_range(fd_in, off_in, fd_out, off_out, n, flags);
    tl_guard++;
    off64_t in0 = off_in ? *off_in : lseek(fd_in, 0, SEEK_CUR);
    off64_t out0 = off_out ? *off_out : lseek(fd_out, 0, SEEK_CUR);
    uint64_t t0 = now_ns();
    ssize_t r = real_copy_file_range(fd_in, off_in, fd_out, off_out, n, flags);
    int saved = errno;
    if (r > 0 && tin) account(fd_in, ein, DBT_OP_READ, in0 > 0 ? (uint64_t)in0 : 0, (uint64_t)r, t0, 0);
    if (r > 0 && tout && dbt_durlog_active()) durlog_reread(fd_out, eout, out0 > 0 ? (uint64_t)out0 : 0, (uint64_t)r, t0);
    if (r > 0 && tout) account(fd_out, eout, DBT_OP_WRITE, out0 > 0 ? (uint64_t)out0 : 0, (uint64_t)r, now_ns(), 0);
    tl_guard--;
    errno = saved;
    return r;
}

/* ---- wrappers: durability ----------------------------------------------------------------- */

/* Does the path the file was first touched by end with `suffix`? */
static int path_ends_with(uint64_t file, const char *suffix) {
    uint32_t off = dbt_files(g_state)[file].path_off;
    if (!off || off >= DBT_ARENA_BYTES) return 0;
    const char *p = dbt_arena(g_state) + off;
    size_t n = strnlen(p, DBT_ARENA_BYTES - off), k = strnlen(suffix, DBT_FAULT_SUFFIX_MAX);
    return n >= k && memcmp(p + n - k, suffix, k) == 0;
}

/* The injected fsync error (state.h): is this call the one to fail? The one that is marks the file's
 * dirty pages clean, as Linux does when writeback fails, and records what it did. */
static int fault_fires(int fd, uint64_t e) {
    uint32_t dev = atomic_load_explicit(&g_state->fault_dev, memory_order_acquire);
    if (dev != (uint32_t)FD_DEV(e) + 1u || atomic_load(&g_state->fault_fired)) return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0; /* a directory's fsync is not counted */
    uint32_t cls = atomic_load(&g_state->fault_class);
    if (cls && dbt_files(g_state)[FD_FILE(e)].pg_class + 1u != cls) return 0;
    if (g_state->fault_suffix[0] && !path_ends_with(FD_FILE(e), g_state->fault_suffix)) return 0;
    if (atomic_fetch_add(&g_state->fault_seen, 1u) + 1u != atomic_load(&g_state->fault_nth)) return 0;
    uint32_t unfired = 0;
    if (!atomic_compare_exchange_strong(&g_state->fault_fired, &unfired, 1u)) return 0;
    struct dbt_pc *pc = dbt_state_pc(g_state);
    atomic_store(&g_state->fault_pages, pc ? dbt_pc_clean(pc, FD_FILE(e)) : 0);
    atomic_store(&g_state->fault_file, (uint64_t)FD_FILE(e));
    atomic_store(&g_state->fault_at_ns, now_ns());
    return 1;
}

#define WRAP_FLUSH(ret, name, params, args)                                                         \
    EXPORT ret name params {                                                                       \
        ENSURE(name, -1);                                                                          \
        uint64_t e;                                                                                \
        if (LIKELY(!tracked(fd, &e))) return real_##name args;                                     \
        if (UNLIKELY(atomic_load_explicit(&g_state->fault_dev, memory_order_relaxed)) && fault_fires(fd, e)) { \
            errno = EIO;                                                                           \
            return -1;                                                                             \
        }                                                                                          \
        tl_guard++;                                                                                \
        uint64_t t0 = now_ns();                                                                    \
        ret r = real_##name args;                                                                  \
        int saved = errno;                                                                         \
        if (r == 0) account(fd, e, DBT_OP_FLUSH, 0, 0, t0, 0);                                         \
        tl_guard--;                                                                                \
        errno = saved;                                                                             \
        return r;                                                                                  \
    }

/* ---- wrappers: counted, no transfer ------------------------------------------------------- */

/* ok: the success test on r; posix_* return an error number instead of setting errno. */
#define WRAP_OTHER(ret, name, params, args, top, offexpr, lenexpr, ok, aux)                        \
    EXPORT ret name params {                                                                       \
        ENSURE(name, (ret)-1);                                                                     \
        uint64_t e;                                                                                \
        if (LIKELY(!tracked(fd, &e))) return real_##name args;                                     \
        tl_guard++;                                                                                \
        uint64_t t0 = now_ns();                                                                    \
        ret r = real_##name args;                                                                  \
        int saved = errno;                                                                         \
        if (ok) {                                                                                  \
            account(fd, e, top, (uint64_t)(offexpr), (uint64_t)(lenexpr), t0, (uint32_t)(aux));     \
        }                                                                                          \
        tl_guard--;                                                                                \
        errno = saved;                                                                             \
        return r;                                                                                  \
    }

/* By path: the file is found from the path (relative to the cwd), before the call changes it. */
#define WRAP_TRUNCATE_PATH(ret, name, params, args)                                                \
    EXPORT ret name params {                                                                       \
        ENSURE(name, -1);                                                                          \
        const char *volatile check = path;                                                         \
        if (LIKELY(!g_state || tl_guard || !check)) return real_##name args;                       \
        tl_guard++;                                                                                \
        char resolved[PATH_MAX];                                                                   \
        int dev = realpath(path, resolved) ? dbt_state_device_for_path(g_state, resolved) : -1;    \
        struct stat st;                                                                            \
        int64_t file = dev >= 0 && stat(resolved, &st) == 0 && S_ISREG(st.st_mode)                \
                           ? dbt_state_file_index(g_state, dev, (uint64_t)st.st_dev, (uint64_t)st.st_ino, \
                                                  resolved, (uint64_t)st.st_size)                  \
                           : -1;                                                                   \
        uint64_t t0 = now_ns();                                                                    \
        ret r = real_##name args;                                                                  \
        int saved = errno;                                                                         \
        if (r == 0 && dev >= 0) {                                                                  \
            uint64_t e = FD_RESOLVED | ((uint64_t)dev << 32) | (uint64_t)(file + 1);                \
            account(-1, e, DBT_TOP_TRUNCATE, (uint64_t)len, 0, t0, 0);                             \
        }                                                                                          \
        tl_guard--;                                                                                \
        errno = saved;                                                                             \
        return r;                                                                                  \
    }

/* ---- wrappers: waking and sleeping (traced only) ------------------------------------------- */

/* Only while a trace records an emulated interval, and never about a process waking itself. */
static inline int sync_traced(void) {
    return g_state && !tl_guard && !atomic_load_explicit(&g_state->paused, memory_order_relaxed) &&
           dbt_trace_active();
}

/* A sleep is recorded if the interval is on when it ends: an idle process that fell asleep before
 * the measurement began, and is woken inside it, is waiting for whoever woke it. */
static inline int sleep_traceable(void) { return g_state && !tl_guard && dbt_trace_active(); }

/* complete: what the sleep waited for came then (an AIO reap's request), or t1 */
static void trace_sync_until(int op, uint8_t flags, uint64_t target, uint32_t aux, uint64_t t0, uint64_t t1,
                             int64_t n, uint64_t complete) {
    tl_guard++;
    struct dbt_trace_rec *r = dbt_trace_reserve();
    if (r) {
        r->submit_ns = r->start_ns = t0;
        r->complete_ns = complete;
        r->end_ns = t1;
        r->offset = target;
        r->len = n > 0 ? (uint32_t)n : 0;
        r->file = -1;
        r->pid = g_pid;
        r->aux = aux;
        r->tid = thread_id();
        r->dev = 0;
        r->flags = flags;
        r->kind = DBT_TK_SYNC;
        dbt_trace_commit(r, (uint8_t)op);
    }
    tl_guard--;
}

static void trace_sync(int op, uint8_t flags, uint64_t target, uint32_t aux, uint64_t t0, uint64_t t1, int64_t n) {
    trace_sync_until(op, flags, target, aux, t0, t1, n, t1);
}

/* kill (SetLatch's SIGURG) and sem_post (an LWLock released): a wake aimed at `target`. A process
 * signalling itself, or a process group, wakes nobody else. */
#define WRAP_WAKE(ret, name, params, args, skip, flags, target, aux)                               \
    EXPORT ret name params {                                                                       \
        ENSURE(name, -1);                                                                          \
        if (LIKELY((skip) || !sync_traced())) return real_##name args;                             \
        uint64_t t0 = now_ns();                                                                    \
        ret r = real_##name args;                                                                  \
        int saved = errno;                                                                         \
        if (r == 0) trace_sync(DBT_SYNC_WAKE, flags, (uint64_t)(target), (uint32_t)(aux), t0, now_ns(), 0); \
        errno = saved;                                                                             \
        return r;                                                                                  \
    }

EXPORT int sem_wait(sem_t *sem) {
    ENSURE(sem_wait, -1);
    if (LIKELY(!sleep_traceable())) return real_sem_wait(sem);
    uint64_t t0 = now_ns();
    int r = real_sem_wait(sem);
    int saved = errno;
    if (r == 0 && sync_traced()) trace_sync(DBT_SYNC_SLEEP, DBT_SF_SEM, (uint64_t)(uintptr_t)sem, 0, t0, now_ns(), 1);
    errno = saved;
    return r;
}

/* A condition variable's wait that was woken (0): a sleep on its address. One that timed out, or any
 * the interposer makes itself (cond_wait_own), is not recorded; errno is left as the wait left it. */
#define WRAP_COND_WAIT(name, params, args)                                                         \
    EXPORT int name params {                                                                       \
        ENSURE(name, EINVAL);                                                                      \
        if (LIKELY(!sleep_traceable())) return real_##name args;                                   \
        uint64_t t0 = now_ns();                                                                    \
        int r = real_##name args;                                                                  \
        int saved = errno;                                                                         \
        if ((r == 0 || r == ETIMEDOUT) && sync_traced()) /* woken (len 1), or a timer's (len 0) */     \
            trace_sync(DBT_SYNC_SLEEP, DBT_SF_COND, (uint64_t)(uintptr_t)cond, 1, t0, now_ns(), r == 0); \
        errno = saved;                                                                             \
        return r;                                                                                  \
    }

WRAP_COND_WAIT(pthread_cond_wait, (pthread_cond_t *cond, pthread_mutex_t *mutex), (cond, mutex))
WRAP_COND_WAIT(pthread_cond_timedwait, (pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *at),
               (cond, mutex, at))
WRAP_COND_WAIT(pthread_cond_clockwait,
               (pthread_cond_t *cond, pthread_mutex_t *mutex, clockid_t clock, const struct timespec *at),
               (cond, mutex, clock, at))

/* The interposer's own waits and wakes (its AIO contexts'): libc's, never traced as the program's. */
static int cond_wait_own(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *at) {
    if (at) {
        ENSURE_REAL(pthread_cond_timedwait, EINVAL);
        return real_pthread_cond_timedwait(cond, mutex, at);
    }
    ENSURE_REAL(pthread_cond_wait, EINVAL);
    return real_pthread_cond_wait(cond, mutex);
}

static int cond_broadcast_own(pthread_cond_t *cond) {
    ENSURE_REAL(pthread_cond_broadcast, EINVAL);
    return real_pthread_cond_broadcast(cond);
}

/* epoll_wait and epoll_pwait: a sleep, with the events it returned (0: it timed out). */
#define WRAP_EPOLL(ret, name, params, args)                                                        \
    EXPORT ret name params {                                                                       \
        ENSURE(name, -1);                                                                          \
        if (LIKELY(!sleep_traceable())) return real_##name args;                                   \
        uint64_t t0 = now_ns();                                                                    \
        ret r = real_##name args;                                                                  \
        int saved = errno;                                                                         \
        if (sync_traced()) trace_sync(DBT_SYNC_SLEEP, DBT_SF_EPOLL, 0, 0, t0, now_ns(), r);        \
        errno = saved;                                                                             \
        return r;                                                                                  \
    }

/* ---- wrappers: messages (ENSURE charges a slower CPU's time before the message leaves) ------ */

#define WRAP_CHARGE(ret, name, params, args)                                                       \
    EXPORT ret name params {                                                                       \
        ENSURE(name, -1);                                                                          \
        return real_##name args;                                                                   \
    }

/* ---- wrappers: I/O the emulation cannot see ----------------------------------------------- */

/* Each of these calls does its work unchanged; when it touched a device file (or, for io_uring, at
 * all), the state counts a bypass of that kind, so that a run's figures are refused rather than
 * reported short. The checks run after the call, on what the call itself proved readable. */

static void note_bypass(int kind, const char *path, int fd) { dbt_state_note_bypass(g_state, kind, path, fd); }

/* The fd is a device file's (resolving it at its first sight, as any I/O on it would). */
static int on_device(int fd) {
    uint64_t e;
    return tracked(fd, &e);
}

/* The real mmap, or the kernel's while it is not known yet: libc, ld.so and other constructors map
 * memory before ours runs, and dlsym itself may; failing there would be a crash, not an ENOSYS. */
#define CALL_MMAP(name, args)                                                                      \
    (LIKELY(real_##name != NULL) || (resolve((void **)&real_##name, #name), real_##name != NULL)     \
         ? real_##name args                                                                        \
         : (void *)kernel_call(MMAP_CALL, (long)addr, (long)len, prot, flags, fd, (long)(off >> MMAP_SHIFT)))
#ifdef SYS_mmap2 /* 32-bit: the offset in pages */
#define MMAP_CALL SYS_mmap2
#define MMAP_SHIFT 12
#else
#define MMAP_CALL SYS_mmap
#define MMAP_SHIFT 0
#endif

/* A mapping of a device file moves its data by page faults and writeback, out of the interposer's
 * sight; one of an io_uring instance's rings means I/O it cannot see either. */
__attribute__((noinline)) static void mapped(int fd) {
    int saved = errno;
    uint64_t e = fd_entry(fd);
    if (e & FD_URING) note_bypass(DBT_BYPASS_IO_URING, NULL, -1);
    else if (!(e & FD_NONE)) note_bypass(DBT_BYPASS_MMAP, NULL, fd);
    errno = saved;
}

/* Hot (PostgreSQL maps its shared memory; malloc maps large blocks): anonymous maps cost a branch. */
#define WRAP_MMAP(ret, name, params, args)                                                         \
    EXPORT ret name params {                                                                       \
        ret r = CALL_MMAP(name, args);                                                             \
        if (UNLIKELY(!(flags & MAP_ANONYMOUS) && g_state != NULL) && r != MAP_FAILED) mapped(fd);   \
        return r;                                                                                  \
    }

/* ---- Linux AIO (aioq.h) ----------------------------------------------------------------------
 * An iocb on a device file (a read or write, vectored or not, or an fsync) does its real I/O when it
 * is submitted, with the system call the kernel would have made for it, and is kept in flight with
 * the completion the emulation core gives it among the others; io_getevents returns it no sooner.
 * Buffered files are done at submission, as Linux does them (io_submit waits for the page cache).
 * Any other iocb (another file, an eventfd to notify) goes to the kernel, and a reap takes the
 * kernel's completions beside the emulated ones; one on a device file makes the run a bypass. */

struct aio_ctx {
    uint64_t id;                 /* the kernel's aio_context_t, from the real io_setup */
    pthread_mutex_t mu;
    pthread_cond_t cv;           /* a submission or the context's end: a waiting reap looks again */
    struct dbt_aio_queue q;
    uint32_t kernel_inflight;    /* iocbs given to the kernel and not yet reaped */
    uint32_t kernel_waiters;     /* reaps waiting in the kernel's io_getevents */
    uint32_t wakes_sent;         /* wake iocbs given to the kernel and not yet reaped */
    struct iocb wake;            /* a request of ours that completes at once: a reap waiting in the
                                    kernel returns, and looks at the emulated requests (its event is
                                    never the program's) */
    int dead;                    /* destroyed: what still holds it sees EINVAL */
    _Atomic int emulated;        /* it had a request of ours (else its reaps are the kernel's) */
    uint32_t refs;               /* calls holding it (g_aio_mu): freed at the last once unlinked */
    int linked;                  /* in g_aio: io_destroy takes it out, the kernel may reuse the id */
    struct aio_ctx *next;
};
static pthread_mutex_t g_aio_mu = PTHREAD_MUTEX_INITIALIZER;
static struct aio_ctx *g_aio; /* this process's contexts that had an emulated request */

_Static_assert(sizeof(struct call_trace) + sizeof(uint32_t) <= DBT_AIO_SCRATCH, "a request's trace fits its scratch");

/* The context's record, held until aio_put; with make, a new one for a context the kernel knows
 * (NULL for any other). */
static struct aio_ctx *aio_find(uint64_t id, int make) {
    pthread_mutex_lock(&g_aio_mu);
    struct aio_ctx *c = g_aio;
    while (c && c->id != id) c = c->next;
    struct timespec zero = {0, 0};
    if (!c && make && kernel_call(SYS_io_getevents, (long)id, 0, 0, 0, (long)&zero, 0) == 0 &&
        (c = calloc(1, sizeof *c))) {
        pthread_condattr_t a;
        pthread_condattr_init(&a);
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
        pthread_cond_init(&c->cv, &a);
        pthread_condattr_destroy(&a);
        pthread_mutex_init(&c->mu, NULL);
        c->id = id;
        c->linked = 1;
        c->next = g_aio;
        g_aio = c;
    }
    if (c) c->refs++;
    pthread_mutex_unlock(&g_aio_mu);
    return c;
}

static void aio_put(struct aio_ctx *c) {
    pthread_mutex_lock(&g_aio_mu);
    int last = --c->refs == 0 && !c->linked;
    pthread_mutex_unlock(&g_aio_mu);
    if (last) {
        dbt_aio_clear(&c->q);
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        free(c);
    }
}

static int aio_emulating(uint64_t id) {
    struct aio_ctx *c = aio_find(id, 0);
    int yes = c && atomic_load(&c->emulated);
    if (c) aio_put(c);
    return yes;
}

static void aio_unlink(struct aio_ctx *c) {
    pthread_mutex_lock(&g_aio_mu);
    for (struct aio_ctx **p = &g_aio; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    c->linked = 0;
    pthread_mutex_unlock(&g_aio_mu);
}

static int aio_emulable(const struct iocb *cb, uint64_t *e) {
    if (!tracked((int)cb->aio_fildes, e)) return 0;
    int ok = (cb->aio_lio_opcode == IOCB_CMD_PREAD || cb->aio_lio_opcode == IOCB_CMD_PWRITE ||
              cb->aio_lio_opcode == IOCB_CMD_PREADV || cb->aio_lio_opcode == IOCB_CMD_PWRITEV ||
              cb->aio_lio_opcode == IOCB_CMD_FSYNC || cb->aio_lio_opcode == IOCB_CMD_FDSYNC) &&
             !(cb->aio_flags & IOCB_FLAG_RESFD);
    if (!ok) note_bypass(DBT_BYPASS_LIBAIO, NULL, (int)cb->aio_fildes);
    return ok;
}

/* What the kernel refuses at submission (io_submit fails there, for that iocb) rather than in the
 * completion: fs/aio.c's checks, in its order. 0: taken. */
static long aio_refused(const struct iocb *cb) {
    if (cb->aio_reserved2 || (int64_t)cb->aio_nbytes < 0) return -EINVAL;
    long fl = kernel_call(SYS_fcntl, (long)cb->aio_fildes, F_GETFL, 0, 0, 0, 0);
    if (fl < 0) return -errno;
    int code = cb->aio_lio_opcode;
    if (code == IOCB_CMD_FSYNC || code == IOCB_CMD_FDSYNC)
        return cb->aio_buf || cb->aio_offset || cb->aio_nbytes || cb->aio_rw_flags ? -EINVAL : 0;
    int write = code == IOCB_CMD_PWRITE || code == IOCB_CMD_PWRITEV;
    if ((fl & O_ACCMODE) == (write ? O_RDONLY : O_WRONLY)) return -EBADF;
    if ((code == IOCB_CMD_PREADV || code == IOCB_CMD_PWRITEV) && cb->aio_nbytes > IOV_MAX) return -EINVAL;
    if (cb->aio_offset < 0) return -EINVAL;
    return 0;
}

/* The iocb's own I/O, now: what its completion event will carry (bytes, or -errno). */
static int64_t aio_do(const struct iocb *cb, uint64_t e, int *op, uint64_t t0) {
    int fd = (int)cb->aio_fildes;
    int code = cb->aio_lio_opcode;
    if (code == IOCB_CMD_FSYNC || code == IOCB_CMD_FDSYNC) {
        *op = DBT_OP_FLUSH;
        if (UNLIKELY(atomic_load_explicit(&g_state->fault_dev, memory_order_relaxed)) && fault_fires(fd, e)) return -EIO;
        long r = kernel_call(code == IOCB_CMD_FSYNC ? SYS_fsync : SYS_fdatasync, fd, 0, 0, 0, 0, 0);
        return r < 0 ? -errno : 0;
    }
    int vec = code == IOCB_CMD_PREADV || code == IOCB_CMD_PWRITEV;
    struct iovec one = {(void *)(uintptr_t)cb->aio_buf, (size_t)cb->aio_nbytes};
    const struct iovec *iov = vec ? (const struct iovec *)(uintptr_t)cb->aio_buf : &one;
    long cnt = vec ? (long)cb->aio_nbytes : 1;
    int write = code == IOCB_CMD_PWRITE || code == IOCB_CMD_PWRITEV;
    *op = write ? DBT_OP_WRITE : DBT_OP_READ;
    long r = kernel_call(write ? SYS_pwritev2 : SYS_preadv2, fd, (long)iov, cnt, (long)cb->aio_offset, 0,
                         (long)cb->aio_rw_flags);
    if (r < 0) return -errno;
    if (write && r > 0 && dbt_durlog_active()) durlog_write(e, (uint64_t)cb->aio_offset, (uint64_t)r, t0, NULL, iov, (int)cnt);
    return r;
}

/* A reap waiting in the kernel (it came before any emulated request, or only the kernel's were in
 * flight) would not see one submitted now: a read of no bytes on the submitted file, which the kernel
 * completes at once, makes it return (x->mu held). */
static void aio_wake_kernel_waiters(struct aio_ctx *x, int fd) {
    while (x->wakes_sent < x->kernel_waiters) {
        x->wake = (struct iocb){.aio_data = (uint64_t)(uintptr_t)x, .aio_lio_opcode = IOCB_CMD_PREAD,
                                .aio_fildes = (uint32_t)fd};
        struct iocb *one = &x->wake;
        int saved = errno;
        long r = kernel_call(SYS_io_submit, (long)x->id, 1, (long)&one, 0, 0, 0);
        errno = saved;
        if (r != 1) break; /* the waiter returns at its next kernel event, or its timeout */
        x->wakes_sent++;
    }
}

/* The kernel's events less the wakes of ours among them; how many are left (x->mu held). */
static long aio_drop_wakes(struct aio_ctx *x, struct io_event *ev, long n) {
    long kept = 0;
    for (long i = 0; i < n; i++) {
        if (ev[i].obj == (uint64_t)(uintptr_t)&x->wake && ev[i].data == (uint64_t)(uintptr_t)x) {
            if (x->wakes_sent) x->wakes_sent--;
            continue;
        }
        if (kept != i) ev[kept] = ev[i];
        kept++;
    }
    if (x->kernel_inflight) x->kernel_inflight -= (uint32_t)kept < x->kernel_inflight ? (uint32_t)kept : x->kernel_inflight;
    return kept;
}

/* One iocb on a device file, the guard set: its I/O done now, then kept in flight on the context.
 * 0, or -errno: the context destroyed meanwhile (EINVAL), no memory to keep it (EAGAIN, as the kernel
 * says when it has none); refused so, it did nothing. */
static int aio_emulate(struct aio_ctx *x, struct iocb *cb, uint64_t e) {
    atomic_store(&x->emulated, 1);
    pthread_mutex_lock(&x->mu);
    struct dbt_aio_req *r = x->dead ? NULL : dbt_aio_new(&x->q);
    int no = x->dead ? -EINVAL : -EAGAIN;
    pthread_mutex_unlock(&x->mu);
    if (!r) return no;
    uint64_t t0 = now_ns();
    int op;
    int64_t res = aio_do(cb, e, &op, t0);
    uint64_t host_end = now_ns(), len = op == DBT_OP_FLUSH ? 0 : (uint64_t)res;
    r->ev = (struct dbt_aio_event){cb->aio_data, (uint64_t)(uintptr_t)cb, res, 0};
    struct call_trace *ct = (struct call_trace *)r->scratch;
    ct->fd = (int)cb->aio_fildes;
    ct->size = UINT64_MAX;
    ct->held = 0;
    memcpy(r->scratch + sizeof *ct, &(uint32_t){thread_id()}, sizeof(uint32_t));
    int moved = res > 0 || (op == DBT_OP_FLUSH && res == 0);
    /* A buffered read or write is done in io_submit, as Linux does it (the page cache's time is the
     * submitter's); a direct one, and any fsync (Linux hands it to a worker), completes later. */
    int at_once = !moved || (op != DBT_OP_FLUSH && !(FD_FLAGS(e) & DBT_TF_DIRECT));
    r->at_once = 0;
    if (at_once) {
        uint64_t ended = moved ? account((int)cb->aio_fildes, e, op, (uint64_t)cb->aio_offset, len, t0, 0) : 0;
        r->call = (struct dbt_call){t0, ended ? ended : now_ns(), 0, 0, UINT64_MAX, -1, 0, (uint8_t)op,
                                    (uint8_t)FD_DEV(e), 0};
        r->out.charged = 0; /* counted and traced by account, or not at all (an error) */
        r->at_once = ended != 0;
    } else {
        r->call = (struct dbt_call){t0, host_end, op == DBT_OP_FLUSH ? 0 : (uint64_t)cb->aio_offset, len,
                                    UINT64_MAX, FD_FILE(e), 0, (uint8_t)op, (uint8_t)FD_DEV(e), FD_FLAGS(e)};
    }
    pthread_mutex_lock(&x->mu);
    if (at_once) {
        dbt_aio_submit_done(&x->q, r, r->call.host_end);
    } else {
        struct dbt_emulate_hooks hooks = {dbt_trace_active() ? trace_request : NULL, file_size_of, NULL};
        dbt_aio_submit(&x->q, g_state, r, &hooks);
        if (r->out.charged)
            atomic_fetch_add_explicit(&g_state->dev[r->call.dev].c.host_ns, host_end - t0, memory_order_relaxed);
    }
    cond_broadcast_own(&x->cv);
    aio_wake_kernel_waiters(x, (int)cb->aio_fildes);
    pthread_mutex_unlock(&x->mu);
    return 0;
}

/* io_submit: how many iocbs were taken, or -errno. *xp: the context's record, once one was needed. */
static long aio_submit_held(uint64_t ctx, long nr, struct iocb **iocbs, struct aio_ctx **xp) {
    if (nr < 0) return -EINVAL;
    struct aio_ctx *x = NULL;
    long done = 0;
    while (done < nr) {
        long k = done; /* a run of iocbs for the kernel, then one for the emulation */
        uint64_t e = 0;
        while (k < nr && !aio_emulable(iocbs[k], &e)) k++;
        if (k > done) {
            long r = kernel_call(SYS_io_submit, (long)ctx, k - done, (long)(iocbs + done), 0, 0, 0);
            if (r < 0) return done ? done : -errno;
            if (!x) *xp = x = aio_find(ctx, 1); /* a reap must know the kernel has some, should ours come */
            if (x) {
                pthread_mutex_lock(&x->mu);
                x->kernel_inflight += (uint32_t)r;
                pthread_mutex_unlock(&x->mu);
            }
            done += r;
            if (done < k) break;
        }
        if (k < nr) {
            long no = aio_refused(iocbs[k]);
            if (no) return done ? done : no;
            if (!x) *xp = x = aio_find(ctx, 1);
            if (!x) return done ? done : -EINVAL;
            tl_guard++;
            int refused = aio_emulate(x, iocbs[k], e);
            tl_guard--;
            if (refused) return done ? done : refused;
            done++;
        }
    }
    return done;
}

static long aio_submit(uint64_t ctx, long nr, struct iocb **iocbs) {
    if (UNLIKELY(g_cpu_excess > 0.0)) cpu_dilate(); /* a slower CPU came here later */
    struct aio_ctx *x = NULL;
    long r = aio_submit_held(ctx, nr, iocbs, &x);
    if (x) aio_put(x);
    return r;
}

/* A reaped request's record: the call, traced by the thread that submitted it, and how late the reap
 * that waited for it returned. */
static void aio_reaped(struct dbt_aio_req *r, uint64_t end, int waited) {
    if (!r->out.charged) return;
    /* late only if the reap waited for it: a program that came for it later was busy, not held */
    record_late(&g_state->dev[r->call.dev], r->done, r->call.host_end, waited ? end : r->done);
    if (dbt_trace_active()) {
        struct call_trace *ct = (struct call_trace *)r->scratch;
        uint32_t tid;
        memcpy(&tid, r->scratch + sizeof *ct, sizeof tid);
        uint32_t own = tl_tid;
        tl_tid = tid; /* the record is the submitter's */
        struct dbt_outcome o = r->out;
        o.complete = r->done; /* what the reap waited for (its real I/O's end, if the model's came first) */
        o.flags |= DBT_TF_ASYNC;
        trace_call(ct, &r->call, &o, end);
        tl_tid = own;
    }
}

/* io_getevents: at least min_nr and at most nr events (fewer once the timeout passed), or -errno.
 * Traced as a sleep (DBT_SF_AIO) that the latest completion among the emulated requests it returned
 * ended (one done at once in io_submit, a buffered one, completed as its call returned): a replay
 * holds the reaper until that request completes there. */
static long aio_getevents(uint64_t ctx, long min_nr, long nr, struct io_event *events, const struct timespec *timeout) {
    if (UNLIKELY(g_cpu_excess > 0.0)) cpu_dilate();
    int traced = sync_traced();
    uint64_t t_enter = traced ? now_ns() : 0, latest = 0;
    uint32_t emulated = 0;
    /* a record even for a context with nothing of ours yet: a request submitted while this reap waits
     * in the kernel must be able to wake it */
    struct aio_ctx *x = aio_find(ctx, 1);
    if (!x) {
        long r = kernel_call(SYS_io_getevents, (long)ctx, min_nr, nr, (long)events, (long)timeout, 0);
        return r < 0 ? -errno : r;
    }
    if (min_nr < 0 || nr < 0 || min_nr > nr) {
        aio_put(x);
        return -EINVAL;
    }
    uint64_t deadline = timeout ? now_ns() + (uint64_t)timeout->tv_sec * 1000000000ull + (uint64_t)timeout->tv_nsec
                                : UINT64_MAX;
    long got = 0;
    int waited = 0;
    tl_guard++;
    pthread_mutex_lock(&x->mu);
    for (;;) {
        if (x->dead) {
            got = got ? got : -EINVAL;
            break;
        }
        if ((x->kernel_inflight || x->wakes_sent) && got < nr) {
            struct timespec zero = {0, 0};
            long k = kernel_call(SYS_io_getevents, (long)ctx, 0, nr - got, (long)(events + got), (long)&zero, 0);
            if (k > 0) got += aio_drop_wakes(x, events + got, k);
        }
        uint64_t now = now_ns(), next = UINT64_MAX;
        struct dbt_aio_req *out[64];
        struct dbt_emulate_hooks hooks = {dbt_trace_active() ? trace_request : NULL, file_size_of, NULL};
        while (got < nr) {
            uint32_t want = nr - got < 64 ? (uint32_t)(nr - got) : 64;
            uint32_t n = dbt_aio_reap(&x->q, g_state, &hooks, now, want, out, &next);
            for (uint32_t i = 0; i < n; i++) {
                aio_reaped(out[i], now, waited);
                if (out[i]->out.charged || out[i]->at_once) {
                    emulated++;
                    if (out[i]->done > latest) latest = out[i]->done;
                }
                memcpy(&events[got++], &out[i]->ev, sizeof(struct io_event));
                dbt_aio_release(&x->q, out[i]);
            }
            if (n < want) break;
        }
        if (got >= min_nr || now >= deadline) break;
        if (!x->q.count) { /* nothing of ours in flight: wait in the kernel, its EINTR and all, as unemulated */
            struct timespec left, *lp = NULL;
            if (deadline != UINT64_MAX) {
                left = (struct timespec){(time_t)((deadline - now) / 1000000000ull), (long)((deadline - now) % 1000000000ull)};
                lp = &left;
            }
            x->kernel_waiters++;
            pthread_mutex_unlock(&x->mu);
            long k = kernel_call(SYS_io_getevents, (long)ctx, min_nr - got, nr - got, (long)(events + got), (long)lp, 0);
            int err = errno;
            pthread_mutex_lock(&x->mu);
            x->kernel_waiters--;
            if (k < 0) {
                got = got ? got : -err;
                break;
            }
            long mine = aio_drop_wakes(x, events + got, k);
            got += mine;
            if (got >= min_nr || (lp && mine == k && now_ns() >= deadline)) break;
            continue; /* woken for an emulated request, or the wait was cut short by a wake */
        }
        /* Wait for the first completion due, the timeout, or a submission (which may complete sooner):
         * on the condition variable to shortly before it, then the rest as a synchronous call waits. */
        uint64_t until = next < deadline ? next : deadline;
        if (x->kernel_inflight && until > now + 1000000ull) until = now + 1000000ull; /* the kernel's: polled */
        uint64_t lead = atomic_load_explicit(&g_state->wake_p90_ns, memory_order_relaxed) + LEAD_MARGIN_NS + EARLY_NS;
        if (until == UINT64_MAX) {
            cond_wait_own(&x->cv, &x->mu, NULL);
        } else if (until > now + lead) {
            uint64_t t = until - lead;
            struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
            cond_wait_own(&x->cv, &x->mu, &ts);
        } else {
            pthread_mutex_unlock(&x->mu);
            uint64_t end;
            (void)wait_until(until, &end); /* the spin is the program's wait for its device, not its work */
            pthread_mutex_lock(&x->mu);
        }
        waited = 1;
    }
    pthread_mutex_unlock(&x->mu);
    aio_put(x);
    tl_guard--;
    if (traced) {
        uint64_t t1 = now_ns();
        trace_sync_until(DBT_SYNC_SLEEP, DBT_SF_AIO, ctx, 0, t_enter, t1, emulated, emulated ? latest : t1);
    }
    if (UNLIKELY(g_cpu_excess > 0.0)) tl_cpu_mark = thread_cpu_ns(); /* the wait was the device's, not CPU */
    return got;
}

/* io_destroy: waits, as Linux does, until what is in flight completed; a waiting reap returns. */
static long aio_destroy(uint64_t ctx) {
    struct aio_ctx *x = aio_find(ctx, 0);
    if (x) {
        tl_guard++;
        aio_unlink(x); /* the kernel may give the id to the next io_setup */
        pthread_mutex_lock(&x->mu);
        x->dead = 1;
        cond_broadcast_own(&x->cv);
        for (;;) {
            struct dbt_aio_req *out[64];
            uint64_t next, now = now_ns();
            uint32_t n;
            while ((n = dbt_aio_reap(&x->q, g_state, NULL, now, 64, out, &next)) > 0)
                for (uint32_t i = 0; i < n; i++) dbt_aio_release(&x->q, out[i]);
            if (next == UINT64_MAX) break;
            pthread_mutex_unlock(&x->mu);
            uint64_t end;
            (void)wait_until(next, &end);
            pthread_mutex_lock(&x->mu);
        }
        pthread_mutex_unlock(&x->mu);
        aio_put(x);
        tl_guard--;
    }
    long r = kernel_call(SYS_io_destroy, (long)ctx, 0, 0, 0, 0, 0);
    return r < 0 ? -errno : 0;
}

static long real_syscall_of(long number, long a, long b, long c, long d, long e, long f) {
#if KERNEL_CALL_OWN
    return LIKELY(real_syscall != NULL) ? real_syscall(number, a, b, c, d, e, f) : kernel_call(number, a, b, c, d, e, f);
#else /* kernel_call is this very function's caller here */
    ENSURE_REAL(syscall, -1);
    return real_syscall(number, a, b, c, d, e, f);
#endif
}

#ifdef SYS_futex
/* A futex waited on or woken through syscall() (MariaDB's locks and group commit: trace.h), traced as
 * a sleep that a wake ended, or a wake that ended sleeps: a replay then keeps the wait between threads
 * as a dependency. A wait that timed out is traced too (len 0: a timer's sleep, which nobody ended). A
 * wait that did not sleep (the word had changed: EAGAIN) or was interrupted, and a wake that woke
 * nobody, are not recorded. The call itself is passed on unchanged. */
static long futex_call(long a, long b, long c, long d, long e, long f) {
    int cmd = (int)b & FUTEX_CMD_MASK;
    int waits = cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET;
    int wakes = cmd == FUTEX_WAKE || cmd == FUTEX_WAKE_BITSET;
    if (LIKELY(!(waits ? sleep_traceable() : wakes && sync_traced())))
        return real_syscall_of(SYS_futex, a, b, c, d, e, f);
    uint64_t t0 = now_ns();
    long r = real_syscall_of(SYS_futex, a, b, c, d, e, f);
    int saved = errno;
    uint32_t own = ((int)b & FUTEX_PRIVATE_FLAG) != 0;
    if (waits && (r == 0 || saved == ETIMEDOUT) && sync_traced())
        trace_sync(DBT_SYNC_SLEEP, DBT_SF_FUTEX, (uint64_t)a, own, t0, now_ns(), r == 0);
    else if (wakes && r > 0)
        trace_sync(DBT_SYNC_WAKE, DBT_SF_FUTEX, (uint64_t)a, own, t0, now_ns(), r);
    errno = saved;
    return r;
}
#endif

/* libc's syscall(): the AIO calls of a program without libaio (MariaDB reaps through it), and libaio's
 * own, come here; io_uring is reached through it too (fio's engine, liburing's setup), and futexes a
 * program waits on itself (futex_call). Up to six arguments are passed on, as libc's does. */
EXPORT long syscall(long number, ...) {
    va_list ap;
    va_start(ap, number);
    long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
    long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
    va_end(ap);
#ifdef SYS_futex
    if (number == SYS_futex && UNLIKELY(g_state != NULL) && !tl_guard) return futex_call(a, b, c, d, e, f);
#endif
    if (UNLIKELY(g_state != NULL) && !tl_guard &&
        (number == SYS_io_submit || number == SYS_io_getevents || number == SYS_io_destroy ||
         (number == SYS_io_pgetevents && aio_emulating((uint64_t)a)))) {
        /* io_pgetevents' signal mask matters to a wait a signal would end: the emulated one is not (a
         * context with nothing emulated is the kernel's, mask and all) */
        long r = number == SYS_io_submit    ? aio_submit((uint64_t)a, b, (struct iocb **)c)
                 : number == SYS_io_destroy ? aio_destroy((uint64_t)a)
                                            : aio_getevents((uint64_t)a, b, c, (struct io_event *)d, (const struct timespec *)e);
        if (r < 0) {
            errno = (int)-r;
            return -1;
        }
        return r;
    }
    long r = real_syscall_of(number, a, b, c, d, e, f);
    if (UNLIKELY(g_state != NULL) && r >= 0) {
#if defined(SYS_io_uring_setup) && defined(SYS_io_uring_enter) && defined(SYS_io_uring_register)
        if (number == SYS_io_uring_setup || number == SYS_io_uring_enter || number == SYS_io_uring_register)
            note_bypass(DBT_BYPASS_IO_URING, NULL, -1);
#endif
    }
    return r;
}

/* liburing's ways to make a ring. Since 2.2 liburing makes its system calls itself (no libc syscall(),
 * no libc mmap), so a ring a program sets up through it is seen only here, where a program linked to
 * it calls in (unversioned, these stand for its versioned ones, as libaio's below). The ring's I/O goes
 * round the interposer: a ring made while emulating is a bypass, which ends the measurement loudly.
 * A program with liburing linked in statically is out of any interposer's sight. */
static int (*real_io_uring_queue_init)(unsigned, void *, unsigned);
static int (*real_io_uring_queue_init_params)(unsigned, void *, void *);
static int (*real_io_uring_setup)(unsigned, void *);

static int uring_made(int r) {
    if (UNLIKELY(g_state != NULL) && r >= 0) note_bypass(DBT_BYPASS_IO_URING, NULL, -1);
    return r;
}

EXPORT int io_uring_queue_init(unsigned entries, void *ring, unsigned flags) {
    if (UNLIKELY(!real_io_uring_queue_init)) {
        resolve((void **)&real_io_uring_queue_init, "io_uring_queue_init");
        if (!real_io_uring_queue_init) return -ENOSYS; /* liburing returns -errno */
    }
    return uring_made(real_io_uring_queue_init(entries, ring, flags));
}

EXPORT int io_uring_queue_init_params(unsigned entries, void *ring, void *params) {
    if (UNLIKELY(!real_io_uring_queue_init_params)) {
        resolve((void **)&real_io_uring_queue_init_params, "io_uring_queue_init_params");
        if (!real_io_uring_queue_init_params) return -ENOSYS;
    }
    return uring_made(real_io_uring_queue_init_params(entries, ring, params));
}

EXPORT int io_uring_setup(unsigned entries, void *params) {
    if (UNLIKELY(!real_io_uring_setup)) {
        resolve((void **)&real_io_uring_setup, "io_uring_setup");
        if (!real_io_uring_setup) return -ENOSYS;
    }
    return uring_made(real_io_uring_setup(entries, params));
}

/* libaio's calls (a library of its own, versioned: these unversioned ones stand for them). Each
 * returns -errno, as libaio does; with no state, libaio's own. io_getevents is taken whole: libaio
 * answers a zero timeout from the ring in memory, which the emulated requests never reach. */
EXPORT int io_submit(void *ctx, long nr, struct iocb **iocbs) {
    if (g_state && !tl_guard) return (int)aio_submit((uint64_t)(uintptr_t)ctx, nr, iocbs);
    if (UNLIKELY(!real_io_submit)) {
        resolve((void **)&real_io_submit, "io_submit");
        if (!real_io_submit) return -ENOSYS; /* libaio returns -errno */
    }
    return real_io_submit(ctx, nr, iocbs);
}

EXPORT int io_getevents(void *ctx, long min_nr, long nr, struct io_event *events, struct timespec *timeout) {
    if (g_state && !tl_guard) return (int)aio_getevents((uint64_t)(uintptr_t)ctx, min_nr, nr, events, timeout);
    if (UNLIKELY(!real_io_getevents)) {
        resolve((void **)&real_io_getevents, "io_getevents");
        if (!real_io_getevents) return -ENOSYS;
    }
    return real_io_getevents(ctx, min_nr, nr, events, timeout);
}

EXPORT int io_destroy(void *ctx) {
    if (g_state && !tl_guard) return (int)aio_destroy((uint64_t)(uintptr_t)ctx);
    if (UNLIKELY(!real_io_destroy)) {
        resolve((void **)&real_io_destroy, "io_destroy");
        if (!real_io_destroy) return -ENOSYS;
    }
    return real_io_destroy(ctx);
}

/* POSIX AIO: glibc's helper threads do the reads and writes inside libc. */
#define WRAP_AIO(ret, name, params, args, cb)                                                      \
    EXPORT ret name params {                                                                       \
        ENSURE(name, -1);                                                                          \
        ret r = real_##name args;                                                                  \
        if (r == 0 && g_state && on_device((cb)->aio_fildes)) note_bypass(DBT_BYPASS_POSIX_AIO, NULL, (cb)->aio_fildes); \
        return r;                                                                                  \
    }

/* lio_listio: EIO says some of the list failed, not that none was queued. */
#define WRAP_LIO(ret, name, params, args)                                                          \
    EXPORT ret name params {                                                                       \
        ENSURE(name, -1);                                                                          \
        ret r = real_##name args;                                                                  \
        int saved = errno;                                                                         \
        for (int i = 0; g_state && (r == 0 || saved == EIO) && i < nent; i++) {                    \
            if (list[i] && list[i]->aio_lio_opcode != LIO_NOP && on_device(list[i]->aio_fildes)) { \
                note_bypass(DBT_BYPASS_POSIX_AIO, NULL, list[i]->aio_fildes);                      \
                break;                                                                             \
            }                                                                                      \
        }                                                                                          \
        errno = saved;                                                                             \
        return r;                                                                                  \
    }

/* splice and sendfile move a file's data inside the kernel (copy_file_range is accounted instead). */
#define WRAP_KERNEL_COPY(ret, name, params, args, kind, fd_a, fd_b)                                \
    EXPORT ret name params {                                                                       \
        ENSURE(name, -1);                                                                          \
        ret r = real_##name args;                                                                  \
        if (r > 0 && g_state) {                                                                    \
            int saved = errno;                                                                     \
            int fd = on_device(fd_a) ? (fd_a) : on_device(fd_b) ? (fd_b) : -1;                     \
            if (fd >= 0) note_bypass(kind, NULL, fd);                                              \
            errno = saved;                                                                         \
        }                                                                                          \
        return r;                                                                                  \
    }

/* ---- wrappers: starting programs ---------------------------------------------------------- */

/* Before a program replaces this one (or a spawned child starts it): will the interposer be in it?
 * Not if its environment lost our LD_PRELOAD entry or DBTIER_IOTAP, nor if it is static or of
 * another architecture (ld.so, which loads us, never runs). Its I/O would then be missing from the
 * figures: a bypass naming the program. Then the real call, with exactly the caller's arguments.
 * execve may be called from a signal handler or a vfork child: only the stack, system calls and
 * the state's atomics here, and errno as it was. */

static char g_self[PATH_MAX];       /* this library as ld.so loaded it */
static const char *g_self_base;     /* its file name */
static char g_state_path[PATH_MAX]; /* DBTIER_IOTAP, as this process attached it */
static unsigned char g_elf_class, g_elf_data;
static uint16_t g_elf_machine;

enum { RUNS_WITH_US, RUNS_STATIC, RUNS_FOREIGN };

static int open_ro(int dirfd, const char *path) {
    return (int)kernel_call(SYS_openat, dirfd, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0);
}
static ssize_t read_at(int fd, void *buf, size_t n, off_t off) {
    return kernel_call(SYS_pread64, fd, (long)buf, (long)n, (long)off, 0, 0);
}
static void close_fd(int fd) { (void)kernel_call(SYS_close, fd, 0, 0, 0, 0, 0); }

/* What the program in the open file fd is. ELF: of our machine or not, with an interpreter (ld.so,
 * which loads us) or without. A `#!` script is its interpreter's kind, followed as the kernel does,
 * 4 deep. Anything unreadable or unknown counts as one we will be in: the exec then fails, or runs as
 * the caller's check would (execvp hands ENOEXEC files to /bin/sh). A loop, not recursion, and small
 * buffers: execve may run on a signal handler's small stack. */
static int program_kind(int fd) {
    union {
        unsigned char b[256]; /* the kernel's BINPRM_BUF_SIZE: all it reads of a `#!` line */
        ElfW(Ehdr) eh;
    } h;
    int kind = RUNS_WITH_US, opened = -1;
    for (int depth = 0; depth <= 4; depth++) {
        ssize_t n = read_at(fd, h.b, sizeof h.b, 0);
        if (n >= (ssize_t)sizeof h.eh && !memcmp(h.b, ELFMAG, SELFMAG)) {
            if (!g_elf_class) break; /* our own header unknown: nothing to compare with */
            if (h.b[EI_CLASS] != g_elf_class || h.b[EI_DATA] != g_elf_data || h.eh.e_machine != g_elf_machine) {
                kind = RUNS_FOREIGN;
                break;
            }
            if ((h.eh.e_type != ET_EXEC && h.eh.e_type != ET_DYN) || h.eh.e_phentsize != sizeof(ElfW(Phdr))) break;
            ElfW(Phdr) ph[8];
            kind = RUNS_STATIC; /* unless a PT_INTERP turns up: without one, ld.so never runs */
            for (unsigned i = 0; i < h.eh.e_phnum && kind == RUNS_STATIC;) {
                unsigned k = h.eh.e_phnum - i < 8 ? h.eh.e_phnum - i : 8;
                if (read_at(fd, ph, k * sizeof ph[0], (off_t)(h.eh.e_phoff + i * sizeof ph[0])) !=
                    (ssize_t)(k * sizeof ph[0]))
                    kind = RUNS_WITH_US;
                for (unsigned j = 0; j < k; j++)
                    if (ph[j].p_type == PT_INTERP) kind = RUNS_WITH_US;
                i += k;
            }
            break;
        }
        if (n <= 2 || h.b[0] != '#' || h.b[1] != '!' || depth == 4) break;
        size_t i = 2, len = 0;
        while (i < (size_t)n && (h.b[i] == ' ' || h.b[i] == '\t')) i++;
        while (i < (size_t)n && h.b[i] != ' ' && h.b[i] != '\t' && h.b[i] != '\n' && h.b[i] != '\0')
            h.b[len++] = h.b[i++]; /* the interpreter's path, moved to the front */
        h.b[len] = '\0';
        int next = len ? open_ro(AT_FDCWD, (const char *)h.b) : -1;
        if (opened >= 0) close_fd(opened);
        opened = fd = next;
        if (fd < 0) break;
    }
    if (opened >= 0) close_fd(opened);
    return kind;
}

/* LD_PRELOAD names this library: its entries are separated by spaces or colons (ld.so's rule). */
static int preload_names_us(const char *list) {
    size_t self_len = strlen(g_self), base_len = strlen(g_self_base);
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, " :");
        const char *slash = memrchr(p, '/', n);
        const char *base = slash ? slash + 1 : p;
        size_t blen = (size_t)(p + n - base);
        if ((n == self_len && !memcmp(p, g_self, n)) || (blen == base_len && !memcmp(base, g_self_base, blen)))
            return 1;
        p += n;
        if (*p) p++;
    }
    return 0;
}

/* The new program's environment still brings the interposer and this run's state. */
static int env_keeps_us(char *const envp[]) {
    const char *preload = NULL, *state = NULL;
    for (size_t i = 0; envp && envp[i]; i++) {
        if (!strncmp(envp[i], "LD_PRELOAD=", 11)) preload = envp[i] + 11; /* ld.so takes the last */
        else if (!state && !strncmp(envp[i], "DBTIER_IOTAP=", 13)) state = envp[i] + 13; /* getenv, the first */
    }
    return preload && (!g_self_base || preload_names_us(preload)) && state &&
           (!g_state_path[0] || !strcmp(state, g_state_path));
}

/* The program at dirfd/path (or open at fd, fd >= 0) is about to start with envp. */
static void check_exec(int dirfd, const char *path, int fd, char *const envp[]) {
    if (!g_state || atomic_load_explicit(&g_state->paused, memory_order_relaxed)) return;
    int saved = errno;
    struct stat st;
    int own = fd < 0 ? open_ro(dirfd, path) : fd;
    int kind = -1;
    if (own >= 0) {
        if (fstat(own, &st) == 0 && S_ISREG(st.st_mode)) kind = program_kind(own);
        if (own != fd) close_fd(own);
    } else if (faccessat(dirfd, path, X_OK, AT_EACCESS) == 0 && fstatat(dirfd, path, &st, 0) == 0 &&
               S_ISREG(st.st_mode)) {
        kind = RUNS_WITH_US; /* executable, not readable: only its environment can be judged */
    }
    const char *shown = fd < 0 ? path : NULL; /* an fd's program is named by its link */
    if (kind == RUNS_STATIC) note_bypass(DBT_BYPASS_EXEC_STATIC, shown, fd);
    else if (kind == RUNS_FOREIGN) note_bypass(DBT_BYPASS_EXEC_FOREIGN, shown, fd);
    else if (kind == RUNS_WITH_US && !env_keeps_us(envp)) note_bypass(DBT_BYPASS_EXEC_ENV, shown, fd);
    errno = saved;
}

/* execvp's search (and posix_spawnp's): the first PATH entry with an executable regular file of that
 * name, in buf; the name itself when it has a slash; NULL when none would run. */
static const char *search_path(const char *file, char *buf, size_t cap) {
    if (strchr(file, '/')) return file;
    if (!g_state || !*file) return NULL;
    const char *p = getenv("PATH");
    if (!p) p = "/bin:/usr/bin"; /* glibc's default */
    size_t flen = strlen(file);
    for (;;) {
        const char *end = strchrnul(p, ':');
        size_t dlen = (size_t)(end - p);
        if (dlen + flen + 2 <= cap) {
            memcpy(buf, p, dlen);
            size_t at = dlen;
            if (dlen) buf[at++] = '/'; /* an empty entry is the current folder */
            memcpy(buf + at, file, flen + 1);
            struct stat st;
            if (faccessat(AT_FDCWD, buf, X_OK, AT_EACCESS) == 0 && stat(buf, &st) == 0 && S_ISREG(st.st_mode))
                return buf;
        }
        if (!*end) return NULL;
        p = end + 1;
    }
}

static void check_exec_search(const char *file, char *const envp[]) {
    char buf[PATH_MAX];
    const char *path = g_state ? search_path(file, buf, sizeof buf) : NULL;
    if (path) check_exec(AT_FDCWD, path, -1, envp);
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
    ENSURE_REAL(execve, -1);
    check_exec(AT_FDCWD, path, -1, envp);
    return real_execve(path, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[]) {
    ENSURE_REAL(execv, -1);
    check_exec(AT_FDCWD, path, -1, environ);
    return real_execv(path, argv);
}

EXPORT int execvp(const char *file, char *const argv[]) {
    ENSURE_REAL(execvp, -1);
    check_exec_search(file, environ);
    return real_execvp(file, argv);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
    ENSURE_REAL(execvpe, -1);
    check_exec_search(file, envp);
    return real_execvpe(file, argv, envp);
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
    ENSURE_REAL(fexecve, -1);
    if (fd >= 0) check_exec(fd, "", fd, envp);
    return real_fexecve(fd, argv, envp);
}

EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags) {
    ENSURE_REAL(execveat, -1);
    const char *volatile check = path;
    if ((flags & AT_EMPTY_PATH) && check && !*path) check_exec(dirfd, path, dirfd, envp);
    else if (check) check_exec(dirfd, path, -1, envp);
    return real_execveat(dirfd, path, argv, envp, flags);
}

EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
                       const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    ENSURE_REAL(posix_spawn, ENOSYS);
    check_exec(AT_FDCWD, path, -1, envp);
    return real_posix_spawn(pid, path, actions, attr, argv, envp);
}

EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
                        const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    ENSURE_REAL(posix_spawnp, ENOSYS);
    check_exec_search(file, envp);
    return real_posix_spawnp(pid, file, actions, attr, argv, envp);
}

/* execl, execle and execlp gather their arguments as glibc does (a stack array, E2BIG past INT_MAX)
 * and go on as execve and execvp: glibc's own do the same, through calls no wrapper sees. */
#define GATHER_ARGS(argv, arg, envp_out)                                                           \
    ptrdiff_t argc_;                                                                               \
    va_list ap_;                                                                                   \
    va_start(ap_, arg);                                                                            \
    for (argc_ = 1; va_arg(ap_, const char *); argc_++) {                                          \
        if (argc_ == INT_MAX) {                                                                    \
            va_end(ap_);                                                                           \
            errno = E2BIG;                                                                         \
            return -1;                                                                             \
        }                                                                                          \
    }                                                                                              \
    va_end(ap_);                                                                                   \
    char *argv[argc_ + 1];                                                                         \
    va_start(ap_, arg);                                                                            \
    argv[0] = (char *)(arg);                                                                       \
    for (ptrdiff_t i_ = 1; i_ <= argc_; i_++) argv[i_] = va_arg(ap_, char *);                      \
    envp_out;                                                                                      \
    va_end(ap_)

EXPORT int execl(const char *path, const char *arg, ...) {
    GATHER_ARGS(argv, arg, (void)0);
    return execve(path, argv, environ);
}

EXPORT int execle(const char *path, const char *arg, ...) {
    char *const *envp;
    GATHER_ARGS(argv, arg, envp = va_arg(ap_, char *const *));
    return execve(path, argv, envp);
}

EXPORT int execlp(const char *file, const char *arg, ...) {
    GATHER_ARGS(argv, arg, (void)0);
    return execvp(file, argv);
}

/* ---- the wrappers: one for each line of calls.def, from its category's macro above ---------- */

#define WRAP_CUSTOM(...) /* written out above */
#define CALL(category, ret, name, params, ...) WRAP_##category(ret, name, params, __VA_ARGS__)
#include "calls.def"
#undef CALL

/* ---- process life ------------------------------------------------------------------------- */

static void after_fork_child(void) {
    g_pid = (uint32_t)getpid();
    tl_tid = 0; /* the child's one thread has a new id */
    g_aio = NULL; /* AIO contexts are not inherited (their records are the parent's, perhaps locked) */
    pthread_mutex_init(&g_aio_mu, NULL);
    tl_cpu_mark = 0; /* and a CPU clock of its own, from 0: it charges from its first call */
    if (g_state) {
        uint32_t procno = atomic_fetch_add(&g_state->attached, 1);
        dbt_trace_after_fork(procno);
        dbt_durlog_after_fork(procno);
    }
}

/* DBTIER_IOTAP is set, so this process belongs to an emulated run, but it cannot take part (most
 * often it runs as a user who cannot open the state). Its I/O would go unemulated and the run's
 * figures would be silently short, so it stops here, saying why: on stderr, and first on the
 * launcher's pipe (DBTIER_IOTAP_ERRFD), in one write so that the line arrives whole. */
__attribute__((noreturn)) static void cannot_emulate(const char *why, int permission) {
    char line[900];
    int n = snprintf(line, sizeof line,
                     "dbtier-iotap: %s; this process (pid %u, uid %u) cannot be emulated, so it stops here%s\n", why,
                     (unsigned)getpid(), (unsigned)getuid(),
                     permission ? ": run dbtier as the user the program runs as" : "");
    size_t len = n < 0 ? 0 : (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    if (len && line[len - 1] != '\n') line[len - 1] = '\n';
    const char *errfd = getenv("DBTIER_IOTAP_ERRFD");
    if (errfd && *errfd) {
        char *end;
        long fd = strtol(errfd, &end, 10);
        struct stat st;
        /* Only a pipe: the variable is inherited, and in a descendant the number may name a data file. */
        if (!*end && fd >= 0 && fd <= INT_MAX && fstat((int)fd, &st) == 0 && S_ISFIFO(st.st_mode))
            raw_write((int)fd, line, len);
    }
    raw_write(2, line, len);
    _exit(125);
}

/* What a started program needs to have to run with us: this library (as ld.so loaded it, and the
 * machine it is built for) and this run's state, compared with at each exec. */
static void iotap_init(void);
static void remember_self(const char *state_path) {
    Dl_info info;
    if (dladdr((void *)iotap_init, &info) && info.dli_fname && strlen(info.dli_fname) < sizeof g_self) {
        strcpy(g_self, info.dli_fname);
        const char *slash = strrchr(g_self, '/');
        g_self_base = slash ? slash + 1 : g_self;
        const ElfW(Ehdr) *eh = info.dli_fbase; /* the ELF header is mapped at the load address */
        if (eh && !memcmp(eh->e_ident, ELFMAG, SELFMAG)) {
            g_elf_class = eh->e_ident[EI_CLASS];
            g_elf_data = eh->e_ident[EI_DATA];
            g_elf_machine = eh->e_machine;
        }
    }
    if (strlen(state_path) < sizeof g_state_path) strcpy(g_state_path, state_path);
}

__attribute__((constructor(101))) static void iotap_init(void) {
    tl_guard++;
#define CALL(category, ret, name, ...) resolve((void **)&real_##name, #name);
#include "calls.def"
#undef CALL
    g_pid = (uint32_t)getpid();
    const char *path = getenv("DBTIER_IOTAP");
    if (path && *path) {
        char err[512];
        struct dbt_state *s = dbt_state_attach(path, err, sizeof err);
        if (!s) cannot_emulate(err, errno == EACCES || errno == EPERM);
        const char *reach = getenv("DBTIER_IOTAP_FD_REACH");
        if (reach && *reach) {
            unsigned long long v = strtoull(reach, NULL, 10);
            if (v >= 1 && v < FDTAB_REACH) g_fd_reach = (uint32_t)v;
        }
        if (!fdtab_chunk(0)) cannot_emulate("no memory for the fd table", 0);
        const char *spin = getenv("DBTIER_IOTAP_SPIN_NS");
        if (spin && *spin) g_spin_ns = strtoull(spin, NULL, 10);
        const char *scale = getenv("DBTIER_IOTAP_CPU_SCALE");
        if (scale && *scale) {
            char *end;
            double k = strtod(scale, &end);
            if (*end || !(k >= 1.0 && k <= 1000.0)) cannot_emulate("DBTIER_IOTAP_CPU_SCALE is not a factor from 1 to 1000", 0);
            g_cpu_excess = k - 1.0;
        }
        remember_self(path);
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* inherited by threads and children */
        uint32_t procno = atomic_fetch_add(&s->attached, 1);
        dbt_trace_configure(getenv("DBTIER_IOTAP_TRACE"), procno, &s->trace_failures);
        dbt_durlog_configure(getenv("DBTIER_IOTAP_DURLOG"), procno, &s->durlog_failures, &s->durlog_on);
        pthread_atfork(NULL, NULL, after_fork_child);
        g_state = s;
    }
    tl_guard--;
}
