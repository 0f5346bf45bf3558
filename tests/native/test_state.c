/* The state file: created private from device specs that are checked field by field, and refused by
 * attach when anything later used as an offset, index or length is inconsistent. A valid state is
 * built with dbt_state_create, then damaged in one way at a time (and repaired from an undo log);
 * every damage must be refused with a message naming it, and the repaired state must attach again.
 *
 *   test_state [WORKDIR]     (default: a fresh folder under /tmp, removed at the end) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "build_state.h"
#include "check.h"
#include "statefile.h"

static char work[512], mapped_path[600], state_path[600];

/* the valid state: every kind, an array, and a page cache */
static const struct test_device DEVICES[] = {
    {"h", "hdd", "/data/h", {{"members", 2}, {"cache_segments", 4}}},
    {"s", "ssd", "/data/s", {{"channels", 4}}},
    {"r", "ram", "/data/r", {{0}}},
    {"x", "real", "/data/x", {{0}}},
};
static const struct dbt_pc_config PAGE_CACHE = {1048576, 64, 5, 20, 0};

static int create_valid(char *err, size_t errlen) {
    return build_state(state_path, DEVICES, 4, &PAGE_CACHE, err, errlen);
}

/* ---- damage with an undo log -------------------------------------------------------------- */

struct undo {
    void *at;
    size_t n;
    unsigned char *old;
};
static struct undo undo_log[16];
static int nundo;

static void poke(void *at, const void *val, size_t n) {
    struct undo *u = &undo_log[nundo++];
    u->at = at;
    u->n = n;
    u->old = malloc(n);
    memcpy(u->old, at, n);
    memcpy(at, val, n);
}
static void poke_u64(void *at, uint64_t v) { poke(at, &v, sizeof v); }
static void poke_u32(void *at, uint32_t v) { poke(at, &v, sizeof v); }
static void poke_int(void *at, int v) { poke(at, &v, sizeof v); }
static void poke_double(void *at, double v) { poke(at, &v, sizeof v); }
static void poke_fill(void *at, int byte, size_t n) {
    unsigned char *v = malloc(n);
    memset(v, byte, n);
    poke(at, v, n);
    free(v);
}

static void repair(void) {
    while (nundo) {
        struct undo *u = &undo_log[--nundo];
        memcpy(u->at, u->old, u->n);
        free(u->old);
    }
}

/* ---- the state under test ------------------------------------------------------------------ */

static struct dbt_state *S; /* the valid state, mapped for damaging */
static size_t S_size;

static struct dbt_state *map_state(const char *path, size_t *size) {
    int fd = open(path, O_RDWR);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) return NULL;
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    *size = (size_t)st.st_size;
    return m == MAP_FAILED ? NULL : m;
}

static struct dbt_pc *pc(void) { return dbt_state_pc(S); }
static struct dbt_device_slot *dev(int i) { return &S->dev[i]; }
static struct dbt_hdd_state *hdd(int member) { return &S->dev[0].model.drive[member].u.hdd.s; }
static int64_t used_file; /* a registered file's index */

/* Attaching must fail with a message containing `want`; then the damage is repaired. */
static void expect_refused(const char *what, const char *path, const char *want) {
    char err[1024] = "";
    errno = 0;
    struct dbt_state *s = dbt_state_attach(path, err, sizeof err);
    CHECK(s == NULL, "%s: attach accepted the damaged state", what);
    if (s) munmap(s, s->size);
    CHECK(err[0] != '\0', "%s: refused without a message", what);
    CHECK(strstr(err, want) != NULL, "%s: message '%s' does not mention '%s'", what, err, want);
    CHECK(errno != 0, "%s: errno not set", what);
    printf("refused %-28s %s\n", what, err);
    repair();
}

static void expect_valid_at(const char *what, const char *path) {
    char err[1024] = "";
    struct dbt_state *s = dbt_state_attach(path, err, sizeof err);
    CHECK(s != NULL, "%s: the valid state was refused: %s", what, err);
    if (s) munmap(s, s->size);
}
static void expect_valid(const char *what) { expect_valid_at(what, state_path); }

#define DAMAGE(what, want, ...)                                                                    \
    do {                                                                                           \
        __VA_ARGS__;                                                                               \
        expect_refused(what, state_path, want);                                                    \
    } while (0)

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static uint64_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* ---- the cases ----------------------------------------------------------------------------- */

static void test_create_private(void) {
    /* a symlink planted at the temporary name: create must neither follow it nor give up */
    char victim[700], planted[700];
    snprintf(victim, sizeof victim, "%s/victim", work);
    write_file(victim, "precious\n");
    snprintf(planted, sizeof planted, "%s.tmp%d.0", state_path, (int)getpid());
    CHECK(symlink(victim, planted) == 0, "cannot plant %s: %s", planted, strerror(errno));
    mode_t old = umask(0); /* a permissive umask must not widen the state */
    char err[512] = "";
    int rc = create_valid(err, sizeof err);
    umask(old);
    CHECK(rc == 0, "create: %s", err);
    struct stat st;
    CHECK(lstat(state_path, &st) == 0 && S_ISREG(st.st_mode), "the state is not a regular file");
    CHECK((st.st_mode & 07777) == 0600, "the state's mode is %o, not 600", (unsigned)(st.st_mode & 07777));
    CHECK(file_size(victim) == 9, "create wrote through the planted symlink");
    CHECK(lstat(planted, &st) == 0 && S_ISLNK(st.st_mode), "the planted symlink was replaced");
    unlink(planted);
}

static void populate(void) {
    char err[512];
    struct dbt_state *s = dbt_state_attach(state_path, err, sizeof err);
    CHECK(s != NULL, "the fresh state does not attach: %s", err);
    if (!s) exit(1);
    CHECK(s->ndev == 4, "expected 4 devices, got %u", s->ndev);
    used_file = dbt_state_file_index(s, 0, 1, 100, "/data/h/base/1", 3 << 20);
    CHECK(used_file >= 0, "registering a file failed");
    dbt_state_file_index(s, 1, 1, 101, "/data/s/x", 0);
    dbt_state_file_index(s, 2, 1, 102, "/data/r/y", 0);
    /* some model history, so that ring and segments are in use */
    for (int i = 0; i < 50; i++) {
        struct dbt_request rq = {1000000ull * (uint64_t)i, (uint64_t)i * 65536, 8192,
                                 (uint8_t)(i % 3 ? DBT_OP_WRITE : DBT_OP_READ)};
        struct dbt_result res;
        dbt_model_submit(&s->dev[0].model, &rq, &res);
        dbt_model_submit(&s->dev[1].model, &rq, &res);
    }
    CHECK(s->dev[0].model.drive[0].u.hdd.s.wb_count > 0, "the HDD write-back ring stayed empty");
    munmap(s, s->size);
}

static void test_sizes(void) {
    char path[700];
    snprintf(path, sizeof path, "%s/eight", work);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    uint64_t magic = DBT_STATE_MAGIC;
    CHECK(write(fd, &magic, 8) == 8, "write");
    close(fd);
    expect_refused("8-byte file", path, "too small");
    write_file(path, "");
    expect_refused("empty file", path, "too small");
    snprintf(path, sizeof path, "%s/nonexistent", work);
    expect_refused("nonexistent file", path, "cannot open state");
    CHECK(errno == ENOENT, "a missing state gives errno %d, not ENOENT", errno);
    expect_refused("a directory", work, "cannot open state");

    /* extended and truncated (a copy): the header's size no longer matches the file */
    char copy[700];
    snprintf(copy, sizeof copy, "%s/copy", work);
    int in = open(state_path, O_RDONLY);
    fd = open(copy, O_RDWR | O_CREAT | O_TRUNC, 0600);
    for (ssize_t n; (n = copy_file_range(in, NULL, fd, NULL, 1 << 30, 0)) > 0;) {
    }
    close(in);
    CHECK(file_size(copy) == S_size, "copying the state");
    expect_valid_at("an intact copy", copy);
    CHECK(ftruncate(fd, (off_t)(S_size + 4096)) == 0, "extend");
    expect_refused("extended by a page", copy, "the file has");
    CHECK(ftruncate(fd, (off_t)(S_size - 4096)) == 0, "truncate");
    expect_refused("truncated by a page", copy, "the file has");
    CHECK(ftruncate(fd, (off_t)(sizeof(struct dbt_state) + 100)) == 0, "truncate");
    expect_refused("truncated to the header", copy, "the file has");
    CHECK(ftruncate(fd, 4000) == 0, "truncate");
    expect_refused("truncated inside the header", copy, "too small");
    close(fd);
    unlink(copy);
}

static void test_header(void) {
    DAMAGE("wrong magic", "not a dbtier state", poke_u64(&S->magic, 0x1122334455667788ull));
    DAMAGE("wrong version", "not a dbtier state", poke_u32(&S->version, DBT_STATE_VERSION - 1));
    DAMAGE("size field", "the file has", poke_u64(&S->size, S->size + 4096));
    DAMAGE("huge ndev", "devices", poke_u32(&S->ndev, 1000000));
    DAMAGE("ndev one too many", "devices", poke_u32(&S->ndev, DBT_MAX_DEVICES + 1));
    DAMAGE("off_files outside", "regions", poke_u64(&S->off_files, S->size + 4096));
    DAMAGE("off_files shifted", "regions", poke_u64(&S->off_files, S->off_files + 8));
    DAMAGE("off_chunks outside", "regions", poke_u64(&S->off_chunks, 1ull << 40));
    DAMAGE("off_arena outside", "regions", poke_u64(&S->off_arena, S->size - 16));
    DAMAGE("off_pc outside", "regions", poke_u64(&S->off_pc, S->size * 2));
    DAMAGE("off_pc zero", "regions", poke_u64(&S->off_pc, 0));
    DAMAGE("pc_bytes huge", "regions", poke_u64(&S->pc_bytes, 1ull << 50));
    DAMAGE("pc_bytes zero", "regions", poke_u64(&S->pc_bytes, 0));
    DAMAGE("dsync_data 7", "dsync_data", poke_u32(&S->dsync_data, 7));
    DAMAGE("arena_used too large", "arena", poke_u64(&S->arena_used, DBT_ARENA_BYTES + 1ull));
    DAMAGE("arena_used zero", "arena", poke_u64(&S->arena_used, 0));
    DAMAGE("nfiles too large", "files, at most", poke_u32(&S->nfiles, DBT_FILE_CAP + 1));
}

static void test_page_cache(void) {
    struct dbt_pc *c = pc();
    uint32_t np = c->npages;
    DAMAGE("pc npages", "pages in", poke_u32(&c->npages, 1u << 30));
    DAMAGE("pc nbuckets", "pages in", poke_u32(&c->nbuckets, c->nbuckets * 2));
    DAMAGE("pc off_pages", "tables lie at", poke_u64(&c->off_pages, 1ull << 40));
    DAMAGE("pc off_buckets", "tables lie at", poke_u64(&c->off_buckets, 0));
    DAMAGE("pc off_files", "tables lie at", poke_u64(&c->off_files, c->off_files + 64));
    DAMAGE("pc read-ahead 0", "limits", poke_u32(&c->ra_max_pages, 0));
    DAMAGE("pc read-ahead huge", "limits", poke_u32(&c->ra_max_pages, 1u << 20));
    DAMAGE("pc dirty limit below bg", "limits", poke_u32(&c->dirty_limit_pages, c->dirty_bg_pages));
    DAMAGE("pc dirty bg beyond pages", "limits", poke_u32(&c->dirty_bg_pages, np + 1),
           poke_u32(&c->dirty_limit_pages, np + 2));
    DAMAGE("pc hand", "clock hand", poke_u32(&c->hand, np));
    DAMAGE("pc free_next", "clock hand", poke_u32(&c->free_next, np + 1));
    DAMAGE("pc dirty_head", "dirty list", poke_u32(&c->dirty_head, np + 5), poke_u32(&c->dirty_tail, 1),
           poke_u64(&c->ndirty, 1));
    DAMAGE("pc dirty_tail only", "dirty list", poke_u32(&c->dirty_tail, 3));
    DAMAGE("pc ndirty without list", "dirty list", poke_u64(&c->ndirty, 3));
}

static void test_devices(void) {
    DAMAGE("name not terminated", "name is not terminated", poke_fill(dev(1)->name, 'n', DBT_NAME_MAX));
    DAMAGE("dir not terminated", "directory is not terminated", poke_fill(dev(1)->dir, 'd', DBT_DIR_MAX));
    DAMAGE("dirlen huge", "directory length", poke_u32(&dev(1)->dirlen, 5000));
    DAMAGE("dirlen short", "directory length", poke_u32(&dev(1)->dirlen, dev(1)->dirlen - 1));
    DAMAGE("dir relative", "not absolute", poke_fill(dev(1)->dir, 'x', 1));
    DAMAGE("bad kind 7", "kind 7 is unknown", poke_int(&dev(2)->kind, 7));
    DAMAGE("bad kind -1", "kind -1 is unknown", poke_int(&dev(2)->kind, -1));
    DAMAGE("hdd param out of range", "rpm", poke_double(&dev(0)->params.k.hdd.rpm, 1e9));
    DAMAGE("hdd param NaN", "seek_full_ms", poke_double(&dev(0)->params.k.hdd.seek_full_ms, NAN));
    DAMAGE("ssd channels param 0", "channels", poke_double(&dev(1)->params.k.flash.channels, 0));
    DAMAGE("members param 99", "members", poke_double(&dev(2)->params.members, 99));
    DAMAGE("kind changed to ssd", "parameter", poke_int(&dev(0)->kind, DBT_KIND_SSD));
    DAMAGE("model kind", "model is of kind", poke_int(&dev(0)->model.kind, DBT_KIND_RAM));
    DAMAGE("capabilities forged", "capabilities", poke_u32(&dev(3)->caps, DBT_CAP_REORDERS));
    DAMAGE("capabilities taken away", "capabilities", poke_u32(&dev(0)->caps, 0));
    DAMAGE("members 0", "members", poke_int(&dev(0)->model.members, 0));
    DAMAGE("members 99", "members", poke_int(&dev(0)->model.members, 99));
    DAMAGE("members -3", "members", poke_int(&dev(0)->model.members, -3));
    DAMAGE("stripe 0", "stripe", poke_u64(&dev(0)->model.stripe_bytes, 0));
    DAMAGE("member drive kind", "member 1 is of kind", poke_int(&dev(0)->model.drive[1].kind, DBT_KIND_SSD));
    DAMAGE("hdd active 40", "active segment", poke_int(&hdd(0)->active, 40));
    DAMAGE("hdd active -2", "active segment", poke_int(&hdd(1)->active, -2));
    DAMAGE("hdd active = nseg", "active segment", poke_int(&hdd(0)->active, dev(0)->model.drive[0].u.hdd.d.nseg));
    DAMAGE("hdd after_write 2", "previous command kind", poke_int(&hdd(0)->after_write, 2));
    DAMAGE("hdd after_write -1", "previous command kind", poke_int(&hdd(1)->after_write, -1));
    DAMAGE("hdd nseg 0", "buffer segments", poke_int(&dev(0)->model.drive[0].u.hdd.d.nseg, 0));
    DAMAGE("hdd nseg 33", "buffer segments", poke_int(&dev(0)->model.drive[1].u.hdd.d.nseg, DBT_HDD_MAX_SEGMENTS + 1));
    DAMAGE("wb_count 519", "write-back buffer", poke_u32(&hdd(0)->wb_count, DBT_HDD_WB_EXTENTS + 7));
    DAMAGE("wb_count 513", "write-back buffer", poke_u32(&hdd(0)->wb_count, DBT_HDD_WB_EXTENTS + 1));
    DAMAGE("ssd nchan 0", "channels", poke_int(&dev(1)->model.drive[0].u.flash.d.nchan, 0));
    DAMAGE("ssd nchan 65", "channels", poke_int(&dev(1)->model.drive[0].u.flash.d.nchan, DBT_MAX_CHANNELS + 1));
}

static void test_bypass_records(void) {
    DAMAGE("first bypass kind", "first bypass", poke_u32(&S->first_bypass, DBT_BYPASS_KINDS + 1));
    DAMAGE("bypass claim 3", "record of mmap", poke_u32(&S->bypass[DBT_BYPASS_MMAP].claim, 3));
    DAMAGE("bypass program unterminated", "record of exec_env",
           poke_fill(S->bypass[DBT_BYPASS_EXEC_ENV].program, 'p', DBT_BYPASS_COMM));
    DAMAGE("bypass path unterminated", "record of splice",
           poke_fill(S->bypass[DBT_BYPASS_SPLICE].path, 'q', DBT_BYPASS_PATH));
}

/* A bypass is counted each time and described once, by whoever claimed it first: processes racing
 * leave one consistent record (pid and path from the same process), and a paused state counts none. */
#define RACERS 6
#define RACES 2000
static void test_note_bypass(void) {
    char err[512];
    struct dbt_state *s = dbt_state_attach(state_path, err, sizeof err);
    CHECK(s != NULL, "attach: %s", err);
    if (!s) return;
    CHECK(atomic_load(&s->first_bypass) == 0, "a fresh state has a first bypass");
    atomic_store(&s->paused, 1);
    dbt_state_note_bypass(s, DBT_BYPASS_MMAP, "/paused", -1);
    CHECK(atomic_load(&s->bypass[DBT_BYPASS_MMAP].count) == 0, "a paused state counted a bypass");
    atomic_store(&s->paused, 0);
    pid_t kids[RACERS];
    for (int k = 0; k < RACERS; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            char path[64];
            snprintf(path, sizeof path, "/race/%d", (int)getpid());
            for (int i = 0; i < RACES; i++) dbt_state_note_bypass(s, DBT_BYPASS_SPLICE, path, -1);
            _exit(0);
        }
    }
    for (int k = 0; k < RACERS; k++) waitpid(kids[k], NULL, 0);
    struct dbt_bypass *b = &s->bypass[DBT_BYPASS_SPLICE];
    CHECK(atomic_load(&b->count) == RACERS * RACES, "%llu splice bypasses counted, %d made",
          (unsigned long long)atomic_load(&b->count), RACERS * RACES);
    char want[64];
    snprintf(want, sizeof want, "/race/%u", b->pid);
    CHECK(atomic_load(&b->claim) == 2 && !strcmp(b->path, want), "the record is torn: pid %u, path %s", b->pid,
          b->path);
    CHECK(atomic_load(&s->first_bypass) == DBT_BYPASS_SPLICE + 1, "the first bypass is not the splice");
    /* an fd's file names itself */
    int fd = open(mapped_path, O_RDONLY);
    errno = 1234;
    dbt_state_note_bypass(s, DBT_BYPASS_MMAP, NULL, fd);
    CHECK(errno == 1234, "noting a bypass changed errno");
    close(fd);
    CHECK(!strcmp(s->bypass[DBT_BYPASS_MMAP].path, mapped_path), "the mapped file is '%s', not %s",
          s->bypass[DBT_BYPASS_MMAP].path, mapped_path);
    CHECK(atomic_load(&s->first_bypass) == DBT_BYPASS_SPLICE + 1, "a later bypass became the first");
    munmap(s, s->size);
    char *json = dbt_state_json(state_path, err, sizeof err);
    CHECK(json && strstr(json, "\"first_bypass\":\"splice\""), "the dump lacks the first bypass");
    snprintf(want, sizeof want, "\"splice\":{\"count\":%d,\"pid\":", RACERS * RACES);
    CHECK(json && strstr(json, want), "the dump lacks the splice record");
    CHECK(json && strstr(json, "\"exec_static\":{\"count\":0}"), "the dump lacks the kinds without bypasses");
    free(json);
    expect_valid("after the bypasses");
}

static void test_files(void) {
    struct dbt_file_entry *e = &dbt_files(S)[used_file];
    DAMAGE("file device = ndev", "file", poke_u32(&e->device, S->ndev));
    DAMAGE("file device huge", "file", poke_u32(&e->device, 0xffffffffu));
    DAMAGE("file path_off = arena", "path offset", poke_u32(&e->path_off, DBT_ARENA_BYTES));
    DAMAGE("file path_off huge", "path offset", poke_u32(&e->path_off, 0xfffffff0u));
    DAMAGE("file dsync scope 2", "dsync scope", poke_u32(&e->dsync_scope, 2));
    DAMAGE("file class beyond", "class", poke(&e->pg_class, &(uint8_t){DBT_PG_CLASSES}, 1));
    struct dbt_file_entry *free_slot = &dbt_files(S)[DBT_FILE_CAP - 1];
    DAMAGE("forged entry", "file", poke_u64(&free_slot->key, 12345), poke_u32(&free_slot->device, 99));
}

/* Hot-path checks: what is read from the shared file after attach is bounded where it is used. */
static void test_hot_path_bounds(void) {
    CHECK(dbt_state_file_device(S, -1) == -1, "file -1 has a device");
    CHECK(dbt_state_file_device(S, DBT_FILE_CAP) == -1, "file CAP has a device");
    CHECK(dbt_state_file_device(S, used_file) == 0, "the registered file's device is not 0");
    struct dbt_file_entry *e = &dbt_files(S)[used_file];
    poke_u32(&e->device, 77);
    CHECK(dbt_state_file_device(S, used_file) == -1, "a forged device index came through");
    repair();
    struct dbt_model_state *m = &S->dev[0].model;
    struct dbt_request rq = {5, 0, 4096, DBT_OP_READ};
    struct dbt_result res;
    poke_int(&m->kind, 12);
    dbt_model_submit(m, &rq, &res);
    CHECK(res.complete_ns == 5, "a model with a forged kind served a request");
    repair();
    poke_int(&m->members, 1000);
    dbt_model_submit(m, &rq, &res);
    CHECK(res.complete_ns == 5, "a model with a forged member count served a request");
    repair();
}

/* A state without a page cache ends with its arena: a path that runs to the arena's end must be
 * read with a bound (unbounded, the dump would read past the mapping). And the arena never reports
 * more than it holds, however many paths are registered. */
static void test_arena(void) {
    char plain_state[700], err[512];
    snprintf(plain_state, sizeof plain_state, "%s/plain.state", work);
    const struct test_device one = {"one", "ram", "/data/one", {{0}}};
    CHECK(build_state(plain_state, &one, 1, NULL, err, sizeof err) == 0, "create: %s", err);
    struct dbt_state *s = dbt_state_attach(plain_state, err, sizeof err);
    CHECK(s != NULL, "attach: %s", err);
    if (!s) return;
    CHECK(s->off_arena + DBT_ARENA_BYTES == s->size, "the arena does not end the state");
    static char path[4000];
    memset(path, 'p', sizeof path - 1);
    path[0] = '/';
    int named = 0, unnamed = 0;
    for (uint64_t i = 0; i < 2500; i++) {
        int64_t f = dbt_state_file_index(s, 0, 7, 1000 + i, path, 0);
        if (f >= 0 && dbt_files(s)[f].path_off) named++;
        else if (f >= 0) unnamed++;
    }
    uint64_t used = atomic_load(&s->arena_used);
    CHECK(used <= DBT_ARENA_BYTES, "arena_used %llu passed the arena's %u bytes", (unsigned long long)used,
          DBT_ARENA_BYTES);
    CHECK(named > 2000 && unnamed > 0, "expected the arena to fill: %d named, %d without a path", named, unnamed);
    munmap(s, s->size);
    s = dbt_state_attach(plain_state, err, sizeof err);
    CHECK(s != NULL, "a state with a full arena is refused: %s", err);
    if (!s) return;
    /* a file whose path runs, unterminated, to the arena's last byte */
    int64_t f = dbt_state_file_index(s, 0, 8, 1, "/short", 0);
    CHECK(f >= 0, "register");
    dbt_files(s)[f].path_off = DBT_ARENA_BYTES - 16;
    memset(dbt_arena(s) + DBT_ARENA_BYTES - 16, 'z', 16);
    munmap(s, s->size);
    char *json = dbt_state_json(plain_state, err, sizeof err);
    CHECK(json != NULL, "dump: %s", err);
    CHECK(json && strstr(json, "\"zzzzzzzzzzzzzzzz\",8,1,\"other\"]"), "the unterminated path was not cut at the arena's end");
    CHECK(json && strstr(json, "\"untracked_calls\":0") && strstr(json, "\"trace_failures\":0"),
          "the dump lacks the untracked and trace failure counters");
    free(json);
    unlink(plain_state);
}

/* The device specs are checked as the text map once was: a negative value (-0 too) where none can
 * be, a value that is no number, one out of range, a name or folder with a control character or a
 * NUL inside, too long, empty or relative, an unknown kind, a parameter count not the kind's, page
 * cache settings out of range, too many devices, a spec of another version. Nothing is written. */
struct spec_case {
    const char *what, *want;
    void (*damage)(struct dbt_device_spec *d, struct dbt_pc_config *pc);
};

static void set_param(struct dbt_device_spec *d, const char *name, double v) {
    char err[256];
    if (dbt_spec_set(d, name, v, err, sizeof err) != 0) printf("setup: %s\n", err);
}
static void neg_rpm(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)pc, set_param(d, "rpm", -7200); }
static void neg_zero(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)pc, set_param(d, "cache_mib", -0.0); }
static void nan_param(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)pc, set_param(d, "rpm", NAN); }
static void inf_param(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)pc, set_param(d, "rpm", INFINITY); }
static void big_param(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)pc, set_param(d, "rpm", 99999); }
static void name_ctrl(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)pc, strcpy(d->name, "h\x01x"); }
static void name_esc(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)pc, strcpy(d->name, "h\x1b[31m"); }
static void dir_del(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)pc, strcpy(d->dir, "/d\x7f"); }
static void dir_cr(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)pc, strcpy(d->dir, "/d\rx"); }
static void name_nul(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)pc, d->name[3] = 'x'; }
static void name_long(struct dbt_device_spec *d, struct dbt_pc_config *pc) {
    (void)pc, memset(d->name, 'n', sizeof d->name);
}
static void dir_long(struct dbt_device_spec *d, struct dbt_pc_config *pc) {
    (void)pc, memset(d->dir, '/', sizeof d->dir);
}
static void name_empty(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)pc, d->name[0] = '\0'; }
static void dir_relative(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)pc, strcpy(d->dir, "d/h"); }
static void bad_kind(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)pc, d->kind = 9; }
static void few_params(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)pc, d->nparams--; }
static void ra_zero(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)d, pc->readahead_kb = 0; }
static void ra_huge(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)d, pc->readahead_kb = 1u << 20; }
static void bg_zero(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)d, pc->dirty_background_pct = 0; }
static void dirty_101(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)d, pc->dirty_pct = 101; }
static void dsync_2(struct dbt_device_spec *d, struct dbt_pc_config *pc) { (void)d, pc->dsync_data = 2; }

static void test_spec_refusals(void) {
    static const struct spec_case cases[] = {
        {"param negative", "cannot be negative", neg_rpm},
        {"param minus zero", "cannot be negative", neg_zero},
        {"param NaN", "not a number", nan_param},
        {"param infinite", "not a number", inf_param},
        {"param out of range", "outside", big_param},
        {"name with a control char", "control character", name_ctrl},
        {"name with an escape", "control character", name_esc},
        {"folder with DEL", "control character", dir_del},
        {"folder with CR inside", "control character", dir_cr},
        {"name with a NUL inside", "after its end", name_nul},
        {"name unterminated", "longer than 63", name_long},
        {"folder unterminated", "longer than 1023", dir_long},
        {"name empty", "no name", name_empty},
        {"folder relative", "not absolute", dir_relative},
        {"kind 9", "unknown device kind 9", bad_kind},
        {"one parameter short", "take 38 parameters, 37 given", few_params},
        {"page cache readahead 0", "readahead_kb 0", ra_zero},
        {"page cache readahead huge", "readahead_kb", ra_huge},
        {"page cache background 0", "dirty_background_pct 0", bg_zero},
        {"page cache dirty 101", "dirty_pct 101", dirty_101},
        {"page cache dsync 2", "dsync_data 2", dsync_2},
    };
    char out[700], err[512];
    snprintf(out, sizeof out, "%s/bad.state", work);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct dbt_device_spec d[2];
        struct dbt_pc_config pc = {1048576, 128, 10, 20, 0};
        CHECK(dbt_spec_init(&d[0], "r", "ram", "/d/r", err, sizeof err) == 0, "setup: %s", err);
        CHECK(dbt_spec_init(&d[1], "h", "hdd", "/d/h", err, sizeof err) == 0, "setup: %s", err);
        cases[i].damage(&d[1], &pc);
        err[0] = '\0';
        int rc = dbt_state_create(out, DBT_SPEC_VERSION, d, 2, &pc, err, sizeof err);
        CHECK(rc != 0, "%s: the spec was accepted", cases[i].what);
        CHECK(strstr(err, cases[i].want) != NULL, "%s: message '%s' does not mention '%s'", cases[i].what, err,
              cases[i].want);
        CHECK(rc == 0 || !strncmp(err, "device 1: ", 10) || !strncmp(err, "page cache: ", 12),
              "%s: the message '%s' does not name what it refused", cases[i].what, err);
        CHECK(file_size(out) == 0, "%s: a state was written", cases[i].what);
        printf("refused %-28s %s\n", cases[i].what, err);
    }
    static struct dbt_device_spec many[DBT_MAX_DEVICES + 1];
    for (int i = 0; i <= DBT_MAX_DEVICES; i++) dbt_spec_init(&many[i], "r", "ram", "/d", err, sizeof err);
    CHECK(dbt_state_create(out, DBT_SPEC_VERSION, many, DBT_MAX_DEVICES + 1, NULL, err, sizeof err) != 0 &&
              strstr(err, "at most 16"),
          "17 devices were not refused: %s", err);
    CHECK(dbt_state_create(out, DBT_SPEC_VERSION + 1, many, 1, NULL, err, sizeof err) != 0 && strstr(err, "version"),
          "a spec of another version was not refused: %s", err);
    CHECK(file_size(out) == 0, "a state was written");
    /* what is refused above, given rightly, is taken: a negative seek term where one can be, a
     * trailing slash, the page cache's edges */
    struct dbt_device_spec ok;
    dbt_spec_init(&ok, "h", "hdd", "/d/h//", err, sizeof err);
    set_param(&ok, "seek_a_ms", -1.5);
    set_param(&ok, "cache_mib", 0.0);
    struct dbt_pc_config edges = {1048576, DBT_PC_READAHEAD_KB_MAX, 100, 1, 1};
    CHECK(dbt_state_create(out, DBT_SPEC_VERSION, &ok, 1, &edges, err, sizeof err) == 0,
          "a valid spec (a negative seek term) was refused: %s", err);
    struct dbt_state *s = dbt_state_attach(out, err, sizeof err);
    CHECK(s && !strcmp(s->dev[0].dir, "/d/h") && s->dev[0].params.k.hdd.seek_a_ms == -1.5 && s->dsync_data == 1,
          "the state holds what the spec said: %s", s ? s->dev[0].dir : err);
    if (s) munmap(s, s->size);
    unlink(out);
}

int main(int argc, char **argv) {
    int own = argc < 2;
    if (own) {
        strcpy(work, "/tmp/dbt-test-state-XXXXXX");
        if (!mkdtemp(work)) return perror("mkdtemp"), 2;
    } else {
        snprintf(work, sizeof work, "%s", argv[1]);
        mkdir(work, 0700);
    }
    snprintf(mapped_path, sizeof mapped_path, "%s/mapped", work);
    snprintf(state_path, sizeof state_path, "%s/state", work);
    unlink(state_path);
    write_file(mapped_path, "a file a bypass maps\n");
    test_create_private();
    populate();
    S = map_state(state_path, &S_size);
    CHECK(S != NULL, "map the state");
    if (!S) return 1;
    expect_valid("fresh");
    test_header();
    test_page_cache();
    test_devices();
    test_files();
    test_bypass_records();
    expect_valid("after the header, page cache, device, file and bypass cases");
    test_note_bypass();
    test_hot_path_bounds();
    test_sizes();
    expect_valid("after the size cases");
    char err[512];
    char *json = dbt_state_json(state_path, err, sizeof err);
    CHECK(json && strstr(json, "\"/data/h/base/1\",1,100,\"other\"]"), "the valid state's dump lacks its file: %s",
          json ? "" : err);
    free(json);
    munmap(S, S_size);
    test_spec_refusals();
    test_arena();
    unlink(state_path);
    unlink(mapped_path);
    char victim[700];
    snprintf(victim, sizeof victim, "%s/victim", work);
    unlink(victim);
    char eight[700];
    snprintf(eight, sizeof eight, "%s/eight", work);
    unlink(eight);
    if (own) rmdir(work);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
