/* What only the simulator library does with a state file (never the interposer, which links state.c
 * alone): build one from device specs, measure the host's wake-up delay for it, dump it as JSON,
 * read its file layout, pause it, empty its page cache. See statefile.h. */
#define _GNU_SOURCE
#include "statefile.h"
#include "jsonbuf.h"
#include "shmlock.h"

#include <errno.h>
#include <fcntl.h>
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
    d->caps = dbt_ops_by_kind(spec->kind)->caps;
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
    /* Taken again after a second, not for every state: a search makes one per prediction, and twenty
     * sleeps (8 ms) each would be most of its time; a run's state, made seconds after any other, gets
     * the host's delay as it is now. */
    static _Atomic uint64_t measured, measured_at;
    uint64_t known = atomic_load(&measured), at = atomic_load(&measured_at), now0 = mono_ns();
    if (known && now0 - at < 1000000000ull) return known;
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
    uint64_t p90 = late[N * 9 / 10] ? late[N * 9 / 10] : 1; /* 0 stands for "not yet measured" */
    atomic_store(&measured, p90);
    atomic_store(&measured_at, mono_ns());
    return p90;
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
    /* The file is all zeros: only the header and the devices in use are written (16 device slots are
     * 3.9 MB, and a search makes a state per prediction). dev[] is the struct's last member. */
    _Static_assert(offsetof(struct dbt_state, dev) + sizeof hdr->dev == sizeof *hdr, "dev[] is the state's last member");
    memcpy(s, hdr, offsetof(struct dbt_state, dev) + (size_t)n * sizeof hdr->dev[0]);
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

/* ---- reading a state ---------------------------------------------------------------------- */

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

#define LD(x) ((unsigned long long)atomic_load(&(x)))

int dbt_state_set_paused(const char *state_path, int paused, char *err, size_t errlen) {
    struct dbt_state *s = dbt_state_attach(state_path, err, errlen);
    if (!s) return -1;
    atomic_store(&s->paused, paused ? 1u : 0u);
    munmap(s, s->size);
    return 0;
}

int dbt_state_set_durlog(const char *state_path, int on, char *err, size_t errlen) {
    struct dbt_state *s = dbt_state_attach(state_path, err, errlen);
    if (!s) return -1;
    atomic_store(&s->durlog_on, on ? 1u : 0u);
    munmap(s, s->size);
    return 0;
}

int dbt_state_set_undilated(const char *state_path, uint32_t pid, char *err, size_t errlen) {
    struct dbt_state *s = dbt_state_attach(state_path, err, errlen);
    if (!s) return -1;
    atomic_store(&s->undilated_pid, pid);
    munmap(s, s->size);
    return 0;
}

int dbt_state_set_fault(const char *state_path, int devno, unsigned nth, int pg_class, const char *suffix, char *err,
                        size_t errlen) {
    if (suffix && strlen(suffix) >= DBT_FAULT_SUFFIX_MAX) {
        snprintf(err, errlen, "a file name ending of %zu bytes; at most %d", strlen(suffix), DBT_FAULT_SUFFIX_MAX - 1);
        return -1;
    }
    struct dbt_state *s = dbt_state_attach(state_path, err, errlen);
    if (!s) return -1;
    if (devno >= (int)s->ndev || nth == 0) {
        snprintf(err, errlen, "no device %d of %u, or no fsync to fail (%u)", devno, s->ndev, nth);
        munmap(s, s->size);
        return -1;
    }
    atomic_store(&s->fault_dev, 0u); /* disarmed while its fields change */
    atomic_store(&s->fault_fired, 0u);
    atomic_store(&s->fault_seen, 0u);
    atomic_store(&s->fault_at_ns, 0ull);
    atomic_store(&s->fault_pages, 0ull);
    atomic_store(&s->fault_nth, nth);
    atomic_store(&s->fault_class, pg_class < 0 ? 0u : (unsigned)pg_class + 1u);
    memset(s->fault_suffix, 0, sizeof s->fault_suffix);
    if (suffix) memcpy(s->fault_suffix, suffix, strlen(suffix));
    atomic_store(&s->fault_dev, devno < 0 ? 0u : (unsigned)devno + 1u);
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

int dbt_state_set_credits(const char *state_path, double fraction, uint64_t at_ns, char *err, size_t errlen) {
    if (!(fraction >= 0.0 && fraction <= 1.0)) {
        snprintf(err, errlen, "credits %g: give a fraction of a full bucket, 0 to 1", fraction);
        return -1;
    }
    struct dbt_state *s = dbt_state_attach(state_path, err, errlen);
    if (!s) return -1;
    uint64_t at = at_ns ? at_ns : mono_ns();
    for (uint32_t i = 0; i < s->ndev && i < DBT_MAX_DEVICES; i++) {
        struct dbt_device_slot *d = &s->dev[i];
        if (!(d->caps & DBT_CAP_LIMITED)) continue;
        dbt_dev_lock(d);
        dbt_model_set_credits(&d->model, fraction, at);
        dbt_dev_unlock(d);
    }
    munmap(s, s->size);
    return 0;
}

char *dbt_state_json(const char *state_path, char *err, size_t errlen) {
    struct dbt_state *s = dbt_state_attach(state_path, err, errlen);
    if (!s) return NULL;
    struct dbt_jbuf b = {0};
    uint64_t pc_present = 0, pc_dirty = 0;
    if (dbt_state_pc(s)) dbt_pc_usage(dbt_state_pc(s), &pc_present, &pc_dirty);
    dbt_jb_printf(&b,
              "{\"version\":%u,\"epoch_ns\":%llu,\"attached\":%u,\"paused\":%u,\"untracked_calls\":%llu,"
              "\"trace_failures\":%llu,\"durlog_failures\":%llu,\"fault\":{\"device\":%d,\"nth\":%u,\"seen\":%u,"
              "\"fired\":%u,\"at_ns\":%llu,\"file\":%llu,\"pages\":%llu},\"cpu_dilation_ns\":%llu,\"page_cache\":{\"bytes\":%llu,\"present_pages\":%llu,\"dirty_pages\":%llu,"
              "\"dsync_data\":%u},\"devices\":[",
              s->version, (unsigned long long)s->epoch_ns, atomic_load(&s->attached), atomic_load(&s->paused),
              LD(s->untracked_calls), LD(s->trace_failures), LD(s->durlog_failures),
              (int)atomic_load(&s->fault_dev) - 1, atomic_load(&s->fault_nth), atomic_load(&s->fault_seen),
              atomic_load(&s->fault_fired), LD(s->fault_at_ns), LD(s->fault_file), LD(s->fault_pages),
              LD(s->cpu_dilation_ns), (unsigned long long)s->pc_bytes,
              (unsigned long long)pc_present, (unsigned long long)pc_dirty, s->dsync_data);
    for (uint32_t i = 0; i < s->ndev && i < DBT_MAX_DEVICES; i++) {
        struct dbt_device_slot *d = &s->dev[i];
        const struct dbt_device_ops *ops = dbt_ops_by_kind(d->kind); /* checked by attach; read again here */
        dbt_dev_lock(d);
        uint64_t busy = d->busy_ns, first = d->first_ns, last = d->last_ns;
        dbt_dev_unlock(d);
        dbt_jb_printf(&b, "%s{\"name\":", i ? "," : "");
        dbt_jb_strn(&b, d->name, sizeof d->name);
        dbt_jb_printf(&b, ",\"kind\":\"%s\",\"dir\":", ops ? ops->name : "?");
        dbt_jb_strn(&b, d->dir, sizeof d->dir);
        dbt_jb_printf(&b, ",\"params\":{");
        for (int k = 0; ops && k < ops->nparams; k++)
            dbt_jb_printf(&b, "%s\"%s\":%.17g", k ? "," : "", ops->params[k].name,
                      *(const double *)((const char *)&d->params + ops->params[k].offset));
        const struct dbt_counters *c = &d->c;
        dbt_jb_printf(&b,
                  "},\"busy_ns\":%llu,\"first_ns\":%llu,\"last_ns\":%llu,\"reads\":%llu,\"writes\":%llu,"
                  "\"flushes\":%llu,\"read_bytes\":%llu,\"write_bytes\":%llu,\"read_ns\":%llu,\"write_ns\":%llu,"
                  "\"flush_ns\":%llu,\"queue_ns\":%llu,\"cache_hits\":%llu,\"streams\":%llu,\"reordered\":%llu,\"other_ops\":%llu,"
                  "\"host_ns\":%llu,\"overruns\":%llu,\"late_sum_ns\":%llu,\"late_max_ns\":%llu,\"spin_ns\":%llu,"
                  "\"pc_hit_pages\":%llu,\"pc_miss_pages\":%llu,\"pc_readahead_bytes\":%llu,"
                  "\"pc_writeback_bytes\":%llu,",
                  (unsigned long long)busy, (unsigned long long)first, (unsigned long long)last, LD(c->reads),
                  LD(c->writes), LD(c->flushes), LD(c->read_bytes), LD(c->write_bytes), LD(c->read_ns),
                  LD(c->write_ns), LD(c->flush_ns), LD(c->queue_ns), LD(c->cache_hits), LD(c->streams), LD(c->reordered),
                  LD(c->other_ops), LD(c->host_ns), LD(c->overruns), LD(c->late_sum_ns), LD(c->late_max_ns),
                  LD(c->spin_ns), LD(c->pc_hit_pages), LD(c->pc_miss_pages), LD(c->pc_readahead_bytes),
                  LD(c->pc_writeback_bytes));
        for (int k = 0; k < DBT_LIMITS; k++)
            dbt_jb_printf(&b, "\"held_%s_ns\":%llu,\"held_%s\":%llu,", dbt_limit_names[k], LD(c->held_ns[k]),
                          dbt_limit_names[k], LD(c->held[k]));
        dbt_jb_printf(&b, "\"lateness\":[");
        int firstb = 1;
        for (int k = 0; k < DBT_LAT_BUCKETS; k++) {
            unsigned long long n = LD(c->late[k]);
            if (!n) continue;
            dbt_jb_printf(&b, "%s[%llu,%llu]", firstb ? "" : ",", (unsigned long long)dbt_lat_bucket_floor(k), n);
            firstb = 0;
        }
        dbt_jb_printf(&b, "]}");
    }
    uint32_t first = atomic_load(&s->first_bypass); /* checked by attach; read again here */
    dbt_jb_printf(&b, "],\"first_bypass\":");
    if (first && first <= DBT_BYPASS_KINDS) dbt_jb_printf(&b, "\"%s\"", dbt_bypass_names[first - 1]);
    else dbt_jb_printf(&b, "null");
    dbt_jb_printf(&b, ",\"bypasses\":{");
    for (int k = 0; k < DBT_BYPASS_KINDS; k++) {
        struct dbt_bypass *bp = &s->bypass[k];
        dbt_jb_printf(&b, "%s\"%s\":{\"count\":%llu", k ? "," : "", dbt_bypass_names[k], LD(bp->count));
        if (atomic_load_explicit(&bp->claim, memory_order_acquire) == 2) {
            dbt_jb_printf(&b, ",\"pid\":%u,\"program\":", bp->pid);
            dbt_jb_strn(&b, bp->program, sizeof bp->program);
            dbt_jb_printf(&b, ",\"path\":");
            dbt_jb_strn(&b, bp->path, sizeof bp->path);
        }
        dbt_jb_printf(&b, "}");
    }
    /* files: [index, device, path, st_dev, st_ino, class], so that a file can be matched by its inode */
    dbt_jb_printf(&b, "},\"file_cap_per_device\":%u,\"files\":[", dbt_state_files_per_dev(s));
    struct dbt_file_entry *t = dbt_files(s);
    int firstf = 1;
    for (uint32_t i = 0; i < DBT_FILE_CAP; i++) {
        if (!atomic_load_explicit(&t[i].key, memory_order_acquire)) continue;
        size_t len;
        const char *p = file_path(s, t[i].path_off, &len);
        dbt_jb_printf(&b, "%s[%u,%u,", firstf ? "" : ",", i, t[i].device);
        dbt_jb_strn(&b, p, len);
        uint8_t cls = t[i].pg_class < DBT_PG_CLASSES ? t[i].pg_class : DBT_PG_OTHER; /* checked by attach; read again */
        dbt_jb_printf(&b, ",%llu,%llu,\"%s\"]", (unsigned long long)t[i].st_dev, (unsigned long long)t[i].st_ino,
                      dbt_pg_class_names[cls]);
        firstf = 0;
    }
    dbt_jb_printf(&b, "]}");
    munmap(s, s->size);
    char *doc = dbt_jb_finish(&b);
    if (!doc) snprintf(err, errlen, "out of memory");
    return doc;
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

