/* Shared state of one emulation run, what a live process needs of it: attach and its checks, the
 * file and chunk tables, device addresses, the device locks, bypass records. See state.h. Building a
 * state, dumping it and reading its layout are statefile.c's (the simulator library's alone). */
#define _GNU_SOURCE
#include "state.h"
#include "mix.h"
#include "shmlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>


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
    const struct dbt_device_ops *ops = dbt_ops_by_kind(d->kind);
    if (!ops) {
        snprintf(why, whylen, "its kind %d is unknown", d->kind);
        return -1;
    }
    if (dbt_params_check(&d->params, d->kind, why, whylen) != 0) return -1;
    if (d->caps != ops->caps) {
        snprintf(why, whylen, "its capabilities 0x%x are not its kind's (0x%x)", d->caps, ops->caps);
        return -1;
    }
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
        if (t[i].dsync_scope > 1 || t[i].pg_class >= DBT_PG_CLASSES)
            REFUSE("state %s is damaged: file %u has dsync scope %u and class %u of %d", path, i, t[i].dsync_scope,
                   t[i].pg_class, DBT_PG_CLASSES);
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
    uint32_t per = dbt_state_files_per_dev(s), base = (uint32_t)dev * per;
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
    uint32_t per = dbt_state_chunks_per_dev(s), base = (uint32_t)dev * per;
    struct dbt_chunk_entry *t = dbt_chunks(s);
    uint64_t h = dbt_mix64(key);
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
    uint64_t key = dbt_mix64(st_ino ^ dbt_mix64(st_dev)) | 1;
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
        struct dbt_pg_path pg;
        dbt_pg_path_classify(path, &pg);
        e->dsync_scope = pg.dsync;
        e->pg_class = pg.cls;
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

static uint64_t state_addr(struct dbt_state *s, int dev, int64_t file, uint64_t off, int locked) {
    uint64_t chunk = off / DBT_CHUNK_BYTES, within = off % DBT_CHUNK_BYTES;
    if (file < 0) return dbt_mix64(chunk) % (1ull << 40) / DBT_CHUNK_BYTES * DBT_CHUNK_BYTES + within;
    uint64_t key = ((uint64_t)(file + 1) << 32) | (chunk & 0xffffffffu);
    int64_t empty, found = chunk_probe(s, dev, key, &empty);
    if (found >= 0) return dbt_chunks(s)[found].addr + within;
    struct dbt_device_slot *d = &s->dev[dev];
    if (!locked) dbt_dev_lock(d);
    uint64_t addr = chunk_insert_locked(s, dev, key);
    if (!locked) dbt_dev_unlock(d);
    return addr + within;
}

uint64_t dbt_state_addr(struct dbt_state *s, int dev, int64_t file, uint64_t off) {
    return state_addr(s, dev, file, off, 0);
}

uint64_t dbt_state_addr_locked(struct dbt_state *s, int dev, int64_t file, uint64_t off) {
    return state_addr(s, dev, file, off, 1);
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

void dbt_state_put_file(struct dbt_state *s, int64_t file, int dev, int dsync_scope) {
    if (file < 0 || file >= (int64_t)DBT_FILE_CAP || dev < 0 || (uint32_t)dev >= s->ndev) return;
    struct dbt_file_entry *e = &dbt_files(s)[file];
    e->device = (uint32_t)dev;
    e->dsync_scope = dsync_scope ? 1u : 0u;
    if (!atomic_load(&e->key)) {
        atomic_store_explicit(&e->key, dbt_mix64((uint64_t)file + 1) | 1, memory_order_release);
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
