/* Device physics, what every kind shares: the table of kinds, the option helpers, arrays of members
 * (RAID 0) and the submit path. Each kind's model is its own file (dev_*.c); the command queue is
 * devqueue.c's. See devmodel.h. Units inside: nanoseconds and bytes. */
#include "devkind.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The kinds, by enum dbt_kind: each brings its ops (its file, dev_*.c). */
static const struct dbt_device_ops *const ops_table[DBT_KIND_COUNT] = {
    [DBT_KIND_REAL] = &dbt_real_ops, [DBT_KIND_HDD] = &dbt_hdd_ops,     [DBT_KIND_SSD] = &dbt_ssd_ops,
    [DBT_KIND_RAM] = &dbt_ram_ops,   [DBT_KIND_CLOUD] = &dbt_cloud_ops,
};

const struct dbt_device_ops *dbt_ops_by_kind(int kind) {
    if (kind < 0 || kind >= DBT_KIND_COUNT) return NULL;
    return ops_table[kind];
}

const struct dbt_device_ops *dbt_ops_by_name(const char *name) {
    for (int k = 0; k < DBT_KIND_COUNT; k++)
        if (strcmp(ops_table[k]->name, name) == 0) return ops_table[k];
    return NULL;
}

void dbt_params_defaults(struct dbt_params *p, int kind) {
    memset(p, 0, sizeof *p);
    const struct dbt_device_ops *o = dbt_ops_by_kind(kind);
    for (int i = 0; o && i < o->nparams; i++) *(double *)((char *)p + o->params[i].offset) = o->params[i].def;
}

/* One option's value: a finite number within its range; a negative one (a negative zero too) where
 * the option cannot be negative is said so. */
static int param_value_ok(const struct dbt_param_def *def, double v, char *err, size_t errlen) {
    if (!isfinite(v)) {
        snprintf(err, errlen, "%s: %g is not a number", def->name, v);
        return -1;
    }
    if (signbit(v) && def->min >= 0) {
        snprintf(err, errlen, "%s = %g: it cannot be negative", def->name, v);
        return -1;
    }
    if (v < def->min || v > def->max) {
        snprintf(err, errlen, "%s = %g is outside %g..%g %s", def->name, v, def->min, def->max, def->unit);
        return -1;
    }
    return 0;
}

int dbt_params_set_index(struct dbt_params *p, int kind, int i, double v, char *err, size_t errlen) {
    const struct dbt_device_ops *o = dbt_ops_by_kind(kind);
    if (!o || i < 0 || i >= o->nparams) {
        snprintf(err, errlen, "%s devices have no parameter %d", o ? o->name : "unknown", i);
        return -1;
    }
    if (param_value_ok(&o->params[i], v, err, errlen) != 0) return -1;
    memcpy((char *)p + o->params[i].offset, &v, sizeof v);
    return 0;
}

int dbt_params_set(struct dbt_params *p, int kind, const char *name, double v, char *err, size_t errlen) {
    const struct dbt_device_ops *o = dbt_ops_by_kind(kind);
    for (int i = 0; o && i < o->nparams; i++)
        if (strcmp(o->params[i].name, name) == 0) return dbt_params_set_index(p, kind, i, v, err, errlen);
    snprintf(err, errlen, "%s devices have no parameter '%s'", o ? o->name : "unknown", name);
    return -1;
}

int dbt_params_check(const struct dbt_params *p, int kind, char *err, size_t errlen) {
    const struct dbt_device_ops *o = dbt_ops_by_kind(kind);
    if (!o) {
        snprintf(err, errlen, "device kind %d is unknown", kind);
        return -1;
    }
    for (int i = 0; i < o->nparams; i++) {
        const struct dbt_param_def *def = &o->params[i];
        double v;
        memcpy(&v, (const char *)p + def->offset, sizeof v);
        if (!(v >= def->min && v <= def->max)) { /* written so that NaN fails too */
            snprintf(err, errlen, "%s parameter %s = %g is outside %g..%g %s", o->name, def->name, v, def->min,
                     def->max, def->unit);
            return -1;
        }
    }
    return 0;
}

static void drive_init(struct dbt_drive *st, int kind, const struct dbt_params *p) {
    memset(st, 0, sizeof *st);
    st->kind = kind;
    ops_table[kind]->init(st, p);
}

void dbt_model_init(struct dbt_model_state *st, int kind, const struct dbt_params *p) {
    struct dbt_params defaults;
    if (!p) {
        dbt_params_defaults(&defaults, kind);
        p = &defaults;
    }
    memset(st, 0, sizeof *st);
    st->kind = kind;
    st->flush_ignored = p->flush_honoured < 0.5;
    st->members = p->members >= 1 ? (int)p->members : 1;
    if (st->members > DBT_MAX_MEMBERS) st->members = DBT_MAX_MEMBERS;
    st->stripe_bytes = p->stripe_kib >= 1 ? (uint64_t)(p->stripe_kib * 1024) : 65536;
    for (int m = 0; m < st->members; m++) drive_init(&st->drive[m], kind, p);
}

int dbt_model_check(const struct dbt_model_state *st, int kind, char *err, size_t errlen) {
    if (st->kind != kind || !dbt_ops_by_kind(kind)) {
        snprintf(err, errlen, "its model is of kind %d, the device of kind %d", st->kind, kind);
        return -1;
    }
    if (st->members < 1 || st->members > DBT_MAX_MEMBERS || st->stripe_bytes == 0) {
        snprintf(err, errlen, "its model has %d members (1..%d) with a stripe of %llu bytes", st->members,
                 DBT_MAX_MEMBERS, (unsigned long long)st->stripe_bytes);
        return -1;
    }
    if (st->q_count > DBT_QUEUED_REQUESTS || st->q_waiting > st->q_count) {
        snprintf(err, errlen, "its command queue holds %u requests (%u waiting), more than its %u", st->q_count,
                 st->q_waiting, DBT_QUEUED_REQUESTS);
        return -1;
    }
    for (int m = 0; m < st->members; m++) {
        const struct dbt_drive *dr = &st->drive[m];
        if (dr->kind != kind) {
            snprintf(err, errlen, "its member %d is of kind %d, the device of kind %d", m, dr->kind, kind);
            return -1;
        }
        const struct dbt_device_ops *ops = dbt_ops_by_kind(kind);
        if (ops->check && ops->check(dr, m, err, errlen) != 0) return -1;
    }
    return 0;
}

/* RAID 0: the request is cut at stripe boundaries; each member gets one request covering its
 * pieces (consecutive rows of one member are contiguous on it). Fills used/lo/hi per member. A flush
 * (or an empty request) goes to every member. */
void dbt_model_split(const struct dbt_model_state *st, const struct dbt_request *rq, int *used, uint64_t *lo,
                     uint64_t *hi) {
    const uint64_t S = st->stripe_bytes, M = (uint64_t)st->members;
    for (int m = 0; m < st->members; m++) used[m] = 0, lo[m] = hi[m] = 0;
    if (rq->op == DBT_OP_FLUSH || rq->len == 0) {
        for (int m = 0; m < st->members; m++) used[m] = 1;
        return;
    }
    uint64_t addr = rq->addr, left = rq->len;
    while (left) {
        uint64_t stripe = addr / S, within = addr % S, piece = S - within < left ? S - within : left;
        int m = (int)(stripe % M);
        uint64_t maddr = (stripe / M) * S + within;
        if (!used[m]) used[m] = 1, lo[m] = maddr;
        hi[m] = maddr + piece;
        addr += piece;
        left -= piece;
    }
}

const char *const dbt_limit_names[DBT_LIMITS] = {"iops", "throughput", "iops_credits", "throughput_credits"};

/* Every member used is issued its part at the arrival time; the request completes when the slowest
 * member does. */
void dbt_model_set_credits(struct dbt_model_state *st, double fraction, uint64_t at) {
    if ((unsigned)st->kind >= DBT_KIND_COUNT || st->members > DBT_MAX_MEMBERS || !ops_table[st->kind]->set_credits)
        return;
    for (int m = 0; m < st->members; m++) ops_table[st->kind]->set_credits(&st->drive[m], fraction, at);
}

void dbt_model_submit(struct dbt_model_state *st, const struct dbt_request *rq, struct dbt_result *out) {
    memset(out->held_from, 0, sizeof out->held_from);
    memset(out->held_to, 0, sizeof out->held_to);
    /* The state may be shared memory: its kind and member count index tables, so they are checked
     * here too (two compares), not only when the state was attached. */
    if (UNLIKELY((unsigned)st->kind >= DBT_KIND_COUNT || st->members > DBT_MAX_MEMBERS)) {
        out->start_ns = out->complete_ns = rq->arrival_ns;
        out->flags = 0;
        return;
    }
    if (UNLIKELY(rq->op == DBT_OP_FLUSH && st->flush_ignored)) { /* the drive says done, and does nothing */
        out->start_ns = out->complete_ns = rq->arrival_ns;
        out->flags = 0;
        return;
    }
    if (st->members <= 1) {
        ops_table[st->kind]->submit(&st->drive[0], rq, out);
        return;
    }
    uint64_t lo[DBT_MAX_MEMBERS], hi[DBT_MAX_MEMBERS];
    int used[DBT_MAX_MEMBERS];
    dbt_model_split(st, rq, used, lo, hi);
    int first = 1;
    uint32_t flags = DBT_RES_CACHE_HIT | DBT_RES_STREAM;
    for (int m = 0; m < st->members; m++) {
        if (!used[m]) continue;
        struct dbt_request part = {rq->arrival_ns, lo[m], (uint32_t)(hi[m] - lo[m]), rq->op};
        struct dbt_result r = {0};
        ops_table[st->kind]->submit(&st->drive[m], &part, &r);
        if (first || r.start_ns < out->start_ns) out->start_ns = r.start_ns;
        if (first || r.complete_ns > out->complete_ns) out->complete_ns = r.complete_ns;
        for (int k = 0; k < DBT_LIMITS; k++) { /* held while any member was: the members' spans joined */
            if (r.held_to[k] <= r.held_from[k]) continue;
            if (out->held_to[k] <= out->held_from[k] || r.held_from[k] < out->held_from[k]) out->held_from[k] = r.held_from[k];
            if (r.held_to[k] > out->held_to[k]) out->held_to[k] = r.held_to[k];
        }
        flags &= r.flags;
        first = 0;
    }
    out->flags = flags;
}
