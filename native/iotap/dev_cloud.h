/* The cloud kind (dev_cloud.c): a network block volume, each request paying the network's and the
 * backing media's latency, admitted by two token buckets (I/Os and bytes) with burst credits. */
#ifndef DBT_DEV_CLOUD_H
#define DBT_DEV_CLOUD_H

#include <stdint.h>

struct dbt_cloud_params {
    double read_latency_us, write_latency_us, read_p99_us, write_p99_us, iops, burst_iops, burst_credits, mb_s, burst_mb_s, burst_mb;
    double io_unit_kib, interface_mb_s, flush_ms, cap_tolerance_ms;
};

/* the IOPS and byte limiters (per ns), their credit buckets, the I/O accounting unit */
struct dbt_cloud_derived {
    double rd_lat_ns, wr_lat_ns, rd_sigma, wr_sigma, bytes_per_ns_iface, flush_ns, io_unit_bytes;
    double iops_base, iops_peak, iops_cap, bytes_base, bytes_peak, bytes_cap;
    uint64_t tolerance_ns;
};

/* A token bucket with a peak rate: tokens refill at the base rate up to the bucket's capacity; a
 * request takes its tokens (waiting for them if short) and no two are admitted closer than the peak
 * rate allows. A capacity of 0 is a plain rate limit at the base rate. */
struct dbt_bucket {
    double tokens;
    uint64_t t_last;    /* tokens counted up to here */
    uint64_t next_peak; /* the peak rate's next theoretical slot (a request may go a tolerance ahead of it) */
};

struct dbt_cloud_state {
    struct dbt_bucket iops, bytes;
    uint64_t iface_busy;
    uint64_t rng; /* the latency draws' splitmix64 state */
};

struct dbt_cloud_drive {
    struct dbt_cloud_derived d;
    struct dbt_cloud_state s;
};

#endif
