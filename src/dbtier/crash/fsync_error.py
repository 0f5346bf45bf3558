"""An fsync that fails, as Linux fails one: EIO once, the file's dirty pages marked clean (their data
stays readable in the page cache but never reaches the device), the next fsync succeeding.

PostgreSQL's answer since 2018 (data_sync_retry = off, the default) is a PANIC: the server stops and
recovers from its last checkpoint, replaying the WAL over whatever the pages lost. A server that
carried on (data_sync_retry = on) would complete its next checkpoint over pages that never reached the
media, and the WAL that could restore them would no longer be replayed.

After the measured run, the next fsync of a table's or index's file on the data device is made to fail and a checkpoint is
asked for; the server must PANIC and come back, and the power cuts that follow (from the failure on)
check what the media kept."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from dbtier.errors import UserError

#: how long the server may take to come back after its PANIC (it replays the WAL since its last checkpoint)
BACK_WITHIN_S = 120.0


@dataclass
class Injected:
    file: int                 # the state's file number of the file whose fsync failed
    pages: int                # its dirty pages marked clean (never written)
    at_ns: int                # when (the trace's clock)
    panicked: bool            # the server stopped on it (PostgreSQL's PANIC, InnoDB's abort)
    server_said: str          # the server log's line about it
    checkpoint: str           # what the request to write the dirty pages answered
    stopped: str = "PANICked and recovered"  # what the server did, in its engine's words, when it stopped

    def to_json(self, path: str) -> dict:
        return {"file": path, "pages": self.pages, "at_ns": self.at_ns, "panicked": self.panicked,
                "server_said": self.server_said, "checkpoint": self.checkpoint, "stopped": self.stopped}


def inject(lab, data_dev: int) -> Injected:
    """Fails the next fsync of a file on device `data_dev` (a checkpoint's, asked for now); waits for the
    server to come back if it PANICked, or (if it carried on) has the checkpoint done again."""
    log = Path(lab.cluster.log_path)
    seen = log.stat().st_size if log.exists() else 0
    lab.session.fail_fsync(data_dev, 1, "relation")  # a table's or index's: its pages are what WAL restores
    answer = _checkpoint(lab)
    fault = lab.session.snapshot()["fault"]
    if not fault["fired"]:
        lab.session.fail_fsync(-1)
        raise UserError("the checkpoint after the run fsynced no table or index on the data device, so no fsync "
                        "could fail: give a workload that writes to its tables")
    if answer == "done":
        raise UserError("the server answered its checkpoint although its fsync failed with EIO")
    said = _server_said(log, seen)
    panicked = bool(said) and said.startswith("PANIC")
    if panicked:
        _wait_until_back(lab)
    else:
        again = _checkpoint(lab)  # data_sync_retry = on: the next checkpoint finds the pages clean
        if again != "done":
            raise UserError(f"the server carried on after the failed fsync, but its next checkpoint failed too: {again}")
    return Injected(int(fault["file"]), int(fault["pages"]), int(fault["at_ns"]), panicked, said, answer)


def _checkpoint(lab) -> str:
    """'done', or what the server answered instead (an error, or the connection lost to a PANIC)."""
    try:
        with lab.cluster.connect("postgres", connect_timeout=10) as conn:
            conn.execute("CHECKPOINT")
        return "done"
    except psycopg.Error as exc:
        return " ".join(str(exc).split())[:300]


def _server_said(log: Path, since: int) -> str:
    """The server log's line about the failed fsync, written since `since` (PANIC, or an ERROR when it
    carries on). The server may take a moment to write it."""
    deadline = time.monotonic() + 10
    while True:
        try:
            with open(log, "rb") as f:
                f.seek(since)
                text = f.read().decode(errors="replace")
        except OSError:
            text = ""
        m = re.search(r"\b(PANIC|ERROR|WARNING):\s+(could not fsync[^\n]*)", text)
        if m:
            return f"{m.group(1)}: {m.group(2).strip()}"
        if time.monotonic() > deadline:
            return ""
        time.sleep(0.05)


def _wait_until_back(lab) -> None:
    deadline = time.monotonic() + BACK_WITHIN_S
    while True:
        if not lab.cluster.running:
            raise UserError(f"the server PANICked on the failed fsync and did not restart; see {lab.cluster.log_path}")
        try:
            with lab.cluster.connect("postgres", connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise UserError(f"the server PANICked on the failed fsync and was not back within "
                                f"{BACK_WITHIN_S:.0f} s; see {lab.cluster.log_path}") from None
            time.sleep(0.05)
