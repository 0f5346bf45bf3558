"""MariaDB (InnoDB) behind the engine interface (engines/base.py): its roles, settings, lab and what
the preflight needs to know of its redo log. What its lab does not do yet (the lab left for
inspection, production's settings) is refused in one line before anything is made."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from dbtier import units
from dbtier.devices.pagecache import check_page_cache
from dbtier.devices.session import check_cpu_scale
from dbtier.devices.spec import DeviceSpec
from dbtier.engines.base import SEED_DEVICE, seed_device, Sizes
from dbtier.engines.mariadb import binaries, placement, settings
from dbtier.engines.mariadb.lab import FLUSH_METHODS, Lab, LabOptions
from dbtier.errors import UserError

MIB = 1 << 20
#: InnoDB's redo log in MariaDB 10.11 unless --set innodb_log_file_size says otherwise
DEFAULT_REDO_LOG = 96 * MIB
TEMP_TABLE_FLOOR = ("a statement's temporary table does not shrink with the data, and one on disk is an Aria file "
                    "mapped into memory, which the emulation cannot see")
MIN_BUFFER_POOL = 6 * MIB  # MariaDB 10.11's least innodb_buffer_pool_size with 16 KiB pages (its own message)
DEFAULT_CONNECTIONS = 151


class MariaDB:
    name = "mariadb"
    title = "MariaDB"
    cache_setting = "innodb_buffer_pool_size"
    min_cache = MIN_BUFFER_POOL
    #: the memory a scale model divides (experiments/scale_model.py) besides the buffer pool: a sort's
    #: buffer and an in-memory temporary table's limits, each with MariaDB 10.11's default and least
    #: (sort_buffer_size: 32 KiB, above the least any version takes). A temporary table's limits stop at
    #: 1 MiB: a statement's temporary table (TPC-C's Stock-Level counts some 200 items) does not grow
    #: with the data, and one that outgrows memory becomes an Aria file the server maps into memory,
    #: out of the emulation's sight (seed 002's OLTP at 1/2852 failed so on its 16 MB / 2852).
    scaled_settings = {"sort-buffer-size": ("2MB", 32 * 1024),
                       "tmp-table-size": ("16MB", 1 << 20, TEMP_TABLE_FLOOR),
                       "max-heap-table-size": ("16MB", 1 << 20, TEMP_TABLE_FLOOR)}
    roles = placement.ROLES
    index_role = None  # InnoDB keeps every index in its table's file
    log_role, temp_role, dump_role = "log", "temp", "data"
    system_part = "system"  # advise's name for what follows data unplaced: the system tablespace, the server's files
    io_modes = tuple(FLUSH_METHODS)
    default_io_mode = "direct"
    shares_loads = True   # a seed lab's stopped server copied into each layout's (Lab.seed)
    keeps_loads = True    # a user's load kept in the workspace for later runs (kept.py)

    def parse_placement(self, texts, devices: list[str]):
        return placement.parse(list(texts), list(devices))

    def make_placement(self, roles: dict[str, str], objects: dict[str, str]):
        return placement.Placement(dict(roles), dict(objects))

    def parse_settings(self, texts) -> dict[str, str]:
        return settings.parse_sets(list(texts))

    def lab_options(self, pg_bin=None, **options) -> LabOptions:
        if pg_bin is not None:
            raise UserError("--pg-bin is PostgreSQL's install; MariaDB's comes from dbtier's cache")
        return LabOptions(**options)

    def check_lab(self, options: LabOptions, devices: list[DeviceSpec]) -> Sizes:
        if options.io_mode not in FLUSH_METHODS:
            raise UserError(f"--io-mode {options.io_mode}: choose one of {', '.join(FLUSH_METHODS)}")
        check_cpu_scale(options.cpu_scale)
        if options.cache_bytes < MIN_BUFFER_POOL:
            raise UserError(f"--cache {units.size_text(options.cache_bytes)}: InnoDB needs at least 6MB of buffer pool")
        page_cache = check_page_cache(options.page_cache_bytes or 3 * options.cache_bytes)
        settings.checked(options.sets)
        if options.mariadb_bin is not None:
            binaries.find(options.mariadb_bin)  # an install given is checked now (the cache's is fetched at start)
        return Sizes(options.cache_bytes, page_cache)

    def connection_limit(self, sets: dict[str, str]) -> int:
        given = sets.get("max-connections")
        return int(given) if given and given.isdigit() else DEFAULT_CONNECTIONS

    def log_kept(self, sets: dict[str, str], generated: int) -> int:
        """The redo log is one file of fixed size, whatever a run writes."""
        given = sets.get("innodb-log-file-size")
        return units.parse_size(given, "--set innodb_log_file_size") if given else DEFAULT_REDO_LOG

    def lab(self, devices: list[DeviceSpec], where, options: LabOptions, say: Callable[[str], None]) -> Lab:
        return Lab(devices, where, options, say)

    def seed_lab(self, options: LabOptions, say: Callable[[str], None]) -> Lab:
        """One device, where the workload loads once with the emulation paused; its stopped server is
        copied into each layout's lab (Lab.seed)."""
        return Lab([seed_device()], placement.parse([], [SEED_DEVICE]), replace(options, trace=False, keep=False),
                   say)

    def settings_from(self, path) -> dict:
        """Production's variables from the output of SHOW GLOBAL VARIABLES (engines/mariadb/production.py),
        checked: the file, the server, every variable, those applied, its buffer pool in bytes and I/O mode."""
        from dbtier.engines.mariadb import production
        return production.settings_from(path)

    def version(self, options: LabOptions) -> str:
        return binaries.find(options.mariadb_bin).version if options.mariadb_bin else binaries.SERIES

    def kept_clusters(self, workspace_root):
        """The loaded servers kept in the workspace (engines/mariadb/kept.py)."""
        from dbtier.engines.mariadb.kept import KeptServers
        return KeptServers(workspace_root)

    def describe(self) -> dict:
        return {"name": self.name}


MARIADB = MariaDB()
