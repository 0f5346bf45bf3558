"""What a MariaDB lab measures beside the emulation's figures (measure/collectors.py): InnoDB's own
counters (SHOW GLOBAL STATUS), performance_schema's timed waits as the top timed events, and its I/O
per file; and the names of InnoDB's files for the per-object I/O.

performance_schema's timers are in picoseconds. Its snapshots are read outside the measured
interval (before the clock starts, after it stops), so their queries cost no device time."""

from __future__ import annotations

from pathlib import PurePosixPath

from dbtier.measure.collectors import _Base

#: the server's counters a measurement reports: InnoDB's bytes (the interposer's must agree with them), its
#: cache, its row locks; the rows written and read, the sorts that spilled
STATUS = ("Innodb_data_read", "Innodb_data_written", "Innodb_data_reads", "Innodb_data_writes", "Innodb_data_fsyncs",
          "Innodb_os_log_written", "Innodb_log_writes", "Innodb_pages_read", "Innodb_pages_written",
          "Innodb_dblwr_pages_written", "Innodb_buffer_pool_reads", "Innodb_buffer_pool_read_requests",
          "Innodb_buffer_pool_wait_free", "Innodb_row_lock_waits", "Innodb_row_lock_time", "Handler_write",
          "Handler_update", "Handler_delete", "Handler_read_rnd_next", "Created_tmp_disk_tables", "Sort_merge_passes")
WAITS = ("SELECT EVENT_NAME, COUNT_STAR, SUM_TIMER_WAIT FROM performance_schema.events_waits_summary_global_by_event_name "
         "WHERE COUNT_STAR > 0")
FILES = ("SELECT FILE_NAME, EVENT_NAME, COUNT_READ, SUM_NUMBER_OF_BYTES_READ, COUNT_WRITE, SUM_NUMBER_OF_BYTES_WRITE, "
         "COUNT_MISC, SUM_TIMER_WAIT FROM performance_schema.file_summary_by_instance")
PICO = 1e12
TOP = 8
#: the name the listing's own connection's thread is given (it serves no client)
LISTING_THREAD = "dbtier thread list"
#: the server's threads by their OS ids (what the trace records as tid), the asking connection's named so
THREADS = (f"SELECT THREAD_OS_ID, IF(PROCESSLIST_ID <=> CONNECTION_ID(), '{LISTING_THREAD}', NAME) "
           "FROM performance_schema.threads WHERE THREAD_OS_ID IS NOT NULL")
#: the thread that serves a client's connection (one per connection: thread_handling's default)
CLIENT_THREAD = "thread/sql/one_connection"
#: InnoDB's thread pool's workers, whose tasks do not wait for each other (prediction/events.prepare)
POOL_THREAD = "thread/innodb/thread_pool_thread"


def _snapshot(connect) -> dict:
    with connect(None) as conn, conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS")
        status = {k: int(v) for k, v in cur.fetchall() if k in STATUS}
        cur.execute(WAITS)
        waits = {name: (int(n), int(t)) for name, n, t in cur.fetchall()}
        cur.execute(FILES)
        files = {(path, event): tuple(int(x) for x in rest) for path, event, *rest in cur.fetchall()}
    return {"status": status, "waits": waits, "files": files}


class ServerCounters(_Base):
    """InnoDB's status counters, performance_schema's waits and its I/O per file, over the interval: read
    just before the emulation starts and just after it stops (outside it, so that the queries' own calls
    are neither charged nor dilated), so that the server's counters and the trace's window differ by what
    falls within the emulation's start and stop at each end (a background read, purge's, that the trace's
    window leaves out and the counters take in), not by the time other collectors' figures take."""
    start_rank, stop_rank = 5, 35

    def __init__(self, connect):
        self.connect = connect

    def start(self, interval) -> None:
        self.before = _snapshot(self.connect)

    def stop(self, interval) -> None:
        self.after = _snapshot(self.connect)

    def contribute(self, interval, figures: dict) -> None:
        after, b = self.after, self.before
        figures["innodb_status"] = {k: v - b["status"].get(k, 0) for k, v in after["status"].items()}
        figures["top_events"] = top_events(b["waits"], after["waits"], figures["server_cpu_s"], interval.elapsed_s)
        rows = []
        for key, (nr, rb, nw, wb, nm, t) in after["files"].items():
            r0 = b["files"].get(key, (0, 0, 0, 0, 0, 0))
            d = (nr - r0[0], rb - r0[1], nw - r0[2], wb - r0[3], nm - r0[4], t - r0[5])
            if any(d[:5]):
                rows.append({"file": key[0], "event": key[1], "reads": d[0], "read_bytes": d[1], "writes": d[2],
                             "write_bytes": d[3], "misc": d[4], "wait_s": d[5] / PICO})
        figures["file_io"] = sorted(rows, key=lambda r: -r["wait_s"])


class ServerThreads(_Base):
    """Which of the server's threads served a client's connection and which were its own (InnoDB's page
    cleaner, its thread pool's workers, purge...): what a replay needs to tell when the clients were
    done, as PostgreSQL's processes tell it. performance_schema lists a connection's thread while it is
    connected and the server's own for as long as they live, which is beyond the interval: listed as it
    starts and as it stops, a thread in neither listing is a connection's that came and went within it
    (the replay takes it so: prediction/replay.py). Listed outside the server counters' window (ranks
    4 and 36), whose scans of the listing would count among the interval's rows read, on one connection
    held from the first listing to the last: a new one at the end could be given the thread a client's
    just closed connection left in the server's thread cache, and name it as the listing's."""
    start_rank, stop_rank = 4, 36

    def __init__(self, connect):
        self.connect = connect
        self.seen: dict[int, str] = {}
        self._conn = None

    def _list(self) -> None:
        with self._conn.cursor() as cur:
            cur.execute(THREADS)
            for tid, name in cur.fetchall():
                self.seen.setdefault(int(tid), str(name))

    def start(self, interval) -> None:
        self._conn = self.connect(None)
        self._list()

    def stop(self, interval) -> None:
        try:
            self._list()
        finally:
            self._conn.close()

    def contribute(self, interval, figures: dict) -> None:
        interval.notes["threads"] = dict(self.seen)


def top_events(before: dict, after: dict, server_cpu_s: float, elapsed_s: float) -> list[dict]:
    """STATSPACK's "Top timed events" from performance_schema: the server's measured CPU time, then the
    timed waits of the interval, with % of elapsed. Not the table handler's calls (wait/io/table/...):
    the storage engine's row calls, its CPU with the file waits nested in them, which would count those
    twice (random-index on a disk: the handler 93.8% of elapsed, the data file's reads inside it)."""
    rows = [{"event": "CPU time (measured)", "waits": None, "time_s": server_cpu_s}]
    for name, (n, t) in after.items():
        if name == "idle" or name.startswith("wait/io/table/"):  # idle: the client's time, between statements
            continue
        n0, t0 = before.get(name, (0, 0))
        if t > t0:
            rows.append({"event": name, "waits": n - n0, "time_s": (t - t0) / PICO})
    rows = sorted(rows, key=lambda e: -e["time_s"])[:TOP]
    for r in rows:
        r["elapsed_pct"] = 100.0 * r["time_s"] / elapsed_s if elapsed_s > 0 else 0.0
    return rows


def name_of(path: str, database: str, dumps: str | None = None) -> tuple[str, str]:
    """An InnoDB file's object and kind: a table's tablespace (db/t.ibd: t in the lab's database, db.t
    elsewhere), the system tablespace, the redo log, the undo tablespaces, temp, the binary log, dumps.
    dumps: the lab's dump folder, whose files are dumps whatever their names (mariadb-dump --tab's
    rows, which the server wrote; mariadb-backup's copy of db/t.ibd, which is no table)."""
    if dumps and path.startswith(dumps.rstrip("/") + "/"):
        return "dump files", "dump"
    p = PurePosixPath(path)
    name = p.name
    if name.endswith(".ibd"):
        table = name[:-4].split("#P#")[0]  # a partition's file belongs to its table
        db = p.parent.name
        return (table if db == database else f"{db}.{table}"), "table"
    if name.startswith("ibdata"):
        return "system tablespace", "system"
    if name.startswith("ib_logfile"):
        return "redo log", "log"
    if name.startswith("undo") and name[4:].isdigit():
        return "undo tablespaces", "undo"
    if name.startswith("ibtmp") or p.parent.name == "temp":  # the temporary tablespace, tmpdir's sort files
        return "temp files", "temp"
    if p.parent.name == "binlog":
        return "binary log", "binlog"
    return "other files", "other"
