"""A failed fsync of an InnoDB table's file, as fsync_error.py fails a PostgreSQL relation's: EIO once,
the file's dirty pages in the OS page cache marked clean (their data never reaches the device).

InnoDB's answer is to stop the server: a data file's flush that fails is fatal to it (its log says
"[FATAL] InnoDB: fdatasync() returned 5"). Started again, it recovers from its last checkpoint, which the failed flush never let
advance. What the server had written is still in the page cache, so recovery reads pages newer than
its log and has nothing to redo; with innodb_flush_method = O_DIRECT (the default) those writes
bypassed the cache and are on the device already, with fsync (buffered data files) they were what the
failed fsync dropped, and the next checkpoint moves past them. The power cuts that follow check which.

After the measured run, the next fsync of a table's file (.ibd) on the data device is made to fail, and
InnoDB is asked to write every dirty page (innodb_max_dirty_pages_pct = 0), which its next checkpoint
fsyncs."""

from __future__ import annotations

import subprocess
import time

import pymysql

from dbtier.crash.fsync_error import Injected
from dbtier.errors import UserError

#: InnoDB's table files: pgpath.h classes PostgreSQL's files only
TABLE_FILE = ".ibd"
#: how long the page cleaner may take to write the dirty pages and checkpoint (it wakes each second)
FLUSHED_WITHIN_S = 60.0
#: how long a server that failed its fsync may take to end (it writes a stack trace and a core, if allowed)
ENDS_WITHIN_S = 60.0


def inject(lab, data_dev: int) -> Injected:
    """Fails the next fsync of a table's file on device `data_dev`; when the server stops on it, starts it
    again (InnoDB's crash recovery); when it carries on, says so."""
    server = lab.server
    log = server.error_log
    seen = log.stat().st_size if log.exists() else 0
    lab.session.fail_fsync(data_dev, 1, suffix=TABLE_FILE)
    asked = _flush_everything(lab)
    deadline = time.monotonic() + FLUSHED_WITHIN_S
    while not lab.session.snapshot()["fault"]["fired"]:
        if server.proc is None or server.proc.poll() is not None or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    fault = lab.session.snapshot()["fault"]
    if not fault["fired"]:
        lab.session.fail_fsync(-1)
        raise UserError("InnoDB fsynced no table's file on the data device after the run (its dirty pages written "
                        "and checkpointed), so no fsync could fail: give a workload that writes to its tables")
    stopped = _ended(server)
    said = _server_said(log, seen)
    if stopped:
        lab.start_again()  # InnoDB's crash recovery, on the emulated devices
    _flush_everything(lab)  # and a server that carried on (or came back) checkpoints past the failure
    _wait_for_checkpoint(lab)
    return Injected(int(fault["file"]), int(fault["pages"]), int(fault["at_ns"]), stopped, said, asked,
                    stopped="aborted and, started again, recovered" if stopped else "")


def _flush_everything(lab) -> str:
    """InnoDB's page cleaner asked to write every dirty page (then it checkpoints: each written table's
    file is fsynced). What the server answered."""
    try:
        with lab.server.connect() as conn, conn.cursor() as cur:
            cur.execute("SET GLOBAL innodb_max_dirty_pages_pct_lwm = 0")
            cur.execute("SET GLOBAL innodb_max_dirty_pages_pct = 0")
        return "innodb_max_dirty_pages_pct = 0"
    except pymysql.err.MySQLError as exc:
        return " ".join(str(exc).split())[:300]


def _wait_for_checkpoint(lab) -> None:
    """Until InnoDB has written every dirty page and checkpointed past everything logged before the
    failure (the log's end as it is now, the server having recovered): a recovery from then on applies
    none of the log from before it."""
    deadline, past = time.monotonic() + FLUSHED_WITHIN_S, None
    while True:
        with lab.server.connect() as conn, conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN "
                        "('Innodb_buffer_pool_pages_dirty', 'Innodb_lsn_current', 'Innodb_lsn_last_checkpoint')")
            status = {k: int(v) for k, v in cur.fetchall()}
        past = status["Innodb_lsn_current"] if past is None else past
        if status["Innodb_buffer_pool_pages_dirty"] == 0 and status["Innodb_lsn_last_checkpoint"] >= past:
            return
        if time.monotonic() > deadline:
            raise UserError(f"InnoDB did not write its dirty pages and checkpoint within {FLUSHED_WITHIN_S:.0f} s "
                            f"after the failed fsync: {status}")
        time.sleep(0.1)


def _ended(server) -> bool:
    """Whether the server ends on the failed fsync (given a while: it logs its stack first)."""
    try:
        server.proc.wait(ENDS_WITHIN_S)
        return True
    except subprocess.TimeoutExpired:  # still running: it carried on
        return False


def _server_said(log, since: int) -> str:
    """The server's first error line written since byte `since` (its words about the failed flush)."""
    try:
        with open(log, "rb") as f:
            f.seek(since)
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    errors = [ln.split("[ERROR]", 1)[1].strip() for ln in lines if "[ERROR]" in ln]
    return errors[0][:300] if errors else ""
