/* Shared state of one emulation run. See state.h. */
#define _GNU_SOURCE
#include "state.h"
#include "shmlock.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mix64(uint64_t x) { /* splitmix64 finaliser */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Each device owns an equal slice of the file and chunk tables, so inserts need only its lock. */
static uint32_t files_per_dev(const struct dbt_state *s) { return DBT_FILE_CAP / (s->ndev ? s->ndev : 1); }
static uint32_t chunks_per_dev(const struct dbt_state *s) { return DBT_CHUNK_CAP / (s->ndev ? s->ndev : 1); }

/* Names and directories go into messages, paths and the JSON dump: no control characters. */
static int has_control(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return 1;
    return 0;
}

/* A string field of a spec: ended within its array, nothing after its end (a NUL inside a name
 * would hide the rest of it), not empty, and no control character. */
static int spec_string(const char *field, size_t cap, const char *what, char *err, size_t errlen) {
    const char *end = memchr(field, '\0', cap);
    if (!end) {
        snprintf(err, errlen, "its %s is longer than %zu bytes", what, cap - 1);
        return -1;
    }
    for (const char *p = end; p < field + cap; p++)
        if (*p) {
            snprintf(err, errlen, "its %s holds bytes after its end (a NUL inside it)", what);
            return -1;
        }
    if (end == field) {
        snprintf(err, errlen, "it has no %s", what);
        return -1;
    }
    if (has_control(field)) {
        snprintf(err, errlen, "a control character in its %s", what);
        return -1;
    }
    return 0;
}

int dbt_spec_params(const struct dbt_device_spec *spec, struct dbt_params *p, char *err, size_t errlen) {
    const struct dbt_device_ops *ops = dbt_ops_by_kind(spec->kind);
    if (!ops) {
        snprintf(err, errlen, "unknown device kind %d", spec->kind);
        return -1;
    }
    if (spec->nparams != (uint32_t)ops->nparams) {
        snprintf(err, errlen, "%s devices take %d parameters, %u given", ops->name, ops->nparams, spec->nparams);
        return -1;
    }
    dbt_params_defaults(p, ops->kind);
    for (int i = 0; i < ops->nparams; i++)
        if (dbt_params_set_index(p, ops->kind, i, spec->params[i], err, errlen) != 0) return -1;
    return 0;
}

int dbt_spec_device(const struct dbt_device_spec *spec, struct dbt_device_slot *d, char *err, size_t errlen) {
    if (spec_string(spec->name, sizeof spec->name, "name", err, errlen) != 0 ||
        spec_string(spec->dir, sizeof spec->dir, "directory", err, errlen) != 0)
        return -1;
    if (spec->dir[0] != '/') {
        snprintf(err, errlen, "its directory '%s' is not absolute", spec->dir);
        return -1;
    }
    if (dbt_spec_params(spec, &d->params, err, errlen) != 0) return -1;
    memcpy(d->name, spec->name, sizeof d->name);
    memcpy(d->dir, spec->dir, sizeof d->dir);
    d->dirlen = (uint32_t)strlen(d->dir);
    while (d->dirlen > 1 && d->dir[d->dirlen - 1] == '/') d->dir[--d->dirlen] = '\0';
    d->kind = spec->kind;
    return 0;
}

int dbt_spec_init(struct dbt_device_spec *spec, const char *name, const char *kind, const char *dir, char *err,
                  size_t errlen) {
    const struct dbt_device_ops *ops = dbt_ops_by_name(kind);
    memset(spec, 0, sizeof *spec);
    if (!ops) {
        snprintf(err, errlen, "unknown device kind '%s'", kind);
        return -1;
    }
    snprintf(spec->name, sizeof spec->name, "%s", name);
    snprintf(spec->dir, sizeof spec->dir, "%s", dir);
    spec->kind = ops->kind;
    spec->nparams = (uint32_t)ops->nparams;
    for (int i = 0; i < ops->nparams; i++) spec->params[i] = ops->params[i].def;
    return 0;
}

int dbt_spec_set(struct dbt_device_spec *spec, const char *param, double value, char *err, size_t errlen) {
    const struct dbt_device_ops *ops = dbt_ops_by_kind(spec->kind);
    for (int i = 0; ops && i < ops->nparams; i++)
        if (!strcmp(ops->params[i].name, param)) {
            spec->params[i] = value;
            return 0;
        }
    snprintf(err, errlen, "%s devices have no parameter '%s'", ops ? ops->name : "unknown", param);
    return -1;
}

/* The page cache's settings, each within what the cache can hold. */
static int check_pc_config(const struct dbt_pc_config *pc, char *err, size_t errlen) {
    if (pc->readahead_kb < DBT_PC_READAHEAD_KB_MIN || pc->readahead_kb > DBT_PC_READAHEAD_KB_MAX)
        snprintf(err, errlen, "page cache: readahead_kb %u is outside %u..%u", pc->readahead_kb,
                 DBT_PC_READAHEAD_KB_MIN, DBT_PC_READAHEAD_KB_MAX);
    else if (pc->dirty_background_pct < 1 || pc->dirty_background_pct > 100)
        snprintf(err, errlen, "page cache: dirty_background_pct %u is outside 1..100", pc->dirty_background_pct);
    else if (pc->dirty_pct < 1 || pc->dirty_pct > 100)
        snprintf(err, errlen, "page cache: dirty_pct %u is outside 1..100", pc->dirty_pct);
    else if (pc->dsync_data > 1)
        snprintf(err, errlen, "page cache: dsync_data %u is not 0 or 1", pc->dsync_data);
    else
        return 0;
    return -1;
}

void dbt_state_layout(uint64_t pc_bytes, struct dbt_state_layout *out) {
    out->off_files = (sizeof(struct dbt_state) + 4095) & ~4095ull;
    out->off_chunks = out->off_files + ((sizeof(struct dbt_file_entry) * DBT_FILE_CAP + 4095) & ~4095ull);
    out->off_arena = out->off_chunks + ((sizeof(struct dbt_chunk_entry) * DBT_CHUNK_CAP + 4095) & ~4095ull);
    out->size = out->off_arena + DBT_ARENA_BYTES;
    out->off_pc = 0;
    if (pc_bytes) {
        out->off_pc = (out->size + 4095) & ~4095ull;
        out->size = out->off_pc + ((dbt_pc_region_size(pc_bytes) + 4095) & ~4095ull);
    }
}

/* Creates the temporary file the state is built in: new (O_EXCL: never an existing file, nor a
 * symlink planted in its place) and private to its owner (the launcher hands it to a server's user
 * with chown when needed). A name left by a crashed earlier creator with the same pid is skipped. */
static int create_private(const char *state_path, char *tmp, size_t tmplen) {
    int fd = -1;
    for (unsigned attempt = 0; attempt < 100 && fd < 0; attempt++) {
        int n = snprintf(tmp, tmplen, "%s.tmp%d.%u", state_path, (int)getpid(), attempt);
        if (n < 0 || (size_t)n >= tmplen) { /* cut short, the name would be another file's */
            errno = ENAMETOOLONG;
            break;
        }
        fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd >= 0 && fchmod(fd, 0600) != 0) { /* 0600 exactly, whatever the umask took away */
        int saved = errno;
        close(fd);
        unlink(tmp);
        errno = saved;
        return -1;
    }
    return fd;
}

/* The host's wake-up delay: 20 timed sleeps of 100 us to an absolute time, the 90th percentile of how
 * late they woke (a few us on bare metal, 20-60 us on some VMs). About 3 ms. Measured with the timer
 * slack the interposed processes run with (1 ns), this process's own restored after. */
uint64_t dbt_host_wake_p90_ns(void) {
    enum { N = 20 };
    uint64_t late[N];
    int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    for (int i = 0; i < N; i++) {
        uint64_t wake = mono_ns() + 100000;
        struct timespec ts = {(time_t)(wake / 1000000000ull), (long)(wake % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
        uint64_t now = mono_ns();
        late[i] = now > wake ? now - wake : 0;
    }
    if (slack > 0) prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
    for (int i = 1; i < N; i++) /* insertion sort: twenty values */
        for (int j = i; j > 0 && late[j - 1] > late[j]; j--) {
            uint64_t t = late[j];
            late[j] = late[j - 1];
            late[j - 1] = t;
        }
    return late[N * 9 / 10];
}

int dbt_state_create(const char *state_path, uint32_t spec_version, const struct dbt_device_spec *devs, uint32_t n,
                     const struct dbt_pc_config *pc, char *err, size_t errlen) {
    if (spec_version != DBT_SPEC_VERSION) {
        snprintf(err, errlen, "device specs of version %u; this library takes version %d", spec_version,
                 DBT_SPEC_VERSION);
        return -1;
    }
    if (n > DBT_MAX_DEVICES) {
        snprintf(err, errlen, "%u devices: at most %d", n, DBT_MAX_DEVICES);
        return -1;
    }
    /* no page cache, and Linux's defaults for one: read_ahead_kb, the dirty ratios */
    struct dbt_pc_config pcc = {0, 128, 10, 20, 0};
    if (pc) pcc = *pc;
    if (check_pc_config(&pcc, err, errlen) != 0) return -1;
    struct dbt_state *hdr = calloc(1, sizeof *hdr);
    if (!hdr) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        char why[400];
        if (dbt_spec_device(&devs[i], &hdr->dev[i], why, sizeof why) != 0) {
            snprintf(err, errlen, "device %u: %s", i, why);
            free(hdr);
            return -1;
        }
    }
    hdr->ndev = n;
    hdr->magic = DBT_STATE_MAGIC;
    hdr->version = DBT_STATE_VERSION;
    hdr->epoch_ns = mono_ns();
    atomic_store(&hdr->wake_p90_ns, dbt_host_wake_p90_ns());
    struct dbt_state_layout lay;
    dbt_state_layout(pcc.bytes, &lay);
    hdr->off_files = lay.off_files;
    hdr->off_chunks = lay.off_chunks;
    hdr->off_arena = lay.off_arena;
    hdr->off_pc = lay.off_pc;
    hdr->pc_bytes = pcc.bytes;
    hdr->size = lay.size;
    hdr->dsync_data = pcc.dsync_data;
    atomic_store(&hdr->arena_used, 1); /* offset 0 means "no path" */
    uint64_t size = hdr->size;

    /* Written under a temporary name and renamed: an attaching process never sees half a state. */
    char tmp[4200];
    int fd = create_private(state_path, tmp, sizeof tmp);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        free(hdr);
        return -1;
    }
    struct dbt_state *s = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) == 0) s = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int saved = errno;
    close(fd);
    if (s == MAP_FAILED) {
        snprintf(err, errlen, "cannot size or map %s: %s", tmp, strerror(saved));
        unlink(tmp);
        free(hdr);
        return -1;
    }
    memcpy(s, hdr, sizeof *hdr);
    free(hdr);
    for (uint32_t i = 0; i < s->ndev; i++) {
        struct dbt_device_slot *d = &s->dev[i];
        dbt_shmlock_init(&d->lock);
        dbt_model_init(&d->model, d->kind, &d->params);
    }
    if (s->pc_bytes) dbt_pc_init(dbt_state_pc(s), s->pc_bytes, pcc.readahead_kb, pcc.dirty_background_pct, pcc.dirty_pct);
    msync(s, size, MS_SYNC);
    munmap(s, size);
    if (rename(tmp, state_path) != 0) {
        snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, state_path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Why a state file is refused: the message, and errno for the caller. */
static struct dbt_state *refuse(struct dbt_state *s, size_t mapped, int errnum, char *err, size_t errlen,
                                const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    if (s) munmap(s, mapped);
    errno = errnum;
    return NULL;
}

/* Everything attach checks in one device slot: what the interposer and the dump later use as an
 * index, an offset or a length, and the parameters the model divides by. */
static int check_device(const struct dbt_device_slot *d, char *why, size_t whylen) {
    if (!memchr(d->name, '\0', sizeof d->name)) {
        snprintf(why, whylen, "its name is not terminated within %d bytes", DBT_NAME_MAX);
        return -1;
    }
    if (!memchr(d->dir, '\0', sizeof d->dir)) {
        snprintf(why, whylen, "its directory is not terminated within %d bytes", DBT_DIR_MAX);
        return -1;
    }
    if (d->dirlen != strlen(d->dir)) {
        snprintf(why, whylen, "its directory length %u does not match its directory of %zu bytes", d->dirlen,
                 strlen(d->dir));
        return -1;
    }
    if (d->dir[0] != '/') {
        snprintf(why, whylen, "its directory is not absolute");
        return -1;
    }
    if (!dbt_ops_by_kind(d->kind)) {
        snprintf(why, whylen, "its kind %d is unknown", d->kind);
        return -1;
    }
    if (dbt_params_check(&d->params, d->kind, why, whylen) != 0) return -1;
    if (d->pend_head >= DBT_PENDING_WRITES || d->pend_count > DBT_PENDING_WRITES) {
        snprintf(why, whylen, "its writeback queue (head %u, %u entries) exceeds its %u entries", d->pend_head,
                 d->pend_count, DBT_PENDING_WRITES);
        return -1;
    }
    return dbt_model_check(&d->model, d->kind, why, whylen);
}

struct dbt_state *dbt_state_attach(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return refuse(NULL, 0, errno, err, errlen, "cannot open state %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return refuse(NULL, 0, EINVAL, err, errlen, "state %s is not a regular file", path);
    }
    if ((uint64_t)st.st_size < sizeof(struct dbt_state)) {
        close(fd);
        return refuse(NULL, 0, EINVAL, err, errlen, "state %s is too small to be a dbtier state (%llu bytes)", path,
                      (unsigned long long)st.st_size);
    }
    size_t mapped = (size_t)st.st_size;
    struct dbt_state *s = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int saved = errno;
    close(fd);
    if (s == MAP_FAILED) return refuse(NULL, 0, saved, err, errlen, "cannot map state %s: %s", path, strerror(saved));
    typedef unsigned long long ull;
#define REFUSE(...) return refuse(s, mapped, EINVAL, err, errlen, __VA_ARGS__)
    if (s->magic != DBT_STATE_MAGIC || s->version != DBT_STATE_VERSION)
        REFUSE("%s is not a dbtier state of version %d", path, DBT_STATE_VERSION);
    if (s->size != (uint64_t)st.st_size)
        REFUSE("state %s is damaged: it says %llu bytes, the file has %llu", path, (ull)s->size, (ull)st.st_size);
    if (s->ndev > DBT_MAX_DEVICES)
        REFUSE("state %s is damaged: %u devices, at most %d", path, s->ndev, DBT_MAX_DEVICES);
    struct dbt_state_layout lay;
    dbt_state_layout(s->pc_bytes, &lay);
    if (s->off_files != lay.off_files || s->off_chunks != lay.off_chunks || s->off_arena != lay.off_arena ||
        s->off_pc != lay.off_pc || s->size != lay.size)
        REFUSE("state %s is damaged: its regions (files %llu, chunks %llu, arena %llu, page cache %llu, end %llu) "
               "are not where they belong (%llu, %llu, %llu, %llu, %llu)",
               path, (ull)s->off_files, (ull)s->off_chunks, (ull)s->off_arena, (ull)s->off_pc, (ull)s->size,
               (ull)lay.off_files, (ull)lay.off_chunks, (ull)lay.off_arena, (ull)lay.off_pc, (ull)lay.size);
    char why[256];
    if (s->pc_bytes && dbt_pc_check(dbt_state_pc(s), s->pc_bytes, s->size - s->off_pc, why, sizeof why) != 0)
        REFUSE("state %s is damaged: %s", path, why);
    if (s->dsync_data > 1) REFUSE("state %s is damaged: dsync_data is %u", path, s->dsync_data);
    for (uint32_t i = 0; i < s->ndev; i++)
        if (check_device(&s->dev[i], why, sizeof why) != 0) REFUSE("state %s is damaged: device %u: %s", path, i, why);
    uint64_t arena_used = atomic_load(&s->arena_used);
    if (arena_used < 1 || arena_used > DBT_ARENA_BYTES)
        REFUSE("state %s is damaged: %llu bytes of its %u-byte path arena in use", path, (ull)arena_used,
               DBT_ARENA_BYTES);
    uint32_t first = atomic_load(&s->first_bypass);
    if (first > DBT_BYPASS_KINDS)
        REFUSE("state %s is damaged: its first bypass is of kind %u, of %d kinds", path, first - 1, DBT_BYPASS_KINDS);
    for (int k = 0; k < DBT_BYPASS_KINDS; k++) {
        const struct dbt_bypass *b = &s->bypass[k];
        uint32_t claim = atomic_load(&b->claim);
        if (claim > 2 || !memchr(b->program, '\0', sizeof b->program) || !memchr(b->path, '\0', sizeof b->path))
            REFUSE("state %s is damaged: the record of %s bypasses (claim %u) is not one the interposer writes", path,
                   dbt_bypass_names[k], claim);
    }
    if (atomic_load(&s->nfiles) > DBT_FILE_CAP)
        REFUSE("state %s is damaged: %u files, at most %u", path, atomic_load(&s->nfiles), DBT_FILE_CAP);
    const struct dbt_file_entry *t = dbt_files(s);
    for (uint32_t i = 0; i < DBT_FILE_CAP; i++) {
        if (!atomic_load_explicit(&t[i].key, memory_order_acquire)) continue;
        if (t[i].device >= s->ndev || t[i].path_off >= DBT_ARENA_BYTES)
            REFUSE("state %s is damaged: file %u has device %u of %u and path offset %u of %u", path, i,
                   t[i].device, s->ndev, t[i].path_off, DBT_ARENA_BYTES);
    }
#undef REFUSE
    return s;
}

const char *const dbt_bypass_names[DBT_BYPASS_KINDS] = {
    [DBT_BYPASS_MMAP] = "mmap",           [DBT_BYPASS_LIBAIO] = "libaio",
    [DBT_BYPASS_POSIX_AIO] = "posix_aio", [DBT_BYPASS_IO_URING] = "io_uring",
    [DBT_BYPASS_SPLICE] = "splice",       [DBT_BYPASS_SENDFILE] = "sendfile",
    [DBT_BYPASS_EXEC_ENV] = "exec_env",   [DBT_BYPASS_EXEC_STATIC] = "exec_static",
    [DBT_BYPASS_EXEC_FOREIGN] = "exec_foreign",
};

void dbt_state_note_bypass(struct dbt_state *s, int kind, const char *path, int fd) {
    if (!s || kind < 0 || kind >= DBT_BYPASS_KINDS || atomic_load_explicit(&s->paused, memory_order_relaxed)) return;
    struct dbt_bypass *b = &s->bypass[kind];
    atomic_fetch_add_explicit(&b->count, 1, memory_order_relaxed);
    uint32_t none = 0;
    if (atomic_load_explicit(&b->claim, memory_order_relaxed) || !atomic_compare_exchange_strong(&b->claim, &none, 1))
        return;
    uint32_t first = 0; /* the run's first bypass is the first kind claimed */
    atomic_compare_exchange_strong(&s->first_bypass, &first, (uint32_t)kind + 1);
    int saved = errno;
    b->pid = (uint32_t)getpid();
    char comm[DBT_BYPASS_COMM + 1] = "";
    if (prctl(PR_GET_NAME, comm, 0, 0, 0) != 0) comm[0] = '\0';
    comm[DBT_BYPASS_COMM - 1] = '\0';
    memcpy(b->program, comm, sizeof b->program);
    b->path[0] = '\0';
    if (path) {
        size_t n = strnlen(path, sizeof b->path - 1);
        memcpy(b->path, path, n);
        b->path[n] = '\0';
    } else if (fd >= 0) { /* "/proc/self/fd/N" by hand: snprintf is not async-signal-safe */
        char link[32] = "/proc/self/fd/", digits[12];
        int nd = 0;
        for (unsigned v = (unsigned)fd; nd == 0 || v; v /= 10) digits[nd++] = (char)('0' + v % 10);
        size_t at = strlen(link);
        while (nd) link[at++] = digits[--nd];
        link[at] = '\0';
        ssize_t n = readlink(link, b->path, sizeof b->path - 1);
        b->path[n > 0 ? n : 0] = '\0';
    }
    atomic_store_explicit(&b->claim, 2, memory_order_release);
    errno = saved;
}

/* A file's path from the arena, and its length: never read past the arena's end. */
static const char *file_path(struct dbt_state *s, uint32_t path_off, size_t *len) {
    if (!path_off || path_off >= DBT_ARENA_BYTES) {
        *len = 0;
        return "";
    }
    const char *p = dbt_arena(s) + path_off;
    *len = strnlen(p, DBT_ARENA_BYTES - path_off);
    return p;
}

int dbt_state_device_for_path(const struct dbt_state *s, const char *path) {
    int best = -1;
    uint32_t best_len = 0;
    for (uint32_t i = 0; i < s->ndev && i < DBT_MAX_DEVICES; i++) {
        const struct dbt_device_slot *d = &s->dev[i];
        if (d->dirlen >= DBT_DIR_MAX) continue; /* shared memory: checked where it is used as a length */
        if (d->dirlen < best_len && best >= 0) continue;
        if (strncmp(path, d->dir, d->dirlen) != 0) continue;
        char next = path[d->dirlen];
        if (next != '\0' && next != '/' && !(d->dirlen == 1 && d->dir[0] == '/')) continue;
        if (best < 0 || d->dirlen > best_len) {
            best = (int)i;
            best_len = d->dirlen;
        }
    }
    return best;
}

void dbt_dev_lock(struct dbt_device_slot *d) {
    dbt_shmlock_lock(&d->lock);
}

void dbt_dev_unlock(struct dbt_device_slot *d) { pthread_mutex_unlock(&d->lock); }

static int64_t file_probe(struct dbt_state *s, int dev, uint64_t key, int64_t *empty) {
    uint32_t per = files_per_dev(s), base = (uint32_t)dev * per;
    struct dbt_file_entry *t = dbt_files(s);
    *empty = -1;
    for (uint32_t i = 0; i < per; i++) {
        uint32_t slot = base + (uint32_t)((key + i) % per);
        uint64_t k = atomic_load_explicit(&t[slot].key, memory_order_acquire);
        if (k == key) return slot;
        if (k == 0) {
            *empty = slot;
            return -1;
        }
    }
    return -1;
}

static int64_t chunk_probe(struct dbt_state *s, int dev, uint64_t key, int64_t *empty) {
    uint32_t per = chunks_per_dev(s), base = (uint32_t)dev * per;
    struct dbt_chunk_entry *t = dbt_chunks(s);
    uint64_t h = mix64(key);
    *empty = -1;
    for (uint32_t i = 0; i < per; i++) {
        uint32_t slot = base + (uint32_t)((h + i) % per);
        uint64_t k = atomic_load_explicit(&t[slot].key, memory_order_acquire);
        if (k == key) return slot;
        if (k == 0) {
            *empty = slot;
            return -1;
        }
    }
    return -1;
}

/* Caller holds the device lock. */
static uint64_t chunk_insert_locked(struct dbt_state *s, int dev, uint64_t key) {
    int64_t empty, found = chunk_probe(s, dev, key, &empty);
    struct dbt_chunk_entry *t = dbt_chunks(s);
    if (found >= 0) return t[found].addr;
    struct dbt_device_slot *d = &s->dev[dev];
    uint64_t addr = d->alloc_cursor;
    d->alloc_cursor += DBT_CHUNK_BYTES;
    if (empty >= 0) {
        t[empty].addr = addr;
        atomic_store_explicit(&t[empty].key, key, memory_order_release);
    }
    return addr;
}

int64_t dbt_state_file_index(struct dbt_state *s, int dev, uint64_t st_dev, uint64_t st_ino, const char *path,
                             uint64_t size) {
    uint64_t key = mix64(st_ino ^ mix64(st_dev)) | 1;
    int64_t empty, found = file_probe(s, dev, key, &empty);
    if (found >= 0) return found;
    struct dbt_device_slot *d = &s->dev[dev];
    dbt_dev_lock(d);
    found = file_probe(s, dev, key, &empty);
    if (found < 0 && empty >= 0) {
        struct dbt_file_entry *e = &dbt_files(s)[empty];
        e->st_dev = st_dev;
        e->st_ino = st_ino;
        e->device = (uint32_t)dev;
        e->dsync_scope = (uint32_t)dbt_path_in_dsync_scope(path);
        /* The arena is shared by every device (each under its own lock): a slot is claimed with a
         * compare-and-swap, and arena_used never passes the arena's end (a full arena: no path). */
        size_t n = strlen(path) + 1;
        uint64_t off = atomic_load(&s->arena_used);
        while (off + n <= DBT_ARENA_BYTES && !atomic_compare_exchange_weak(&s->arena_used, &off, off + n)) {
        }
        if (off + n <= DBT_ARENA_BYTES) {
            memcpy(dbt_arena(s) + off, path, n);
            e->path_off = (uint32_t)off;
        }
        /* Existing data gets contiguous space, as if written once onto a fresh file system. */
        uint64_t nchunks = (size + DBT_CHUNK_BYTES - 1) / DBT_CHUNK_BYTES;
        for (uint64_t c = 0; c < nchunks; c++)
            chunk_insert_locked(s, dev, ((uint64_t)(empty + 1) << 32) | c);
        atomic_store_explicit(&e->key, key, memory_order_release);
        atomic_fetch_add(&s->nfiles, 1);
        found = empty;
    }
    dbt_dev_unlock(d);
    return found; /* -1 only when the table is full: the file is then counted but not traced by name */
}

uint64_t dbt_state_addr(struct dbt_state *s, int dev, int64_t file, uint64_t off) {
    uint64_t chunk = off / DBT_CHUNK_BYTES, within = off % DBT_CHUNK_BYTES;
    if (file < 0) return mix64(chunk) % (1ull << 40) / DBT_CHUNK_BYTES * DBT_CHUNK_BYTES + within;
    uint64_t key = ((uint64_t)(file + 1) << 32) | (chunk & 0xffffffffu);
    int64_t empty, found = chunk_probe(s, dev, key, &empty);
    if (found >= 0) return dbt_chunks(s)[found].addr + within;
    struct dbt_device_slot *d = &s->dev[dev];
    dbt_dev_lock(d);
    uint64_t addr = chunk_insert_locked(s, dev, key);
    dbt_dev_unlock(d);
    return addr + within;
}

/* Latency histogram: exact below 16 ns, then 8 buckets per power of two (~9% wide). */
int dbt_lat_bucket(uint64_t ns) {
    if (ns < 16) return (int)ns;
    int e = 63 - __builtin_clzll(ns);
    int b = 16 + (e - 4) * 8 + (int)((ns >> (e - 3)) & 7);
    return b < DBT_LAT_BUCKETS ? b : DBT_LAT_BUCKETS - 1;
}

uint64_t dbt_lat_bucket_floor(int b) {
    if (b < 16) return (uint64_t)b;
    int e = (b - 16) / 8 + 4, sub = (b - 16) % 8;
    return (uint64_t)(8 + sub) << (e - 3);
}

/* ---- JSON dump ---------------------------------------------------------------------------- */

struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t ncap = (b->cap + (size_t)n + 1) * 2;
        char *np = realloc(b->p, ncap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
}

/* A JSON string of at most n bytes of s (shared memory: a string in it is read with a bound). */
static void sb_strn(struct sbuf *b, const char *s, size_t n) {
    sb_printf(b, "\"");
    for (const char *end = s + n; s < end && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') sb_printf(b, "\\%c", c);
        else if (c < 0x20) sb_printf(b, "\\u%04x", c);
        else sb_printf(b, "%c", c);
    }
    sb_printf(b, "\"");
}

#define LD(x) ((unsigned long long)atomic_load(&(x)))

int dbt_state_set_paused(const char *state_path, int paused, char *err, size_t errlen) {
    struct dbt_state *s = dbt_state_attach(state_path, err, errlen);
    if (!s) return -1;
    atomic_store(&s->paused, paused ? 1u : 0u);
    munmap(s, s->size);
    return 0;
}

int dbt_state_clear_page_cache(const char *state_path, char *err, size_t errlen) {
    struct dbt_state *s = dbt_state_attach(state_path, err, errlen);
    if (!s) return -1;
    if (dbt_state_pc(s)) dbt_pc_clear(dbt_state_pc(s));
    munmap(s, s->size);
    return 0;
}

char *dbt_state_json(const char *state_path, char *err, size_t errlen) {
    struct dbt_state *s = dbt_state_attach(state_path, err, errlen);
    if (!s) return NULL;
    struct sbuf b = {malloc(65536), 0, 65536, 0};
    if (!b.p) b.oom = 1;
    uint64_t pc_present = 0, pc_dirty = 0;
    if (dbt_state_pc(s)) dbt_pc_usage(dbt_state_pc(s), &pc_present, &pc_dirty);
    sb_printf(&b,
              "{\"version\":%u,\"epoch_ns\":%llu,\"attached\":%u,\"paused\":%u,\"untracked_calls\":%llu,"
              "\"trace_failures\":%llu,\"cpu_dilation_ns\":%llu,\"page_cache\":{\"bytes\":%llu,\"present_pages\":%llu,\"dirty_pages\":%llu,"
              "\"dsync_data\":%u},\"devices\":[",
              s->version, (unsigned long long)s->epoch_ns, atomic_load(&s->attached), atomic_load(&s->paused),
              LD(s->untracked_calls), LD(s->trace_failures), LD(s->cpu_dilation_ns), (unsigned long long)s->pc_bytes,
              (unsigned long long)pc_present, (unsigned long long)pc_dirty, s->dsync_data);
    for (uint32_t i = 0; i < s->ndev && i < DBT_MAX_DEVICES; i++) {
        struct dbt_device_slot *d = &s->dev[i];
        const struct dbt_device_ops *ops = dbt_ops_by_kind(d->kind); /* checked by attach; read again here */
        dbt_dev_lock(d);
        uint64_t busy = d->busy_ns, first = d->first_ns, last = d->last_ns;
        dbt_dev_unlock(d);
        sb_printf(&b, "%s{\"name\":", i ? "," : "");
        sb_strn(&b, d->name, sizeof d->name);
        sb_printf(&b, ",\"kind\":\"%s\",\"dir\":", ops ? ops->name : "?");
        sb_strn(&b, d->dir, sizeof d->dir);
        sb_printf(&b, ",\"params\":{");
        for (int k = 0; ops && k < ops->nparams; k++)
            sb_printf(&b, "%s\"%s\":%.17g", k ? "," : "", ops->params[k].name,
                      *(const double *)((const char *)&d->params + ops->params[k].offset));
        const struct dbt_counters *c = &d->c;
        sb_printf(&b,
                  "},\"busy_ns\":%llu,\"first_ns\":%llu,\"last_ns\":%llu,\"reads\":%llu,\"writes\":%llu,"
                  "\"flushes\":%llu,\"read_bytes\":%llu,\"write_bytes\":%llu,\"read_ns\":%llu,\"write_ns\":%llu,"
                  "\"flush_ns\":%llu,\"queue_ns\":%llu,\"cache_hits\":%llu,\"streams\":%llu,\"reordered\":%llu,\"other_ops\":%llu,"
                  "\"host_ns\":%llu,\"overruns\":%llu,\"late_sum_ns\":%llu,\"late_max_ns\":%llu,\"spin_ns\":%llu,"
                  "\"pc_hit_pages\":%llu,\"pc_miss_pages\":%llu,\"pc_readahead_bytes\":%llu,"
                  "\"pc_writeback_bytes\":%llu,\"lateness\":[",
                  (unsigned long long)busy, (unsigned long long)first, (unsigned long long)last, LD(c->reads),
                  LD(c->writes), LD(c->flushes), LD(c->read_bytes), LD(c->write_bytes), LD(c->read_ns),
                  LD(c->write_ns), LD(c->flush_ns), LD(c->queue_ns), LD(c->cache_hits), LD(c->streams), LD(c->reordered),
                  LD(c->other_ops), LD(c->host_ns), LD(c->overruns), LD(c->late_sum_ns), LD(c->late_max_ns),
                  LD(c->spin_ns), LD(c->pc_hit_pages), LD(c->pc_miss_pages), LD(c->pc_readahead_bytes),
                  LD(c->pc_writeback_bytes));
        int firstb = 1;
        for (int k = 0; k < DBT_LAT_BUCKETS; k++) {
            unsigned long long n = LD(c->late[k]);
            if (!n) continue;
            sb_printf(&b, "%s[%llu,%llu]", firstb ? "" : ",", (unsigned long long)dbt_lat_bucket_floor(k), n);
            firstb = 0;
        }
        sb_printf(&b, "]}");
    }
    uint32_t first = atomic_load(&s->first_bypass); /* checked by attach; read again here */
    sb_printf(&b, "],\"first_bypass\":");
    if (first && first <= DBT_BYPASS_KINDS) sb_printf(&b, "\"%s\"", dbt_bypass_names[first - 1]);
    else sb_printf(&b, "null");
    sb_printf(&b, ",\"bypasses\":{");
    for (int k = 0; k < DBT_BYPASS_KINDS; k++) {
        struct dbt_bypass *bp = &s->bypass[k];
        sb_printf(&b, "%s\"%s\":{\"count\":%llu", k ? "," : "", dbt_bypass_names[k], LD(bp->count));
        if (atomic_load_explicit(&bp->claim, memory_order_acquire) == 2) {
            sb_printf(&b, ",\"pid\":%u,\"program\":", bp->pid);
            sb_strn(&b, bp->program, sizeof bp->program);
            sb_printf(&b, ",\"path\":");
            sb_strn(&b, bp->path, sizeof bp->path);
        }
        sb_printf(&b, "}");
    }
    /* files: [index, device, path, st_dev, st_ino], so that a file can be matched by its inode */
    sb_printf(&b, "},\"file_cap_per_device\":%u,\"files\":[", files_per_dev(s));
    struct dbt_file_entry *t = dbt_files(s);
    int firstf = 1;
    for (uint32_t i = 0; i < DBT_FILE_CAP; i++) {
        if (!atomic_load_explicit(&t[i].key, memory_order_acquire)) continue;
        size_t len;
        const char *p = file_path(s, t[i].path_off, &len);
        sb_printf(&b, "%s[%u,%u,", firstf ? "" : ",", i, t[i].device);
        sb_strn(&b, p, len);
        sb_printf(&b, ",%llu,%llu]", (unsigned long long)t[i].st_dev, (unsigned long long)t[i].st_ino);
        firstf = 0;
    }
    sb_printf(&b, "]}");
    munmap(s, s->size);
    if (b.oom) {
        free(b.p);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return b.p;
}

int64_t dbt_state_chunk_map(const char *state_path, uint64_t *out, uint64_t cap, uint64_t *cursors, char *err,
                            size_t errlen) {
    struct dbt_state *s = dbt_state_attach(state_path, err, errlen);
    if (!s) return -1;
    struct dbt_chunk_entry *t = dbt_chunks(s);
    uint64_t n = 0;
    for (uint32_t i = 0; i < DBT_CHUNK_CAP; i++) {
        uint64_t key = atomic_load_explicit(&t[i].key, memory_order_acquire);
        if (!key) continue;
        if (n < cap) {
            out[3 * n] = (key >> 32) - 1; /* the file's index */
            out[3 * n + 1] = key & 0xffffffffu;
            out[3 * n + 2] = t[i].addr;
        }
        n++;
    }
    for (uint32_t i = 0; i < DBT_MAX_DEVICES; i++) {
        if (i < s->ndev) {
            dbt_dev_lock(&s->dev[i]);
            cursors[i] = s->dev[i].alloc_cursor;
            dbt_dev_unlock(&s->dev[i]);
        } else {
            cursors[i] = 0;
        }
    }
    munmap(s, s->size);
    return (int64_t)n;
}

int dbt_path_in_dsync_scope(const char *path) {
    /* a sort's or hash's temp files, named like segments inside a shared file set's folder
     * (pgsql_tmp/pgsql_tmp1234.0.fileset/1.0), are temp files all the same */
    if (strstr(path, "/pgsql_tmp")) return 0;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *p = base;
    while (isxdigit((unsigned char)*p)) p++;
    if (p == base) return 0;
    if (*p == '_') {
        p++;
        if (!strncmp(p, "fsm", 3) || !strncmp(p, "init", 4)) p += (*p == 'f') ? 3 : 4;
        else if (!strncmp(p, "vm", 2)) p += 2;
        else return 0;
    }
    if (*p == '.') {
        const char *q = ++p;
        while (isdigit((unsigned char)*p)) p++;
        if (p == q) return 0;
    }
    return *p == '\0';
}

void dbt_state_put_file(struct dbt_state *s, int64_t file, int dev, int dsync_scope) {
    if (file < 0 || file >= (int64_t)DBT_FILE_CAP || dev < 0 || (uint32_t)dev >= s->ndev) return;
    struct dbt_file_entry *e = &dbt_files(s)[file];
    e->device = (uint32_t)dev;
    e->dsync_scope = dsync_scope ? 1u : 0u;
    if (!atomic_load(&e->key)) {
        atomic_store_explicit(&e->key, mix64((uint64_t)file + 1) | 1, memory_order_release);
        atomic_fetch_add(&s->nfiles, 1);
    }
}

int dbt_state_put_chunk(struct dbt_state *s, int dev, int64_t file, uint64_t chunk, uint64_t addr) {
    if (file < 0 || dev < 0 || (uint32_t)dev >= s->ndev) return -1;
    uint64_t key = ((uint64_t)(file + 1) << 32) | (chunk & 0xffffffffu);
    struct dbt_device_slot *d = &s->dev[dev];
    dbt_dev_lock(d);
    int64_t empty, found = chunk_probe(s, dev, key, &empty);
    int rc = 0;
    if (found >= 0) {
        dbt_chunks(s)[found].addr = addr;
    } else if (empty >= 0) {
        dbt_chunks(s)[empty].addr = addr;
        atomic_store_explicit(&dbt_chunks(s)[empty].key, key, memory_order_release);
    } else {
        rc = -1;
    }
    if (addr + DBT_CHUNK_BYTES > d->alloc_cursor) d->alloc_cursor = addr + DBT_CHUNK_BYTES;
    dbt_dev_unlock(d);
    return rc;
}
