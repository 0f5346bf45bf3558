/* The flash kind, "ssd" (dev_flash.c): channels that each serve one piece at a time, behind one
 * shared host interface. */
#ifndef DBT_DEV_FLASH_H
#define DBT_DEV_FLASH_H

#include <stdint.h>

#define DBT_MAX_CHANNELS 64

struct dbt_flash_params {
    double channels, read_latency_us, write_latency_us, channel_read_mb_s, channel_write_mb_s;
    double interface_mb_s, page_kib, flush_ms;
    double power_loss_protection, volatile_cache_mib; /* durability: read by the crash states, not the timing */
};

struct dbt_flash_derived {
    int nchan;
    double rd_lat_ns, wr_lat_ns, ch_rd_bpns, ch_wr_bpns, page_bytes, flush_ns, bytes_per_ns_iface;
};

struct dbt_flash_state {
    uint64_t chan_busy[DBT_MAX_CHANNELS];
    uint64_t iface_busy;
};

struct dbt_flash_drive {
    struct dbt_flash_derived d;
    struct dbt_flash_state s;
};

#endif
