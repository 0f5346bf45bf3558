"""The server settings of a lab: a preset that keeps the seeds' isolated, measurable regime, the
database cache size, the I/O mode, and the user's own `--set NAME=VALUE` on top."""

from __future__ import annotations

import re

from dbtier.errors import UserError

#: Every lab server gets these; each line says why.
PRESET = {
    "listen_addresses": "''",            # unix socket only: nothing reachable from the network
    # The run's SQL (a dump's, a setup's) is the superuser's: ALTER SYSTEM must not change what the
    # lab decides at the next restart (Cluster.check_config refuses a postgresql.auto.conf written anyway).
    "allow_alter_system": "off",
    "io_method": "worker",               # io_uring would bypass the LD_PRELOAD interposer
    "max_parallel_workers_per_gather": "0",  # the seeds ran serial plans ("set parallel_query off")
    "jit": "off",                        # compile time would blur the CPU figures of short statements
    "autovacuum": "off",                 # the seeds ran "in isolation"; workloads vacuum when they load
    "checkpoint_timeout": "30min",       # no timed checkpoint in the middle of a measurement
    "max_wal_size": "4GB",
    # A production server's pg_wal holds segments used and recycled (renamed ahead of the insert
    # position) at every checkpoint, up to min_wal_size or the last cycle's need; the lab fills it so
    # before measuring (Lab.recycle_wal), so the measured writes, as there, seldom create and zero-fill
    # a segment. The default 80MB would keep five.
    "min_wal_size": "1GB",
    "track_io_timing": "on",
    # A lab server has few backends. Each backend may pin only shared_buffers / (all backend slots),
    # and that share bounds a scan's read-ahead (the read stream and its buffer ring). With the small
    # caches that keep tables several times larger than the cache, default slot counts would leave
    # room for about two 128 kB reads in flight, far shallower than at production scale.
    "max_connections": "20",
    "max_worker_processes": "2",         # parallel query is off
    "autovacuum_worker_slots": "1",      # autovacuum is off
    "max_wal_senders": "0",              # no replication
    # The default wal_buffers is a 32nd of shared_buffers, 16MB from 512MB up: every production cache
    # gets 16MB. Scaled down with our small caches it would be 128-1024 kB, and backends would write
    # the WAL themselves, in small synchronous pieces, where at scale the WAL writer does it ahead.
    "wal_buffers": "16MB",
    "huge_pages": "off",
    # Dynamic shared memory in files under pg_dynshmem, which the lab points at a folder of its own
    # (outside every device, in RAM with the workspace): a server killed outright leaves nothing in
    # /dev/shm, and the lab's folder goes with the run.
    "dynamic_shared_memory_type": "mmap",
    "unix_socket_permissions": "0700",   # with the socket's private folder: the servers' user alone
    "logging_collector": "off",          # the server's stderr is the run's server.log
    "log_min_messages": "warning",
    "log_checkpoints": "off",
}

#: Settings the lab decides: who can reach the server, where its files are, and what may outlive it.
LAB_OWNED = {
    "listen_addresses": "the lab listens on its own unix socket only, never TCP",
    "port": "the lab listens on its own unix socket only, never TCP",
    "unix_socket_directories": "the lab's socket is in a folder private to the servers' user",
    "unix_socket_permissions": "the lab's socket is private to the servers' user",
    "unix_socket_group": "the lab's socket is private to the servers' user",
    "hba_file": "the lab authenticates its own users only (peer)",
    "ident_file": "the lab authenticates its own users only (peer)",
    "data_directory": "the lab lays out its cluster itself",
    "config_file": "the lab reads no other configuration file",
    "external_pid_file": "the lab writes nothing outside its own folder",
    "dynamic_shared_memory_type": "the lab keeps the server's shared memory in its own folder, so nothing outlives a run",
    "krb_server_keyfile": "the lab authenticates its own users only (peer)",
    "allow_alter_system": "the lab's settings are dbtier's (--set); the run's SQL may not change them",
}

IO_MODES = {
    # Direct I/O reaches the (emulated) device on every miss of the database cache: no OS page cache
    # stands between them, which is what the seeds' devices ("directio = true") did. Temp files
    # stay buffered, as in PostgreSQL.
    "direct": {"debug_io_direct": "'data, wal'"},
    # Through the (emulated) OS page cache: reads may hit it, writes are written back at fsync.
    "buffered": {},
    # Reads still cached; every write reaches the device before it returns (the seeds' dsync devices),
    # and the WAL is opened O_DSYNC.
    "dsync": {"wal_sync_method": "open_datasync"},
}
DEFAULT_IO_MODE = "direct"

_NAME = re.compile(r"^[a-z_][a-z0-9_.]*$")


def parse_sets(texts: tuple[str, ...] | list[str]) -> dict[str, str]:
    """--set NAME=VALUE (repeatable): any PostgreSQL setting; the server rejects unknown ones at start."""
    out: dict[str, str] = {}
    for text in texts:
        name, sep, value = text.partition("=")
        name = name.strip().lower()
        if not sep or not _NAME.match(name) or not value.strip():
            raise UserError(f"--set {text!r}: expected NAME=VALUE, for example --set effective_io_concurrency=32")
        value = value.strip()
        if any(not ch.isprintable() for ch in value):
            raise UserError(f"--set {name}: the value must be one line of printable characters")
        if name == "io_method" and value.strip("'\"").lower() not in ("worker", "sync"):
            raise UserError(f"--set io_method={value}: dbtier runs io_method=worker or sync; io_uring would "
                            "bypass the interposer, so its I/O would be neither emulated nor counted")
        if name in LAB_OWNED or name.startswith(("ssl", "include")):
            raise UserError(f"--set {name}: {LAB_OWNED.get(name, 'the lab reads no other configuration file')}")
        out[name] = value
    return out


def quote(value: str) -> str:
    """A postgresql.conf value: numbers and bare words as they are, anything else single-quoted."""
    if re.match(r"^'.*'$", value) or re.match(r"^-?[0-9.]+[A-Za-z]*$|^[A-Za-z_]+$", value):
        return value
    return "'" + value.replace("'", "''") + "'"


def server_settings(cache_bytes: int, io_mode: str, socket_dir: str, extra: dict[str, str]) -> dict[str, str]:
    if io_mode not in IO_MODES:
        raise UserError(f"--io-mode {io_mode}: choose one of {', '.join(IO_MODES)}")
    if cache_bytes < 128 * 1024:
        raise UserError("--cache: PostgreSQL needs at least 128kB of shared buffers")
    out = dict(PRESET)
    out.update(IO_MODES[io_mode])
    out["shared_buffers"] = f"{cache_bytes // 1024}kB"
    out["unix_socket_directories"] = quote(socket_dir)
    out.update({k: quote(v) for k, v in extra.items()})
    return out
