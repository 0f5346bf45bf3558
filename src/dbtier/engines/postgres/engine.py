"""PostgreSQL 18 behind the engine interface (engines/base.py): its roles, settings, lab and
what the preflight needs to know of its log."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from dbtier import units
from dbtier.devices.spec import DeviceSpec
from dbtier.engines.base import SEED_DEVICE, seed_device
from dbtier.engines.postgres import capacity, placement, settings
from dbtier.engines.postgres.lab import Lab, LabOptions
from dbtier.errors import UserError

MIB = 1 << 20


class Postgres:
    name = "postgres"
    title = "PostgreSQL"
    cache_setting = "shared_buffers"  # the database cache --cache sets
    min_cache = capacity.MIN_CACHE
    #: the memory settings a scale model divides (experiments/scale_model.py), each with its default when
    #: --set gives none (postgresql.conf.sample of PostgreSQL 18; dbtier's preset for min_wal_size) and
    #: PostgreSQL's minimum (its GUC table, guc_tables.c; min_wal_size is two 16 MB WAL segments)
    scaled_settings = {"work_mem": ("4MB", 64 * 1024), "maintenance_work_mem": ("64MB", 1024 * 1024),
                       "effective_cache_size": ("4GB", 8192),
                       "min_wal_size": (settings.PRESET["min_wal_size"], 32 * 1024 * 1024)}
    roles = placement.ROLES
    index_role = "indexes"  # an index has a file of its own, in its tablespace
    log_role, temp_role, dump_role = "wal", "temp", "dump"
    system_part = "catalogs"  # advise's name for what follows data unplaced: the catalogs, the cluster's own files
    io_modes = tuple(settings.IO_MODES)
    default_io_mode = settings.DEFAULT_IO_MODE
    shares_loads = keeps_loads = True

    def parse_placement(self, texts, devices: list[str]):
        return placement.parse(list(texts), list(devices))

    def parse_settings(self, texts) -> dict[str, str]:
        return settings.parse_sets(list(texts))

    def make_placement(self, roles: dict[str, str], objects: dict[str, str]):
        return placement.Placement(dict(roles), dict(objects))

    def lab_options(self, mariadb_bin=None, **options) -> LabOptions:
        if mariadb_bin is not None:
            raise UserError("--mariadb-bin is MariaDB's install (--engine mariadb); PostgreSQL's is --pg-bin")
        return LabOptions(**options)

    def check_lab(self, options, devices: list[DeviceSpec]):
        return capacity.check_lab_options(options, devices)

    def connection_limit(self, sets: dict[str, str]) -> int:
        limit = capacity.set_size(sets, "max_connections", 1)
        return limit if limit is not None else int(settings.PRESET["max_connections"])

    def log_kept(self, sets: dict[str, str], generated: int) -> int:
        """What stays of the WAL: what a run generates, but no more than max_wal_size (a soft limit:
        half again is allowed for) and at least a few segments."""
        cap = capacity.set_size(sets, "max_wal_size", MIB) or units.parse_size(settings.PRESET["max_wal_size"],
                                                                                "max_wal_size")
        return max(min(generated, int(1.5 * cap)), 0) + 48 * MIB

    def lab(self, devices: list[DeviceSpec], where, options: LabOptions, say: Callable[[str], None]) -> Lab:
        return Lab(devices, where, options, say)

    def seed_lab(self, options: LabOptions, say: Callable[[str], None]) -> Lab:
        return Lab([seed_device()], placement.parse([], [SEED_DEVICE]), replace(options, trace=False, keep=False),
                   say)

    def settings_from(self, path) -> dict:
        """Production's settings from a snapshot file (engines/postgres/production.py), checked: the file,
        the server, every setting as shown, those applied (postgresql.conf text) and its cache in bytes."""
        from dbtier.engines.postgres import production
        snapshot = production.read(path)
        applied, cache = production.applied(snapshot)
        return {**production.describe(snapshot), "applied": applied, "cache_bytes": cache}

    def version(self, options: LabOptions) -> str:
        """The server's version the lab would run ("18.1")."""
        from dbtier.engines.postgres import binaries
        return binaries.find(options.pg_bin).version

    def kept_clusters(self, workspace_root):
        """The loaded clusters kept in the workspace (engines/postgres/kept.py)."""
        from dbtier.engines.postgres.kept import KeptClusters
        return KeptClusters(workspace_root)

    def describe(self) -> dict:
        return {"name": self.name}


POSTGRES = Postgres()
