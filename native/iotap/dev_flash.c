/* The flash kind, "ssd". See dev_flash.h. Units inside: nanoseconds and bytes. */
#include "devkind.h"

#include <stdio.h>
#include <string.h>

static const struct dbt_param_def ssd_params[] = {
    {"capacity_gb", "GB", DBT_PARAM(capacity_gb), 240, 1, 100000, "capacity (10^9 bytes)"},
    {"channels", "count", DBT_KIND_PARAM(flash, channels), 8, 1, DBT_MAX_CHANNELS, "flash channels (or dies) working in parallel"},
    {"read_latency_us", "us", DBT_KIND_PARAM(flash, read_latency_us), 120, 0, 100000, "flash read time of one page, channel busy meanwhile"},
    {"write_latency_us", "us", DBT_KIND_PARAM(flash, write_latency_us), 30, 0, 100000, "write acknowledgement time after the transfer (buffered); programming occupies the channel behind it"},
    {"channel_read_mb_s", "MB/s", DBT_KIND_PARAM(flash, channel_read_mb_s), 100, 1, 100000, "per-channel read transfer rate"},
    {"channel_write_mb_s", "MB/s", DBT_KIND_PARAM(flash, channel_write_mb_s), 80, 1, 100000, "per-channel write transfer rate"},
    {"interface_mb_s", "MB/s", DBT_KIND_PARAM(flash, interface_mb_s), 550, 1, 100000, "host interface cap, shared by all channels"},
    {"page_kib", "KiB", DBT_KIND_PARAM(flash, page_kib), 16, 1, 4096, "a request is split into pieces of this size, spread over channels"},
    {"flush_ms", "ms", DBT_KIND_PARAM(flash, flush_ms), 1.5, 0, 1000, "cost of a cache flush after the channels drain; 0 = power-loss protected (flush is free)"},
    {"power_loss_protection", "0/1", DBT_KIND_PARAM(flash, power_loss_protection), 0, 0, 1, "1: capacitors hold enough energy to write the cache to flash when power fails: what it acknowledged survives"},
    {"volatile_cache_mib", "MiB", DBT_KIND_PARAM(flash, volatile_cache_mib), 64, 0, 65536, "acknowledged writes the drive's cache holds before it must write the oldest to flash (lost on a power cut without protection)"},
    DBT_ARRAY_PARAMS,
    DBT_DURABILITY_PARAMS(4),
};

DBT_FITS_SPEC(ssd_params);

static void flash_init(struct dbt_drive *st, const struct dbt_params *p) {
    const struct dbt_flash_params *fp = &p->k.flash;
    struct dbt_flash_derived *d = &st->u.flash.d;
    d->nchan = (int)fp->channels;
    if (d->nchan < 1) d->nchan = 1;
    if (d->nchan > DBT_MAX_CHANNELS) d->nchan = DBT_MAX_CHANNELS;
    d->rd_lat_ns = fp->read_latency_us * 1e3;
    d->wr_lat_ns = fp->write_latency_us * 1e3;
    d->ch_rd_bpns = fp->channel_read_mb_s * 1e6 / 1e9;
    d->ch_wr_bpns = fp->channel_write_mb_s * 1e6 / 1e9;
    d->bytes_per_ns_iface = fp->interface_mb_s * 1e6 / 1e9;
    d->page_bytes = fp->page_kib * 1024.0;
    d->flush_ns = fp->flush_ms * 1e6;
    memset(&st->u.flash.s, 0, sizeof st->u.flash.s);
}

static int flash_free_channel(const struct dbt_flash_derived *d, const struct dbt_flash_state *f) {
    int best = 0;
    for (int i = 1; i < d->nchan; i++)
        if (f->chan_busy[i] < f->chan_busy[best]) best = i;
    return best;
}

/* Spreads [len] over channels from time t; returns when the last piece is done. */
static uint64_t flash_pieces(const struct dbt_flash_derived *d, struct dbt_flash_state *f, uint64_t t, uint32_t len,
                             double lat, double bpns, uint64_t *first_start) {
    uint64_t done = t;
    uint32_t left = len ? len : 1;
    uint32_t page = d->page_bytes >= 1 ? (uint32_t)d->page_bytes : 1;
    *first_start = UINT64_MAX;
    while (left) {
        uint32_t piece = left < page ? left : page;
        int ch = flash_free_channel(d, f);
        uint64_t s = t > f->chan_busy[ch] ? t : f->chan_busy[ch];
        uint64_t e = s + (uint64_t)(lat + (double)piece / bpns);
        f->chan_busy[ch] = e;
        if (s < *first_start) *first_start = s;
        if (e > done) done = e;
        left -= piece;
    }
    return done;
}

static void ssd_submit(struct dbt_drive *st, const struct dbt_request *rq, struct dbt_result *out) {
    const struct dbt_flash_derived *d = &st->u.flash.d;
    struct dbt_flash_state *f = &st->u.flash.s;
    double xfer = (double)rq->len / d->bytes_per_ns_iface;
    uint64_t first;
    out->flags = 0;
    if (rq->op == DBT_OP_READ) {
        uint64_t media = flash_pieces(d, f, rq->arrival_ns, rq->len, d->rd_lat_ns, d->ch_rd_bpns, &first);
        uint64_t xs = media > f->iface_busy ? media : f->iface_busy;
        out->start_ns = first;
        out->complete_ns = f->iface_busy = xs + (uint64_t)xfer;
    } else if (rq->op == DBT_OP_WRITE) {
        /* Acknowledged from the drive's buffer once transferred; programming the pieces keeps the
         * channels busy behind it, and a write waits only when the channels are backed up. */
        uint64_t xs = rq->arrival_ns > f->iface_busy ? rq->arrival_ns : f->iface_busy;
        uint64_t xe = f->iface_busy = xs + (uint64_t)xfer;
        flash_pieces(d, f, xe, rq->len, 0.0, d->ch_wr_bpns, &first);
        uint64_t ack = xe + (uint64_t)d->wr_lat_ns;
        out->start_ns = xs;
        out->complete_ns = first > ack ? first : ack;
    } else {
        uint64_t s = rq->arrival_ns > f->iface_busy ? rq->arrival_ns : f->iface_busy;
        if (d->flush_ns > 0) {
            for (int i = 0; i < d->nchan; i++)
                if (f->chan_busy[i] > s) s = f->chan_busy[i];
        }
        out->start_ns = s;
        out->complete_ns = s + (uint64_t)d->flush_ns;
    }
}


static int flash_check(const struct dbt_drive *dr, int m, char *err, size_t errlen) {
    int nchan = dr->u.flash.d.nchan;
    if (nchan < 1 || nchan > DBT_MAX_CHANNELS) {
        snprintf(err, errlen, "its member %d has %d channels, outside 1..%d", m, nchan, DBT_MAX_CHANNELS);
        return -1;
    }
    return 0;
}

const struct dbt_device_ops dbt_ssd_ops = {
    .name = "ssd",
    .version = DBT_OPS_VERSION,
    .kind = DBT_KIND_SSD,
    .params = ssd_params,
    .nparams = NELEM(ssd_params),
    .params_size = sizeof(struct dbt_flash_params),
    .help = "flash (SATA SSD, PCIe flash, NVMe): parallel channels, read/write latency, channel and interface "
            "bandwidth, flush cost",
    .init = flash_init,
    .submit = ssd_submit,
    .check = flash_check,
};
