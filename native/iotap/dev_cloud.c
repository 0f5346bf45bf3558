/* The cloud kind. See dev_cloud.h. Units inside: nanoseconds and bytes. */
#include "devkind.h"

#include <math.h>
#include <string.h>

/* A network block volume as clouds sell them: each request pays the network and the backing
 * media's latency, overlapped between requests, and is admitted by two token buckets (I/Os and
 * bytes) refilled at the provisioned rates, whose burst credits let it run at the burst rate until
 * they are spent. */
static const struct dbt_param_def cloud_params[] = {
    {"capacity_gb", "GB", DBT_PARAM(capacity_gb), 100, 1, 100000, "capacity (10^9 bytes)"},
    {"read_latency_us", "us", DBT_KIND_PARAM(cloud, read_latency_us), 500, 0, 100000, "latency of a small read as the host sees it: network round trip and backing media"},
    {"write_latency_us", "us", DBT_KIND_PARAM(cloud, write_latency_us), 800, 0, 100000, "latency of a small write until acknowledged durable (replicated)"},
    {"iops", "IO/s", DBT_KIND_PARAM(cloud, iops), 3000, 1, 10000000, "provisioned (baseline) I/O operations per second"},
    {"burst_iops", "IO/s", DBT_KIND_PARAM(cloud, burst_iops), 0, 0, 10000000, "the rate while burst credits last; 0 = no burst (the baseline is the limit)"},
    {"burst_credits", "IOs", DBT_KIND_PARAM(cloud, burst_credits), 0, 0, 1e12, "I/O credit bucket: it starts full, each I/O spends one, it refills at the baseline rate"},
    {"mb_s", "MB/s", DBT_KIND_PARAM(cloud, mb_s), 125, 0.1, 100000, "provisioned (baseline) throughput (10^6 B/s)"},
    {"burst_mb_s", "MB/s", DBT_KIND_PARAM(cloud, burst_mb_s), 0, 0, 100000, "throughput while throughput credits last; 0 = no burst"},
    {"burst_mb", "MB", DBT_KIND_PARAM(cloud, burst_mb), 0, 0, 1e12, "throughput credit bucket in MB: it starts full, refills at the baseline throughput"},
    {"io_unit_kib", "KiB", DBT_KIND_PARAM(cloud, io_unit_kib), 256, 1, 65536, "an I/O up to this size counts as one operation; a larger one counts as several"},
    {"interface_mb_s", "MB/s", DBT_KIND_PARAM(cloud, interface_mb_s), 1250, 1, 100000, "the host's link to the storage network, shared by all requests (10 Gb/s ~ 1250 MB/s)"},
    {"flush_ms", "ms", DBT_KIND_PARAM(cloud, flush_ms), 0, 0, 1000, "cost of a cache flush; 0 when writes are durable once acknowledged"},
    DBT_ARRAY_PARAMS,
};

DBT_FITS_SPEC(cloud_params);

static void bucket_derive(double base_per_s, double peak_per_s, double credits, double *base, double *peak,
                          double *cap) {
    *base = base_per_s / 1e9;
    *cap = peak_per_s > base_per_s && credits > 0 ? credits : 0.0;
    *peak = *cap > 0 ? peak_per_s / 1e9 : *base;
}

static void cloud_init(struct dbt_drive *st, const struct dbt_params *p) {
    const struct dbt_cloud_params *cp = &p->k.cloud;
    struct dbt_cloud_derived *d = &st->u.cloud.d;
    d->rd_lat_ns = cp->read_latency_us * 1e3;
    d->wr_lat_ns = cp->write_latency_us * 1e3;
    d->bytes_per_ns_iface = cp->interface_mb_s * 1e6 / 1e9;
    d->flush_ns = cp->flush_ms * 1e6;
    d->io_unit_bytes = cp->io_unit_kib * 1024.0;
    bucket_derive(cp->iops, cp->burst_iops, cp->burst_credits, &d->iops_base, &d->iops_peak, &d->iops_cap);
    bucket_derive(cp->mb_s * 1e6, cp->burst_mb_s * 1e6, cp->burst_mb * 1e6, &d->bytes_base, &d->bytes_peak,
                  &d->bytes_cap);
    struct dbt_cloud_state *c = &st->u.cloud.s;
    memset(c, 0, sizeof *c);
    c->iops.tokens = d->iops_cap; /* volumes start with a full credit balance */
    c->bytes.tokens = d->bytes_cap;
}

/* When a request needing n tokens, arriving at t, is admitted; *by_rate: when the rate alone would
 * have admitted it (any wait after that is for credits, the bucket spent). */
static uint64_t bucket_admit(struct dbt_bucket *b, double base, double peak, double cap, uint64_t t, double n,
                             uint64_t *by_rate) {
    uint64_t a = t > b->next_peak ? t : b->next_peak;
    *by_rate = a;
    if (cap > 0) {
        if (a > b->t_last) {
            b->tokens += base * (double)(a - b->t_last);
            if (b->tokens > cap) b->tokens = cap;
            b->t_last = a;
        }
        if (b->tokens < n) { /* out of credit: wait until the refill covers it */
            uint64_t wait = (uint64_t)ceil((n - b->tokens) / base);
            a += wait;
            b->t_last = a;
            b->tokens = n;
        }
        b->tokens -= n;
    }
    b->next_peak = a + (uint64_t)(n / peak);
    return a;
}

static void cloud_submit(struct dbt_drive *st, const struct dbt_request *rq, struct dbt_result *out) {
    const struct dbt_cloud_derived *d = &st->u.cloud.d;
    struct dbt_cloud_state *c = &st->u.cloud.s;
    out->flags = 0;
    if (rq->op == DBT_OP_FLUSH) {
        out->start_ns = rq->arrival_ns;
        out->complete_ns = rq->arrival_ns + (uint64_t)d->flush_ns;
        return;
    }
    double ios = ceil((double)(rq->len ? rq->len : 1) / d->io_unit_bytes);
    uint64_t by_iops, by_bytes;
    uint64_t a_iops = bucket_admit(&c->iops, d->iops_base, d->iops_peak, d->iops_cap, rq->arrival_ns, ios, &by_iops);
    uint64_t a = bucket_admit(&c->bytes, d->bytes_base, d->bytes_peak, d->bytes_cap, a_iops, (double)rq->len,
                              &by_bytes);
    /* What held it: the IOPS bucket from its arrival, then the byte bucket. A bucket whose credits are
     * spent holds its requests at the baseline, the whole wait (the rate's share of it is the
     * baseline's too); otherwise at its cap (the burst rate while credits last). */
    int k = a_iops > by_iops ? DBT_LIMIT_IOPS_CREDITS : DBT_LIMIT_IOPS;
    out->held_from[k] = rq->arrival_ns, out->held_to[k] = a_iops;
    k = a > by_bytes ? DBT_LIMIT_THROUGHPUT_CREDITS : DBT_LIMIT_THROUGHPUT;
    out->held_from[k] = a_iops, out->held_to[k] = a;
    uint64_t xfer = (uint64_t)((double)rq->len / d->bytes_per_ns_iface);
    out->start_ns = a;
    if (rq->op == DBT_OP_READ) {
        uint64_t ready = a + (uint64_t)d->rd_lat_ns;
        uint64_t xs = ready > c->iface_busy ? ready : c->iface_busy;
        out->complete_ns = c->iface_busy = xs + xfer;
    } else {
        uint64_t xs = a > c->iface_busy ? a : c->iface_busy;
        c->iface_busy = xs + xfer;
        out->complete_ns = xs + xfer + (uint64_t)d->wr_lat_ns;
    }
}

/* A bucket without credits (capacity 0) has none to set. Refill counts from `at`; a refill already
 * counted beyond it (t_last later) is dropped, as the balance is now given. */
static void cloud_set_credits(struct dbt_drive *st, double fraction, uint64_t at) {
    const struct dbt_cloud_derived *d = &st->u.cloud.d;
    struct dbt_cloud_state *c = &st->u.cloud.s;
    if (!(fraction >= 0.0)) fraction = 0.0;
    if (fraction > 1.0) fraction = 1.0;
    c->iops.tokens = d->iops_cap * fraction, c->iops.t_last = at;
    c->bytes.tokens = d->bytes_cap * fraction, c->bytes.t_last = at;
}

const struct dbt_device_ops dbt_cloud_ops = {
    .name = "cloud",
    .version = DBT_OPS_VERSION,
    .kind = DBT_KIND_CLOUD,
    .caps = DBT_CAP_LIMITED,
    .params = cloud_params,
    .nparams = NELEM(cloud_params),
    .params_size = sizeof(struct dbt_cloud_params),
    .help = "network block volume (EBS, Azure managed disk, Persistent Disk): latency per request, "
            "provisioned IOPS and throughput as token buckets with burst credits",
    .init = cloud_init,
    .submit = cloud_submit,
    .set_credits = cloud_set_credits,
};
