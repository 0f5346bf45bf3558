"""PostgreSQL in the lab: binaries, clusters laid out over devices, settings, statistics."""

#: BLCKSZ: the embedded PostgreSQL's page size
PAGE_BYTES = 8192
