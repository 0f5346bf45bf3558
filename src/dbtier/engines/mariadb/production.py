"""Production's settings in a MariaDB lab (`--settings-from FILE`), and every run's settings against
MariaDB's defaults and production's.

FILE is what MariaDB's own client prints of the production server's variables:

    mariadb --batch -e "SHOW GLOBAL VARIABLES" > production-variables.tsv

a header line `Variable_name<TAB>Value`, then a variable a line (the client escapes a tab, a newline or
a backslash in a value as \\t, \\n, \\\\). It is content dbtier did not write: every part used is checked,
and a file that is not one is refused in one line naming it and the line.

Applied are the variables that shape InnoDB's I/O and the plans (APPLIED): innodb_buffer_pool_size
becomes the database cache (--cache, unless given; the scale model divides it as it divides any), and
innodb_flush_method the I/O mode (--io-mode, unless given); the lab's own (settings.LAB_OWNED) never;
`--set` wins over production. innodb_log_file_size is not applied: InnoDB allocates its redo log whole,
and production's gigabytes would be the lab's memory or disk (`--set innodb_log_file_size=...` asks)."""

from __future__ import annotations

import re
from pathlib import Path

from dbtier.engines.base import read_settings_file
from dbtier.errors import UserError

MAX_BYTES = 4 << 20
HEADER = "Variable_name\tValue"

#: what production's variables decide in the lab: the redo log and its flushing, the doublewrite
#: buffer, the page cleaners and their pace, read-ahead, purge, sort and join buffers, the optimizer
APPLIED = frozenset("""
innodb_flush_log_at_trx_commit innodb_flush_log_at_timeout innodb_doublewrite
innodb_log_buffer_size innodb_log_write_ahead_size innodb_io_capacity innodb_io_capacity_max
innodb_flush_neighbors innodb_flush_sync innodb_max_dirty_pages_pct innodb_max_dirty_pages_pct_lwm
innodb_adaptive_flushing innodb_adaptive_flushing_lwm innodb_flushing_avg_loops innodb_lru_scan_depth
innodb_lru_flush_size innodb_read_io_threads innodb_write_io_threads innodb_random_read_ahead
innodb_read_ahead_threshold innodb_change_buffering innodb_adaptive_hash_index innodb_purge_threads
innodb_purge_batch_size innodb_max_purge_lag innodb_undo_log_truncate innodb_max_undo_log_size
innodb_stats_persistent innodb_stats_persistent_sample_pages innodb_stats_transient_sample_pages
innodb_stats_auto_recalc innodb_fill_factor innodb_sort_buffer_size innodb_autoinc_lock_mode
sort_buffer_size join_buffer_size join_cache_level read_buffer_size read_rnd_buffer_size tmp_table_size
max_heap_table_size tmp_memory_table_size sync_binlog binlog_cache_size
optimizer_search_depth optimizer_use_condition_selectivity optimizer_switch use_stat_tables histogram_size
eq_range_index_dive_limit
""".split())
#: innodb_flush_method as the lab's --io-mode (engine.FLUSH_METHODS, read the other way)
IO_MODES = {"O_DIRECT": "direct", "O_DSYNC": "dsync", "fsync": "buffered"}
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")
_SWITCHES = re.compile(r"^[a-z_]+=(on|off|default)(,[a-z_]+=(on|off|default))*$")
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def _refuse(path: Path, what: str) -> UserError:
    return UserError(f"--settings-from {path}: {what}; give the output of mariadb --batch -e \"SHOW GLOBAL "
                     "VARIABLES\" on the production server")


def _unescaped(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "0": "\0", "\\": "\\"}.get(m[1], m[1]), value)


def read(path: Path) -> dict[str, str]:
    """The variables by name, checked: a UserError in one line naming the file (and the line)."""
    path = Path(path).expanduser()
    lines = read_settings_file(path, MAX_BYTES, _refuse).splitlines()
    if not lines or lines[0].rstrip("\r") != HEADER:
        raise _refuse(path, f"line 1 is not the header {HEADER.replace(chr(9), '<TAB>')}")
    out: dict[str, str] = {}
    for number, line in enumerate(lines[1:], start=2):
        name, tab, value = line.rstrip("\r").partition("\t")
        if not tab or not _NAME.match(name.lower()):
            raise _refuse(path, f"line {number} is not a variable's name, a tab and its value")
        out[name.lower()] = _unescaped(value)
    if "version" not in out:
        raise _refuse(path, "no version variable")
    return out


def applied(variables: dict[str, str], where: Path) -> dict[str, str]:
    """The variables applied, by mariadbd's option names (`-` as --set spells them)."""
    out = {}
    for name in sorted(APPLIED & variables.keys()):
        value = variables[name]
        pattern = _SWITCHES if name == "optimizer_switch" else _SAFE_VALUE
        if not pattern.match(value):
            raise _refuse(where, f"{name} = {value[:40]!r} is not a value dbtier takes")
        out[name.replace("_", "-")] = value
    return out


def settings_from(path: Path) -> dict:
    """What a run takes and records of production: the file, the server, every variable as shown, those
    applied, the buffer pool in bytes (or None), and the I/O mode innodb_flush_method asks for (or why
    the lab cannot run it)."""
    variables = read(path)
    cache = None
    if "innodb_buffer_pool_size" in variables:
        try:
            cache = int(variables["innodb_buffer_pool_size"])
        except ValueError:
            raise _refuse(path, f"innodb_buffer_pool_size = {variables['innodb_buffer_pool_size'][:40]!r} is not "
                                "a number of bytes") from None
    method = variables.get("innodb_flush_method")
    io_mode = IO_MODES.get(method) if method else None
    refused = None
    if method and io_mode is None:
        refused = (f"production's innodb_flush_method = {method[:40]} is not one the lab runs "
                   f"({', '.join(f'{k} as --io-mode {v}' for k, v in IO_MODES.items())}); give --io-mode")
    version = variables["version"].split("-")[0][:40]  # "10.11.19-MariaDB-0+deb12u1": the release
    return {"file": str(path), "server": {"version": version, "database": None},
            "settings": variables, "applied": applied(variables, path), "cache_bytes": cache,
            "io_mode": io_mode, "io_mode_refused": refused}


#: the variables a run's report compares (beside those applied and given)
COMPARED = frozenset({"innodb_buffer_pool_size", "innodb_flush_method", "innodb_log_file_size", "innodb_page_size",
                      "innodb_linux_aio", "innodb_use_native_aio", "log_bin"})
#: the variables the lab sets from the run's options, which production's file sets when they are not given
FROM_OPTIONS = frozenset({"innodb_buffer_pool_size", "innodb_flush_method"})


def compared(rows: list[tuple[str, str | None, str | None, str | None]], production: dict | None,
             user_sets: dict[str, str]) -> list[dict]:
    """The run's variables (information_schema.SYSTEM_VARIABLES rows: name, global value, default,
    where the value came from) where they differ from MariaDB's default or from production's: each with
    this run's value, the default, production's (None without a file) and where the run's came from."""
    prod = (production or {}).get("settings", {})
    applied_names = set((production or {}).get("applied", ()))
    out = []
    for name, value, default, origin in rows:
        name = name.lower()
        theirs = prod.get(name)
        if value == default and (theirs is None or theirs == value):
            continue
        spelled = name.replace("_", "-")
        source = ("--set" if spelled in user_sets else "production" if spelled in applied_names
                  or (name in FROM_OPTIONS and theirs == value) else "the lab" if origin in ("CONFIG", "COMMAND-LINE")
                  else "MariaDB")
        out.append({"setting": name, "run": value, "default": default, "production": theirs, "from": source})
    return out
