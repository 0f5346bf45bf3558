/* The RAM kind. See dev_ram.h. Units inside: nanoseconds and bytes. */
#include "devkind.h"

#include <string.h>

static const struct dbt_param_def ram_params[] = {
    {"capacity_gb", "GB", DBT_PARAM(capacity_gb), 16, 1, 100000, "capacity (10^9 bytes)"},
    {"latency_us", "us", DBT_KIND_PARAM(ram, latency_us), 60, 0, 100000, "latency of one request as the host sees it, overlapped between requests"},
    {"interface_mb_s", "MB/s", DBT_KIND_PARAM(ram, interface_mb_s), 100, 1, 100000, "host interface cap (one 2 Gb/s Fibre Channel port ~ 100 MB/s)"},
    DBT_ARRAY_PARAMS,
    DBT_DURABILITY_PARAMS(4),
};

DBT_FITS_SPEC(ram_params);

static void ram_init(struct dbt_drive *st, const struct dbt_params *p) {
    const struct dbt_ram_params *rp = &p->k.ram;
    struct dbt_ram_derived *d = &st->u.ram.d;
    d->lat_ns = rp->latency_us * 1e3;
    d->bytes_per_ns_iface = rp->interface_mb_s * 1e6 / 1e9;
    memset(&st->u.ram.s, 0, sizeof st->u.ram.s);
}

/* RAM: a fixed latency, overlapped between requests, and the interface serialising transfers. */
static void ram_submit(struct dbt_drive *st, const struct dbt_request *rq, struct dbt_result *out) {
    const struct dbt_ram_derived *d = &st->u.ram.d;
    struct dbt_ram_state *f = &st->u.ram.s;
    uint64_t xfer = (uint64_t)((double)rq->len / d->bytes_per_ns_iface);
    out->flags = 0;
    if (rq->op == DBT_OP_READ) {
        uint64_t ready = rq->arrival_ns + (uint64_t)d->lat_ns;
        uint64_t xs = ready > f->iface_busy ? ready : f->iface_busy;
        out->start_ns = rq->arrival_ns;
        out->complete_ns = f->iface_busy = xs + xfer;
    } else if (rq->op == DBT_OP_WRITE) {
        uint64_t xs = rq->arrival_ns > f->iface_busy ? rq->arrival_ns : f->iface_busy;
        f->iface_busy = xs + xfer;
        out->start_ns = xs;
        out->complete_ns = xs + xfer + (uint64_t)d->lat_ns;
    } else {
        out->start_ns = rq->arrival_ns;
        out->complete_ns = rq->arrival_ns > f->iface_busy ? rq->arrival_ns : f->iface_busy;
    }
}

const struct dbt_device_ops dbt_ram_ops = {
    .name = "ram",
    .version = DBT_OPS_VERSION,
    .kind = DBT_KIND_RAM,
    .params = ram_params,
    .nparams = NELEM(ram_params),
    .params_size = sizeof(struct dbt_ram_params),
    .help = "RAM SAN: small latency, interface bandwidth cap",
    .init = ram_init,
    .submit = ram_submit,
};
