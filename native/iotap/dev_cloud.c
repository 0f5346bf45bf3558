/* The cloud kind. See dev_cloud.h. Units inside: nanoseconds and bytes. */
#include "devkind.h"

#include "mix.h"

#include <math.h>
#include <string.h>

/* where each drive's latency draws start */
#define LATENCY_SEED 0x6c61746e63793031ull

/* A network block volume as clouds sell them: each request pays the network and the backing
 * media's latency, overlapped between requests, and is admitted by two token buckets (I/Os and
 * bytes) refilled at the provisioned rates, whose burst credits let it run at the burst rate until
 * they are spent. */
static const struct dbt_param_def cloud_params[] = {
    {"capacity_gb", "GB", DBT_PARAM(capacity_gb), 100, 1, 100000, "capacity (10^9 bytes)"},
    {"read_latency_us", "us", DBT_KIND_PARAM(cloud, read_latency_us), 500, 0, 100000, "latency of a small read as the host sees it: network round trip and backing media (the median, when read_p99_us is given)"},
    {"write_latency_us", "us", DBT_KIND_PARAM(cloud, write_latency_us), 800, 0, 100000, "latency of a small write until acknowledged durable, replicated (the median, when write_p99_us is given)"},
    {"read_p99_us", "us", DBT_KIND_PARAM(cloud, read_p99_us), 0, 0, 1000000, "99th percentile of a small read's latency: each read's is drawn from the lognormal through the median and this; 0 = every read takes the median"},
    {"write_p99_us", "us", DBT_KIND_PARAM(cloud, write_p99_us), 0, 0, 1000000, "99th percentile of a small write's latency, as read_p99_us; 0 = every write takes the median"},
    {"iops", "IO/s", DBT_KIND_PARAM(cloud, iops), 3000, 1, 10000000, "provisioned (baseline) I/O operations per second"},
    {"burst_iops", "IO/s", DBT_KIND_PARAM(cloud, burst_iops), 0, 0, 10000000, "the rate while burst credits last; 0 = no burst (the baseline is the limit)"},
    {"burst_credits", "IOs", DBT_KIND_PARAM(cloud, burst_credits), 0, 0, 1e12, "I/O credit bucket: it starts full, each I/O spends one, it refills at the baseline rate"},
    {"mb_s", "MB/s", DBT_KIND_PARAM(cloud, mb_s), 125, 0.1, 100000, "provisioned (baseline) throughput (10^6 B/s)"},
    {"burst_mb_s", "MB/s", DBT_KIND_PARAM(cloud, burst_mb_s), 0, 0, 100000, "throughput while throughput credits last; 0 = no burst"},
    {"burst_mb", "MB", DBT_KIND_PARAM(cloud, burst_mb), 0, 0, 1e12, "throughput credit bucket in MB: it starts full, refills at the baseline throughput"},
    {"io_unit_kib", "KiB", DBT_KIND_PARAM(cloud, io_unit_kib), 256, 1, 65536, "an I/O up to this size counts as one operation; a larger one counts as several"},
    {"interface_mb_s", "MB/s", DBT_KIND_PARAM(cloud, interface_mb_s), 1250, 1, 100000, "the host's link to the storage network, shared by all requests (10 Gb/s ~ 1250 MB/s)"},
    {"flush_ms", "ms", DBT_KIND_PARAM(cloud, flush_ms), 0, 0, 1000, "cost of a cache flush; 0 when writes are durable once acknowledged"},
    {"cap_tolerance_ms", "ms", DBT_KIND_PARAM(cloud, cap_tolerance_ms), 10, 0, 1000, "how far requests may run ahead of a rate cap (its bucket's depth): a cap holds over a window, so a slot a slow request left idle is taken by the next; 0 = strictly one per 1/rate"},
    DBT_ARRAY_PARAMS,
    DBT_DURABILITY_PARAMS(4),
};

DBT_FITS_SPEC(cloud_params);

static void bucket_derive(double base_per_s, double peak_per_s, double credits, double *base, double *peak,
                          double *cap) {
    *base = base_per_s / 1e9;
    *cap = peak_per_s > base_per_s && credits > 0 ? credits : 0.0;
    *peak = *cap > 0 ? peak_per_s / 1e9 : *base;
}

/* z of the normal distribution's 99th percentile */
#define Z99 2.3263478740408408

/* The spread of the lognormal through a median and a 99th percentile (0: none). */
static double lognormal_sigma(double median_us, double p99_us) {
    return p99_us > median_us && median_us > 0 ? log(p99_us / median_us) / Z99 : 0.0;
}

static void cloud_init(struct dbt_drive *st, const struct dbt_params *p) {
    const struct dbt_cloud_params *cp = &p->k.cloud;
    struct dbt_cloud_derived *d = &st->u.cloud.d;
    d->rd_lat_ns = cp->read_latency_us * 1e3;
    d->wr_lat_ns = cp->write_latency_us * 1e3;
    d->tolerance_ns = (uint64_t)(cp->cap_tolerance_ms * 1e6);
    d->rd_sigma = lognormal_sigma(cp->read_latency_us, cp->read_p99_us);
    d->wr_sigma = lognormal_sigma(cp->write_latency_us, cp->write_p99_us);
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
    c->rng = LATENCY_SEED;
}

/* A request's latency: the median, or a draw of the lognormal through the median and the 99th
 * percentile (Box-Muller from the drive's own splitmix64 sequence: the live emulation and a replay
 * draw alike for the same order of requests), cut at 6 sigma. */
static double latency_ns(struct dbt_cloud_state *c, double median_ns, double sigma) {
    if (sigma <= 0) return median_ns;
    double u1 = ((double)(dbt_splitmix64(&c->rng) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (double)(dbt_splitmix64(&c->rng) >> 11) / 9007199254740992.0;
    double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    if (z > 6) z = 6;
    if (z < -6) z = -6;
    return median_ns * exp(sigma * z);
}

/* When a request needing n tokens, arriving at t, is admitted; *by_rate: when the rate alone would
 * have admitted it (any wait after that is for credits, the bucket spent). The rate is a GCRA: the
 * theoretical time of the next slot advances n / rate per request, and a request may go up to
 * `tolerance` ns ahead of it. */
static uint64_t bucket_admit(struct dbt_bucket *b, double base, double peak, double cap, uint64_t t, double n,
                             uint64_t *by_rate, uint64_t tolerance) {
    uint64_t slot = b->next_peak > tolerance ? b->next_peak - tolerance : 0;
    uint64_t a = t > slot ? t : slot;
    *by_rate = a;
    if (cap > 0) {
        if (a > b->t_last) {
            b->tokens += base * (double)(a - b->t_last);
            if (b->tokens > cap) b->tokens = cap;
            b->t_last = a;
        }
        if (b->tokens < n) { /* out of credit: wait until the refill (counted from t_last) covers it */
            uint64_t ready = b->t_last + (uint64_t)ceil((n - b->tokens) / base);
            if (ready > a) a = ready;
            b->tokens += base * (double)(a - b->t_last);
            b->t_last = a;
        }
        b->tokens -= n;
    }
    b->next_peak = (a > b->next_peak ? a : b->next_peak) + (uint64_t)(n / peak);
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
    uint64_t a_iops = bucket_admit(&c->iops, d->iops_base, d->iops_peak, d->iops_cap, rq->arrival_ns, ios, &by_iops,
                                   d->tolerance_ns);
    uint64_t a = bucket_admit(&c->bytes, d->bytes_base, d->bytes_peak, d->bytes_cap, a_iops, (double)rq->len,
                              &by_bytes, d->tolerance_ns);
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
        uint64_t ready = a + (uint64_t)latency_ns(c, d->rd_lat_ns, d->rd_sigma);
        uint64_t xs = ready > c->iface_busy ? ready : c->iface_busy;
        out->complete_ns = c->iface_busy = xs + xfer;
    } else {
        uint64_t xs = a > c->iface_busy ? a : c->iface_busy;
        c->iface_busy = xs + xfer;
        out->complete_ns = xs + xfer + (uint64_t)latency_ns(c, d->wr_lat_ns, d->wr_sigma);
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
