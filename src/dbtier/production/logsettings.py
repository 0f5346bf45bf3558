"""The settings a production server needs for `dbtier workload import` to rebuild its workload from
the log, each with why. docs/production.md shows them as a DBA sets them (ALTER SYSTEM, then a
reload; shared_preload_libraries needs a restart)."""

#: name -> (value, why)
CAPTURE = {
    "log_statement": ("all", "every statement, with the extended protocol's parse, bind and execute"),
    "log_min_duration_statement": ("0", "each statement's duration (with log_statement = all, the duration "
                                        "comes on a line of its own)"),
    "log_connections": ("on", "when each session starts, with its database, user and application"),
    "log_disconnections": ("on", "when each session ends"),
    "log_min_error_statement": ("error", "the statement a failure answered, so a replay can expect it"),
    "log_parameter_max_length": ("-1", "bind parameters logged whole (DETAIL: Parameters: $1 = ...)"),
    "log_line_prefix": ("'%m [%p] %q%u@%d/%a %c %e '", "stderr logs only: time, process, user, database, "
                                                        "application, session and SQLSTATE of every line"),
    "lc_messages": ("'C'", "English messages, which the reader recognises"),
}

#: For production's statistics (dbtier stats snapshot): needs a restart.
STATISTICS = {
    "shared_preload_libraries": ("'pg_stat_statements'", "per statement class: calls, time, blocks"),
    "compute_query_id": ("on", "statement classes as pg_stat_statements normalises them"),
    "track_io_timing": ("on", "read and write times in pg_stat_io and pg_stat_statements"),
}


def as_sets(*tables: dict) -> dict[str, str]:
    """The settings as a lab's --set takes them (for tests and benches that play production)."""
    out: dict[str, str] = {}
    for table in tables or (CAPTURE,):
        out.update({name: value for name, (value, _why) in table.items()})
    return out
