/* What a device kind's file (dev_*.c) shares with devmodel.c and devqueue.c, and nothing else sees:
 * the helpers its option table is written with, and each kind's ops. */
#ifndef DBT_DEVKIND_H
#define DBT_DEVKIND_H

#include <stddef.h>

#include "devmodel.h"

#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* An option of every kind, and one of a kind's own struct (its member of struct dbt_params' union). */
#define DBT_PARAM(field) offsetof(struct dbt_params, field)
#define DBT_KIND_PARAM(kind, field) offsetof(struct dbt_params, k.kind.field)

/* Every kind can be an array: N identical members striped (RAID 0), one by default. */
#define DBT_ARRAY_PARAMS                                                                                          \
    {"members", "count", DBT_PARAM(members), 1, 1, DBT_MAX_MEMBERS, "identical drives striped together (RAID 0); 1 = a single drive"}, \
    {"stripe_kib", "KiB", DBT_PARAM(stripe_kib), 64, 4, 65536, "stripe unit: consecutive pieces of this size go to consecutive members"}

/* What a power cut leaves, every kind: whether a flush is obeyed (a drive that ignores it answers at
 * once, and keeps what it holds in its cache), and the largest write the device never tears. Read
 * by the crash states (src/dbtier/crash/devices.py); a kind with a volatile write cache says its size
 * in its own parameters. */
#define DBT_DURABILITY_PARAMS(atomic_kib)                                                                         \
    {"flush_honoured", "0/1", DBT_PARAM(flush_honoured), 1, 0, 1, "1: a cache flush (FLUSH, FUA) is obeyed; 0: the drive acknowledges it at once and destages when it pleases, as many consumer drives do"}, \
    {"atomic_write_kib", "KiB", DBT_PARAM(atomic_write_kib), atomic_kib, 0.5, 1024, "the largest aligned write a power cut never tears (a sector, a flash page, a volume's guarantee)"}

/* A kind's option table fits a device spec. */
#define DBT_FITS_SPEC(table) _Static_assert(NELEM(table) <= DBT_MAX_PARAMS, "a device spec holds every option of " #table)

extern const struct dbt_device_ops dbt_real_ops, dbt_hdd_ops, dbt_ssd_ops, dbt_ram_ops, dbt_cloud_ops;

/* The model state's kind and member count index tables: checked wherever they are used. */
static inline int dbt_model_sane(const struct dbt_model_state *st) {
    return (unsigned)st->kind < DBT_KIND_COUNT && st->members >= 1 && st->members <= DBT_MAX_MEMBERS &&
           st->stripe_bytes > 0;
}

/* RAID 0: which members a request uses, and the byte range on each (devmodel.c). */
void dbt_model_split(const struct dbt_model_state *st, const struct dbt_request *rq, int *used, uint64_t *lo,
                     uint64_t *hi);

#endif
