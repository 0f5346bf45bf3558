/* PostgreSQL's file names. See pgpath.h. */
#define _GNU_SOURCE
#include "pgpath.h"

#include <string.h>

const char *const dbt_pg_class_names[DBT_PG_CLASSES] = {
    [DBT_PG_OTHER] = "other", [DBT_PG_RELATION] = "relation", [DBT_PG_FSM] = "fsm",
    [DBT_PG_VM] = "vm",       [DBT_PG_WAL] = "wal",           [DBT_PG_TEMP] = "temp",
};
const char *const dbt_pg_space_names[4] = {
    [DBT_PG_SPACE_NONE] = "none", [DBT_PG_SPACE_GLOBAL] = "pg_global", [DBT_PG_SPACE_DEFAULT] = "pg_default",
    [DBT_PG_SPACE_LOCATION] = "location",
};
const char *const dbt_pg_fork_names[4] = {
    [DBT_PG_FORK_MAIN] = "main", [DBT_PG_FORK_FSM] = "fsm", [DBT_PG_FORK_VM] = "vm", [DBT_PG_FORK_INIT] = "init",
};

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
static int is_upper_hex(char c) { return is_digit(c) || (c >= 'A' && c <= 'F'); }

/* Decimal digits (one at least) at p, their value in *v (an id larger than 2^62 is no PostgreSQL
 * id); returns the end, or NULL. */
static const char *number(const char *p, const char *end, int64_t *v) {
    const char *q = p;
    int64_t x = 0;
    for (; q < end && is_digit(*q); q++) {
        if (x > (INT64_C(1) << 62) / 10) return NULL;
        x = x * 10 + (*q - '0');
    }
    if (q == p) return NULL;
    *v = x;
    return q;
}

static int is(const char *p, const char *end, const char *word) {
    size_t n = strlen(word);
    return (size_t)(end - p) == n && memcmp(p, word, n) == 0;
}

/* The tail every relation file name shares: [_fsm|_vm|_init][.<segment>] to the end. */
static int fork_and_segment(const char *p, const char *end, int *fork, int64_t *segment) {
    *fork = DBT_PG_FORK_MAIN;
    *segment = 0;
    if (p < end && *p == '_') {
        p++;
        static const struct {
            const char *name;
            int fork;
        } forks[] = {{"fsm", DBT_PG_FORK_FSM}, {"vm", DBT_PG_FORK_VM}, {"init", DBT_PG_FORK_INIT}};
        int found = 0;
        for (unsigned i = 0; i < sizeof forks / sizeof forks[0] && !found; i++) {
            size_t n = strlen(forks[i].name);
            if ((size_t)(end - p) >= n && !memcmp(p, forks[i].name, n)) {
                *fork = forks[i].fork;
                p += n;
                found = 1;
            }
        }
        if (!found) return 0;
    }
    if (p < end && *p == '.') {
        p = number(p + 1, end, segment);
        if (!p) return 0;
    }
    return p == end;
}

/* A relation file's name: [t<backend>_]<relfilenode>[_fork][.segment]; temp: the t prefix. */
static int relation_name(const char *p, const char *end, int allow_temp, int *temp, int64_t *node, int *fork,
                         int64_t *segment) {
    int64_t backend;
    *temp = 0;
    if (allow_temp && p < end && *p == 't') {
        const char *q = number(p + 1, end, &backend);
        if (q && q < end && *q == '_') {
            *temp = 1;
            p = q + 1;
        }
    }
    p = number(p, end, node);
    return p && fork_and_segment(p, end, fork, segment);
}

/* PG_<version>_<catalog version>: a tablespace's folder for this server version. */
static int version_folder(const char *p, const char *end) {
    int64_t v;
    if (end - p < 3 || memcmp(p, "PG_", 3) != 0) return 0;
    p = number(p + 3, end, &v);
    if (!p || p == end || *p != '_') return 0;
    p = number(p + 1, end, &v);
    return p == end;
}

/* The last path component before `end` (which points at a '/'), or NULL if there is no '/' before it. */
static const char *component_before(const char *path, const char *end) {
    for (const char *p = end; p > path;)
        if (*--p == '/') return p;
    return NULL;
}

/* A name the dsync rule takes as a database file's: <hex>[_fork][.segment]. */
static int database_file_name(const char *p, const char *end) {
    const char *q = p;
    while (q < end && is_hex(*q)) q++;
    int fork;
    int64_t segment;
    return q > p && fork_and_segment(q, end, &fork, &segment);
}

/* A WAL segment's name: 24 uppercase hex digits, or that and .partial. */
static int wal_segment_name(const char *p, const char *end) {
    if (end - p != 24 && !(end - p == 32 && !memcmp(p + 24, ".partial", 8))) return 0;
    for (int i = 0; i < 24; i++)
        if (!is_upper_hex(p[i])) return 0;
    return 1;
}

void dbt_pg_path_classify(const char *path, struct dbt_pg_path *out) {
    *out = (struct dbt_pg_path){DBT_PG_OTHER, DBT_PG_SPACE_NONE, DBT_PG_FORK_MAIN, 0, 0, -1, -1, -1};
    const char *end = path + strlen(path);
    const char *slash = component_before(path, end);
    const char *base = slash ? slash + 1 : path;
    /* a sort's or hash's temp files, named like segments inside a shared file set's folder
     * (pgsql_tmp/pgsql_tmp1234.0.fileset/1.0), are temp files all the same */
    out->dsync = !strstr(path, "/pgsql_tmp") && database_file_name(base, end);
    if (strstr(path, "/pgsql_tmp/")) {
        out->cls = DBT_PG_TEMP;
        return;
    }
    /* <space>/base/<db>/<file> or <location>/PG_x_y/<db>/<file>; <space>/global/<file> */
    const char *s1 = slash ? component_before(path, slash) : NULL;   /* the '/' before the database */
    const char *s2 = s1 ? component_before(path, s1) : NULL;         /* the '/' before base or PG_x_y */
    int temp = 0, fork = DBT_PG_FORK_MAIN;
    int64_t db, node, segment;
    if (s2 && number(s1 + 1, slash, &db) == slash && (is(s2 + 1, s1, "base") || version_folder(s2 + 1, s1)) &&
        relation_name(base, end, 1, &temp, &node, &fork, &segment)) {
        out->database = db;
        out->space = is(s2 + 1, s1, "base") ? DBT_PG_SPACE_DEFAULT : DBT_PG_SPACE_LOCATION;
        out->space_len = (uint32_t)(s2 - path);
    } else if (s1 && is(s1 + 1, slash, "global") && relation_name(base, end, 0, &temp, &node, &fork, &segment)) {
        out->space = DBT_PG_SPACE_GLOBAL;
    } else {
        if (strstr(path, "/pg_wal/") || (slash && wal_segment_name(base, end))) out->cls = DBT_PG_WAL;
        return;
    }
    out->relfilenode = node;
    out->segment = segment;
    out->fork = (uint8_t)fork;
    out->cls = temp ? DBT_PG_TEMP : fork == DBT_PG_FORK_FSM ? DBT_PG_FSM : fork == DBT_PG_FORK_VM ? DBT_PG_VM
                                                                                          : DBT_PG_RELATION;
}
