/* The real kind: no model, no injected latency. The interposer measures the real device instead: a
 * request takes what the host's own call took (DBT_CAP_HOST_TIME), counted as any device's. */
#include "devkind.h"

static void real_init(struct dbt_drive *st, const struct dbt_params *p) {
    (void)st;
    (void)p;
}

static void real_submit(struct dbt_drive *st, const struct dbt_request *rq, struct dbt_result *out) {
    (void)st;
    out->start_ns = out->complete_ns = rq->arrival_ns;
    out->flags = 0;
}

const struct dbt_device_ops dbt_real_ops = {
    .name = "real",
    .version = DBT_OPS_VERSION,
    .kind = DBT_KIND_REAL,
    .caps = DBT_CAP_HOST_TIME,
    .help = "a real directory: no injected latency, counters only",
    .init = real_init,
    .submit = real_submit,
};
