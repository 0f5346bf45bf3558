"""PostgreSQL in the lab: binaries, clusters laid out over devices, settings, statistics."""
