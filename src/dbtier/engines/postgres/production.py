"""Production's settings in the lab (`--settings-from SNAPSHOT`), and every run's settings against
PostgreSQL's defaults and production's.

SNAPSHOT is what `dbtier stats snapshot` writes: JSON with `format` 1, `server` ({version, version_num,
system_identifier, database}) and `settings`, pg_settings by name ({setting, unit, source, boot_val,
reset_val, vartype}). It is content dbtier did not write: every part used is checked, and a file that
is not one is refused in one line naming it.

Applied are the settings that shape I/O and plans (APPLIED), each converted from pg_settings' unit to
postgresql.conf's text: shared_buffers becomes the database cache (--cache, unless given; the scale
model divides it and the memory settings as it divides any); the lab's own (settings.LAB_OWNED, the
socket, the I/O method, logging) never; `--set` wins over production."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from dbtier.engines.base import read_settings_file
from dbtier.errors import UserError
from dbtier.engines.postgres import settings as lab_settings

MAX_BYTES = 16 << 20
FORMAT = 1

#: what production's settings decide in the lab: sizes and plans, WAL and checkpoints, vacuum, parallel
#: query, JIT, the planner's costs and switches (the lab's own and its logging are never taken)
APPLIED = frozenset("""
work_mem maintenance_work_mem autovacuum_work_mem temp_buffers hash_mem_multiplier logical_decoding_work_mem
effective_cache_size random_page_cost seq_page_cost cpu_tuple_cost cpu_index_tuple_cost cpu_operator_cost
effective_io_concurrency maintenance_io_concurrency io_combine_limit io_max_combine_limit
min_wal_size max_wal_size wal_compression wal_level wal_init_zero wal_recycle wal_writer_delay wal_writer_flush_after
synchronous_commit commit_delay commit_siblings full_page_writes wal_log_hints
checkpoint_timeout checkpoint_completion_target checkpoint_flush_after backend_flush_after
bgwriter_delay bgwriter_lru_maxpages bgwriter_lru_multiplier bgwriter_flush_after
autovacuum autovacuum_naptime autovacuum_max_workers autovacuum_vacuum_threshold autovacuum_vacuum_scale_factor
autovacuum_vacuum_insert_threshold autovacuum_vacuum_insert_scale_factor autovacuum_analyze_threshold
autovacuum_analyze_scale_factor autovacuum_vacuum_cost_delay autovacuum_vacuum_cost_limit
autovacuum_freeze_max_age autovacuum_vacuum_max_threshold
vacuum_cost_delay vacuum_cost_limit vacuum_cost_page_hit vacuum_cost_page_miss vacuum_cost_page_dirty
vacuum_buffer_usage_limit
max_worker_processes max_parallel_workers max_parallel_workers_per_gather max_parallel_maintenance_workers
parallel_setup_cost parallel_tuple_cost parallel_leader_participation min_parallel_table_scan_size
min_parallel_index_scan_size
jit jit_above_cost jit_inline_above_cost jit_optimize_above_cost
default_statistics_target from_collapse_limit join_collapse_limit geqo geqo_threshold plan_cache_mode
constraint_exclusion cursor_tuple_fraction default_toast_compression
""".split())
_PLANNER_SWITCH = re.compile(r"^enable_[a-z_]+$")
#: pg_settings' memory units, in bytes
_MEMORY = {"B": 1, "kB": 1024, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40, "8kB": 8192, "16kB": 16384,
           "32kB": 32768, "64kB": 65536, "16MB": 16 << 20, "32MB": 32 << 20, "64MB": 64 << 20}
_TIME_US = {"us": 1, "ms": 1000, "s": 1_000_000, "min": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}
_TIME = tuple(_TIME_US)
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")


@dataclass(frozen=True)
class Snapshot:
    path: Path
    server: dict
    settings: dict[str, dict]  # name -> {setting, unit, boot_val, ...}


def _refuse(path: Path, what: str) -> UserError:
    return UserError(f"--settings-from {path}: {what}; give a file 'dbtier stats snapshot' wrote")


def read(path: Path) -> Snapshot:
    """The snapshot, checked: a UserError in one line naming the file (and the line of broken JSON)."""
    path = Path(path).expanduser()
    text = read_settings_file(path, MAX_BYTES, _refuse)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _refuse(path, f"line {exc.lineno}: not JSON ({exc.msg})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else None
        raise _refuse(path, f"format {found!r}, where this dbtier reads format {FORMAT}")
    server, table = doc.get("server"), doc.get("settings")
    if not isinstance(server, dict) or not isinstance(server.get("version"), str):
        raise _refuse(path, "no server version ('server': {'version': ...})")
    if not isinstance(table, dict) or not table:
        raise _refuse(path, "no settings ('settings': pg_settings by name)")
    for name, row in table.items():
        if not isinstance(row, dict) or not isinstance(row.get("setting"), str) or \
                not isinstance(row.get("unit"), (str, type(None))):
            raise _refuse(path, f"setting {str(name)[:60]!r} is not a pg_settings row (setting, unit, boot_val)")
    return Snapshot(path, server, table)


def conf_value(name: str, row: dict, where: Path) -> str:
    """A pg_settings row's value as postgresql.conf takes it: a size or time in its unit spelled out
    (shared_buffers 16384 of 8kB -> 131072kB), anything else as it is."""
    value, unit = row["setting"], row.get("unit")
    if not _SAFE_VALUE.match(value):
        raise _refuse(where, f"setting {name} = {value[:40]!r} is not a value dbtier takes")
    if unit in _MEMORY:
        try:
            number = int(value)
        except ValueError:
            raise _refuse(where, f"setting {name} = {value!r} is not a number of {unit}") from None
        return "-1" if number < 0 else f"{number * _MEMORY[unit] // 1024}kB"
    if unit in _TIME:
        return value if value.startswith("-") else f"{value}{unit}"
    return value


def applied(snapshot: Snapshot) -> tuple[dict[str, str], int | None]:
    """(the settings applied, in postgresql.conf's text; production's shared_buffers in bytes or None)."""
    out = {}
    for name, row in snapshot.settings.items():
        if (name in APPLIED or _PLANNER_SWITCH.match(name)) and name not in lab_settings.LAB_OWNED:
            out[name] = conf_value(name, row, snapshot.path)
    # slots the lab's preset keeps small must hold what production's settings ask of them
    if "autovacuum_max_workers" in out:
        out["autovacuum_worker_slots"] = str(max(int(out["autovacuum_max_workers"]),
                                                 int(lab_settings.PRESET["autovacuum_worker_slots"])))
    cache = None
    row = snapshot.settings.get("shared_buffers")
    if row is not None and row.get("unit") in _MEMORY:
        try:
            cache = int(row["setting"]) * _MEMORY[row["unit"]]
        except ValueError:
            raise _refuse(snapshot.path, f"shared_buffers = {row['setting']!r} is not a number") from None
    return out, cache


def describe(snapshot: Snapshot) -> dict:
    """What a run records of production's settings: the file, the server, each setting as shown."""
    version = str(snapshot.server.get("version"))  # version(): "PostgreSQL 18.1 on x86_64-pc-linux-gnu, ..."
    version = version.split()[1] if version.startswith("PostgreSQL ") and len(version.split()) > 1 else version[:40]
    return {"file": str(snapshot.path), "server": {"version": version, "database": snapshot.server.get("database")},
            "settings": {name: shown(row["setting"], row.get("unit")) for name, row in snapshot.settings.items()}}


def shown(setting: str | None, unit: str | None) -> str | None:
    """A pg_settings value as people write it: 16384 of 8kB -> 128MB, 300 of s -> 300s, on -> on."""
    if setting is None:
        return None
    if unit in _MEMORY:
        try:
            nbytes = int(setting) * _MEMORY[unit]
        except ValueError:
            return setting
        if nbytes < 0:
            return setting
        for name, size in (("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1024)):
            if nbytes >= size and nbytes % size == 0:
                return f"{nbytes // size}{name}"
        return f"{nbytes}B"
    if unit in _TIME and not setting.startswith("-"):
        try:
            us = int(setting) * _TIME_US[unit]
        except ValueError:
            return f"{setting}{unit}"
        for name in ("d", "h", "min", "s", "ms"):
            if us >= _TIME_US[name] and us % _TIME_US[name] == 0:
                return f"{us // _TIME_US[name]}{name}"
        return f"{us}us"
    return setting


#: settings a comparison leaves out: how the lab is reached and logs, not how the server works
_NOT_COMPARED = re.compile(r"^(log_|unix_socket_|ssl)|^(listen_addresses|port|allow_alter_system|logging_collector|"
                           r"dynamic_shared_memory_type|data_directory|config_file|hba_file|ident_file)$")


def compared(rows: list[tuple[str, str, str | None, str | None, str]], production: dict | None,
             user_sets: dict[str, str]) -> list[dict]:
    """The run's settings (pg_settings rows: name, setting, unit, boot_val, source) where they differ from
    PostgreSQL's default or from production's: each with this run's value, the default, production's
    (None without a snapshot) and where the run's came from (dbtier's lab preset, production, --set)."""
    prod = (production or {}).get("settings", {})
    out = []
    for name, setting, unit, boot_val, source in rows:
        if _NOT_COMPARED.match(name):
            continue
        run, default = shown(setting, unit), shown(boot_val, unit)
        theirs = prod.get(name)
        if run == default and (theirs is None or theirs == run):
            continue
        origin = ("--set" if name in user_sets else "production" if production and name in production.get("applied", ())
                  else "the lab" if source not in ("default", "override") else "PostgreSQL")
        out.append({"setting": name, "run": run, "default": default, "production": theirs, "from": origin})
    return out
