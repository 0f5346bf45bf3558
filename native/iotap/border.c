/* What the simulator library tells Python about the C side, so that Python declares none of it:
 * the device option table, and every layout the two share (the trace record, the replay's event and
 * request, a per-object I/O row, the device specs a state is built from, op codes, kinds, flag bits and constants). Python
 * builds its numpy dtypes and constants from these documents when it loads the library
 * (devices/native.py). */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "devmodel.h"
#include "jsonbuf.h"
#include "objio.h"
#include "pgpath.h"
#include "replay.h"
#include "statefile.h"
#include "durlog.h"
#include "trace.h"

#define EXPORT __attribute__((visibility("default")))

/* The layout document's own version: Python refuses a document of another one. */
#define DBT_LAYOUT_VERSION 1

/* {"hdd": {"help": ..., "params": [{"name","unit","default","min","max","help"}...]}, ...} */
EXPORT char *dbt_param_table_json(void) {
    struct dbt_jbuf b = {0};
    dbt_jb_printf(&b, "{");
    for (int k = 0; k < DBT_KIND_COUNT; k++) {
        const struct dbt_device_ops *o = dbt_ops_by_kind(k);
        dbt_jb_printf(&b, "%s", k ? "," : "");
        dbt_jb_str(&b, o->name);
        dbt_jb_printf(&b, ":{\"help\":");
        dbt_jb_str(&b, o->help);
        dbt_jb_printf(&b, ",\"params\":[");
        for (int i = 0; i < o->nparams; i++) {
            const struct dbt_param_def *p = &o->params[i];
            dbt_jb_printf(&b, "%s{\"name\":", i ? "," : "");
            dbt_jb_str(&b, p->name);
            dbt_jb_printf(&b, ",\"unit\":");
            dbt_jb_str(&b, p->unit);
            dbt_jb_printf(&b, ",\"default\":%.17g,\"min\":%.17g,\"max\":%.17g,\"help\":", p->def, p->min, p->max);
            dbt_jb_str(&b, p->help);
            dbt_jb_printf(&b, "}");
        }
        dbt_jb_printf(&b, "]}");
    }
    dbt_jb_printf(&b, "}");
    return dbt_jb_finish(&b);
}

/* ---- the shared layouts ------------------------------------------------------------------- */

/* One field of a shared struct: where it lies, how large it is, and what its elements are
 * ('u' unsigned, 'i' signed, 'f' IEEE double, 'S' a NUL-terminated byte string). The type comes
 * from the field's declaration (a field of a type not listed here does not compile), so the
 * description cannot drift from the struct. */
struct field_desc {
    const char *name;
    size_t offset, size, count;
    char type;
};

#define TYPE_CODE(x)                                                                               \
    _Generic((x), uint8_t: 'u', uint16_t: 'u', uint32_t: 'u', uint64_t: 'u', int8_t: 'i', int16_t: 'i', \
             int32_t: 'i', int64_t: 'i', double: 'f')
#define MEMBER(T, m) (((T *)0)->m)
/* a scalar field, named as in C (or, for a nested member, by the name given) */
#define FIELD(T, m) {#m, offsetof(T, m), sizeof MEMBER(T, m), 1, TYPE_CODE(MEMBER(T, m))}
#define NESTED(T, name, m) {name, offsetof(T, m), sizeof MEMBER(T, m), 1, TYPE_CODE(MEMBER(T, m))}
/* an array of numbers */
#define ARRAY(T, m)                                                                                \
    {#m, offsetof(T, m), sizeof MEMBER(T, m), sizeof MEMBER(T, m) / sizeof MEMBER(T, m)[0], TYPE_CODE(MEMBER(T, m)[0])}
/* a char array holding a string */
#define STRING(T, m)                                                                               \
    {#m, offsetof(T, m), sizeof MEMBER(T, m), _Generic(MEMBER(T, m)[0], char: 1), 'S'}

static const struct field_desc trace_rec_fields[] = {
    FIELD(struct dbt_trace_rec, submit_ns), FIELD(struct dbt_trace_rec, start_ns),
    FIELD(struct dbt_trace_rec, complete_ns), FIELD(struct dbt_trace_rec, end_ns),
    FIELD(struct dbt_trace_rec, offset), FIELD(struct dbt_trace_rec, len),
    FIELD(struct dbt_trace_rec, file), FIELD(struct dbt_trace_rec, pid),
    FIELD(struct dbt_trace_rec, aux), FIELD(struct dbt_trace_rec, tid),
    FIELD(struct dbt_trace_rec, op), FIELD(struct dbt_trace_rec, dev),
    FIELD(struct dbt_trace_rec, flags), FIELD(struct dbt_trace_rec, kind),
};

static const struct field_desc durlog_rec_fields[] = {
    FIELD(struct dbt_durlog_rec, magic), FIELD(struct dbt_durlog_rec, kind), FIELD(struct dbt_durlog_rec, dev),
    FIELD(struct dbt_durlog_rec, flags), FIELD(struct dbt_durlog_rec, pad_), FIELD(struct dbt_durlog_rec, len),
    FIELD(struct dbt_durlog_rec, aux), FIELD(struct dbt_durlog_rec, file), FIELD(struct dbt_durlog_rec, off),
    FIELD(struct dbt_durlog_rec, size), FIELD(struct dbt_durlog_rec, t0), FIELD(struct dbt_durlog_rec, seq),
    FIELD(struct dbt_durlog_rec, pid), FIELD(struct dbt_durlog_rec, tid),
};

static const struct field_desc replay_event_fields[] = {
    FIELD(struct dbt_replay_event, t0), FIELD(struct dbt_replay_event, t1),
    FIELD(struct dbt_replay_event, host_ns), FIELD(struct dbt_replay_event, late_ns),
    FIELD(struct dbt_replay_event, done_ns),
    FIELD(struct dbt_replay_event, off), FIELD(struct dbt_replay_event, len),
    FIELD(struct dbt_replay_event, file_size), FIELD(struct dbt_replay_event, file),
    FIELD(struct dbt_replay_event, dep), FIELD(struct dbt_replay_event, guard),
    FIELD(struct dbt_replay_event, stream), FIELD(struct dbt_replay_event, aux),
    FIELD(struct dbt_replay_event, kind), FIELD(struct dbt_replay_event, op),
    FIELD(struct dbt_replay_event, dev), FIELD(struct dbt_replay_event, flags),
    FIELD(struct dbt_replay_event, nudge_ns),
};

/* the request event's fields, flat, then the index of the event that caused it */
static const struct field_desc replay_request_fields[] = {
    NESTED(struct dbt_replay_request, "arrival", ev.arrival), NESTED(struct dbt_replay_request, "start", ev.start),
    NESTED(struct dbt_replay_request, "complete", ev.complete), NESTED(struct dbt_replay_request, "off", ev.off),
    NESTED(struct dbt_replay_request, "len", ev.len), NESTED(struct dbt_replay_request, "file", ev.file),
    NESTED(struct dbt_replay_request, "op", ev.op), NESTED(struct dbt_replay_request, "dev", ev.dev),
    NESTED(struct dbt_replay_request, "flags", ev.flags), FIELD(struct dbt_replay_request, event),
};

static const struct field_desc objio_row_fields[] = {
    FIELD(struct dbt_objio_row, file), FIELD(struct dbt_objio_row, reads), FIELD(struct dbt_objio_row, read_bytes),
    FIELD(struct dbt_objio_row, writes), FIELD(struct dbt_objio_row, write_bytes),
    FIELD(struct dbt_objio_row, flushes), FIELD(struct dbt_objio_row, cached_reads),
    FIELD(struct dbt_objio_row, async), FIELD(struct dbt_objio_row, sequential),
    FIELD(struct dbt_objio_row, device_ns), FIELD(struct dbt_objio_row, dev), FIELD(struct dbt_objio_row, pad),
};

static const struct field_desc device_spec_fields[] = {
    STRING(struct dbt_device_spec, name), STRING(struct dbt_device_spec, dir), FIELD(struct dbt_device_spec, kind),
    FIELD(struct dbt_device_spec, nparams), ARRAY(struct dbt_device_spec, params),
};

static const struct field_desc pc_config_fields[] = {
    FIELD(struct dbt_pc_config, bytes), FIELD(struct dbt_pc_config, readahead_kb),
    FIELD(struct dbt_pc_config, dirty_background_pct), FIELD(struct dbt_pc_config, dirty_pct),
    FIELD(struct dbt_pc_config, dsync_data),
};

static const struct field_desc pg_path_fields[] = {
    FIELD(struct dbt_pg_path, cls), FIELD(struct dbt_pg_path, space), FIELD(struct dbt_pg_path, fork),
    FIELD(struct dbt_pg_path, dsync), FIELD(struct dbt_pg_path, space_len), FIELD(struct dbt_pg_path, database),
    FIELD(struct dbt_pg_path, relfilenode), FIELD(struct dbt_pg_path, segment),
};

struct struct_desc {
    const char *name;
    size_t size;
    const struct field_desc *fields;
    size_t nfields;
};

#define STRUCT(name, T, fields) {name, sizeof(T), fields, sizeof fields / sizeof fields[0]}
static const struct struct_desc structs[] = {
    STRUCT("trace_rec", struct dbt_trace_rec, trace_rec_fields),
    STRUCT("durlog_rec", struct dbt_durlog_rec, durlog_rec_fields),
    STRUCT("replay_event", struct dbt_replay_event, replay_event_fields),
    STRUCT("replay_request", struct dbt_replay_request, replay_request_fields),
    STRUCT("objio_row", struct dbt_objio_row, objio_row_fields),
    STRUCT("device_spec", struct dbt_device_spec, device_spec_fields),
    STRUCT("pc_config", struct dbt_pc_config, pc_config_fields),
    STRUCT("pg_path", struct dbt_pg_path, pg_path_fields),
};

/* Named values: an enum's members, a byte's flag bits, or constants. The names are the contract
 * (they label the trace's Parquet columns and values); the values come from the headers. */
struct named {
    const char *name;
    uint64_t value;
};

#define NAMED_LIST(name, list) {name, list, sizeof list / sizeof list[0]}
struct named_list {
    const char *name;
    const struct named *items;
    size_t n;
};

static const struct named device_ops[] = {{"read", DBT_OP_READ}, {"write", DBT_OP_WRITE}, {"flush", DBT_OP_FLUSH}};
static const struct named trace_ops[] = {
    {"read", DBT_TOP_READ},         {"write", DBT_TOP_WRITE},       {"flush", DBT_TOP_FLUSH},
    {"sync_file_range", DBT_TOP_SYNC_RANGE}, {"allocate", DBT_TOP_ALLOCATE}, {"truncate", DBT_TOP_TRUNCATE},
    {"fadvise", DBT_TOP_ADVISE},
};
static const struct named trace_kinds[] = {{"request", DBT_TK_REQUEST}, {"call", DBT_TK_CALL}, {"sync", DBT_TK_SYNC}};
static const struct named sync_ops[] = {{"wake", DBT_SYNC_WAKE}, {"sleep", DBT_SYNC_SLEEP}};

static const struct named trace_flags[] = {
    {"direct", DBT_TF_DIRECT},         {"dsync", DBT_TF_DSYNC}, {"cache_hit", DBT_TF_CACHE_HIT},
    {"stream", DBT_TF_STREAM},         {"page_cache", DBT_TF_PAGE_CACHE}, {"async", DBT_TF_ASYNC},
    {"with_request", DBT_TF_WITH_REQUEST},
};
static const struct named durlog_kinds[] = {{"write", DBT_DL_WRITE}, {"truncate", DBT_DL_TRUNCATE},
                                            {"allocate", DBT_DL_ALLOCATE}, {"rename", DBT_DL_RENAME},
                                            {"unlink", DBT_DL_UNLINK}};
static const struct named durlog_flags[] = {
    {"paused", DBT_DLF_PAUSED}, {"direct", DBT_DLF_DIRECT}, {"dsync", DBT_DLF_DSYNC}, {"reread", DBT_DLF_REREAD},
};
static const struct named sync_flags[] = {{"kill", DBT_SF_KILL}, {"sem", DBT_SF_SEM}, {"epoll", DBT_SF_EPOLL},
                                          {"aio", DBT_SF_AIO}, {"futex", DBT_SF_FUTEX}, {"cond", DBT_SF_COND}};
static const struct named trace_reserved[] = {{"client", DBT_TF_RESERVED_CLIENT}};

static const struct named constants[] = {
    {"trace_format", DBT_TRACE_FORMAT},
    {"sync_coverage", DBT_SYNC_COVERAGE},
    {"trace_op_uncommitted", DBT_TRACE_OP_UNCOMMITTED},
    {"trace_size_unknown", DBT_TRACE_SIZE_UNKNOWN},
    {"trace_size_page", DBT_TRACE_SIZE_PAGE},
    {"durlog_format", DBT_DURLOG_FORMAT},
    {"durlog_magic", DBT_DURLOG_MAGIC},
    {"chunk_bytes", DBT_CHUNK_BYTES},
    {"max_devices", DBT_MAX_DEVICES},
    {"state_version", DBT_STATE_VERSION},
    {"spec_version", DBT_SPEC_VERSION},
};

static const struct named_list enums[] = {
    NAMED_LIST("device_op", device_ops), NAMED_LIST("trace_op", trace_ops), NAMED_LIST("trace_kind", trace_kinds),
    NAMED_LIST("sync_op", sync_ops), NAMED_LIST("durlog_kind", durlog_kinds),
};
static const struct named_list flag_sets[] = {NAMED_LIST("trace", trace_flags), NAMED_LIST("sync", sync_flags),
                                              NAMED_LIST("durlog", durlog_flags)};
static const struct named_list reserved_sets[] = {NAMED_LIST("trace", trace_reserved)};

static void named_object(struct dbt_jbuf *b, const struct named *items, size_t n) {
    dbt_jb_printf(b, "{");
    for (size_t i = 0; i < n; i++) {
        dbt_jb_printf(b, "%s", i ? "," : "");
        dbt_jb_str(b, items[i].name);
        dbt_jb_printf(b, ":%llu", (unsigned long long)items[i].value);
    }
    dbt_jb_printf(b, "}");
}

/* An enum whose names are a table in enum order (the pgpath.c tables), as named values in out. */
static struct named_list names_of(const char *name, const char *const *names, size_t n, struct named *out) {
    for (size_t i = 0; i < n; i++) out[i] = (struct named){names[i], i};
    return (struct named_list){name, out, n};
}

/* The static lists, then `nextra` built when the document is. */
static void named_lists(struct dbt_jbuf *b, const char *key, const struct named_list *lists, size_t n,
                        const struct named_list *extra, size_t nextra) {
    dbt_jb_printf(b, ",\"%s\":{", key);
    for (size_t i = 0; i < n + nextra; i++) {
        const struct named_list *l = i < n ? &lists[i] : &extra[i - n];
        dbt_jb_printf(b, "%s", i ? "," : "");
        dbt_jb_str(b, l->name);
        dbt_jb_printf(b, ":");
        named_object(b, l->items, l->n);
    }
    dbt_jb_printf(b, "}");
}

EXPORT char *dbt_layout_json(void) {
    struct dbt_jbuf b = {0};
    dbt_jb_printf(&b, "{\"version\":%d,\"structs\":{", DBT_LAYOUT_VERSION);
    for (size_t s = 0; s < sizeof structs / sizeof structs[0]; s++) {
        const struct struct_desc *d = &structs[s];
        dbt_jb_printf(&b, "%s\"%s\":{\"size\":%zu,\"fields\":[", s ? "," : "", d->name, d->size);
        for (size_t f = 0; f < d->nfields; f++) {
            const struct field_desc *x = &d->fields[f];
            dbt_jb_printf(&b, "%s{\"name\":\"%s\",\"offset\":%zu,\"size\":%zu,\"count\":%zu,\"type\":\"%c\"}",
                          f ? "," : "", x->name, x->offset, x->size, x->count, x->type);
        }
        dbt_jb_printf(&b, "]}");
    }
    dbt_jb_printf(&b, "}");
    struct named kinds[DBT_KIND_COUNT]; /* the device kinds are the ops table's */
    for (int k = 0; k < DBT_KIND_COUNT; k++) kinds[k] = (struct named){dbt_ops_by_kind(k)->name, (uint64_t)k};
    const struct named_list device_kinds = {"device_kind", kinds, DBT_KIND_COUNT};
    struct named pg[DBT_PG_CLASSES + 8 + DBT_LIMITS];
    const struct named_list pg_lists[] = {
        names_of("pg_class", dbt_pg_class_names, DBT_PG_CLASSES, pg),
        names_of("pg_space", dbt_pg_space_names, 4, pg + DBT_PG_CLASSES),
        names_of("pg_fork", dbt_pg_fork_names, 4, pg + DBT_PG_CLASSES + 4),
        device_kinds,
        names_of("device_limit", dbt_limit_names, DBT_LIMITS, pg + DBT_PG_CLASSES + 8),
    };
    named_lists(&b, "enums", enums, sizeof enums / sizeof enums[0], pg_lists, 5);
    named_lists(&b, "flags", flag_sets, sizeof flag_sets / sizeof flag_sets[0], NULL, 0);
    named_lists(&b, "reserved", reserved_sets, sizeof reserved_sets / sizeof reserved_sets[0], NULL, 0);
    dbt_jb_printf(&b, ",\"constants\":");
    named_object(&b, constants, sizeof constants / sizeof constants[0]);
    dbt_jb_printf(&b, "}");
    return dbt_jb_finish(&b);
}
