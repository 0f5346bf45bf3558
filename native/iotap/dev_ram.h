/* The RAM kind (dev_ram.c): a RAM SAN, a fixed latency overlapped between requests behind an
 * interface that serialises transfers. */
#ifndef DBT_DEV_RAM_H
#define DBT_DEV_RAM_H

#include <stdint.h>

struct dbt_ram_params {
    double latency_us, interface_mb_s;
};

struct dbt_ram_derived {
    double lat_ns, bytes_per_ns_iface;
};

struct dbt_ram_state {
    uint64_t iface_busy;
};

struct dbt_ram_drive {
    struct dbt_ram_derived d;
    struct dbt_ram_state s;
};

#endif
