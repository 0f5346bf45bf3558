"""When each byte a run wrote reached the media: the durability log (the program's writes, sizes and
names) joined with the trace (the device requests the emulation made of them: page-cache writeback,
direct and O_DSYNC writes, flushes) and each device's durability facts.

A device write request carries the file's bytes as the program had written them when the request was
issued (the page cache's content at writeback; a direct write's own bytes). It is durable:
- on a device with no volatile write cache, once it completed;
- on one with a volatile cache, once a flush issued after it completed has itself completed (a FUA
  write at once), or once the drive had to destage it to make room (first in, first out: the cache's
  size of later writes came), whichever is first; a drive that ignores flushes only destages.
A file whose fsync failed (an injected EIO, fsync_error.py) lost its writeback: the page cache's write
requests of it issued since its last fsync that succeeded, up to the failure, never reach the media
(Linux reports an asynchronous writeback's error at the next fsync and leaves the pages clean); its
direct writes are not the page cache's.
A write made while the emulation was paused (start-up, loading) is durable at once: nothing of it was
emulated. Sizes and names change at the call (metadata as a journaling file system that commits at
once would leave it): a file extended past what is durable reads zeros there.

The program's view is rebuilt once, in time order, into a scratch folder; each request's bytes are
kept in a spool file, to be laid onto the media when the request becomes durable (states.py)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dbtier.crash import durlog
from dbtier.crash.devices import Durability
from dbtier.measure import trace as tracefile

INF = np.iinfo(np.uint64).max


@dataclass
class Requests:
    """Device write requests, one row each, with their bytes in the spool."""
    file: np.ndarray
    off: np.ndarray
    len: np.ndarray
    dev: np.ndarray
    arrival: np.ndarray
    complete: np.ndarray
    durable: np.ndarray      # when it is on the media (INF: not within the run)
    spool_at: np.ndarray     # where its bytes are in the spool
    spool_len: np.ndarray    # how many: the request's bytes within the file as it was then (a page's
                             # tail past the end of the file is on no media the file can show)


@dataclass
class MediaEvent:
    t: int
    kind: str                # "request", "write" (paused: durable at once), "size", "rename", "unlink", "appear"
    index: int               # the request's row, the log entry's index, or (appear) the file's


@dataclass
class Timeline:
    log: durlog.DurabilityLog
    requests: Requests
    flushes: np.ndarray              # completion times of every device flush, sorted
    events: list[MediaEvent]         # in time order (ties: as they came)
    spool: Path
    files: dict[int, tuple[int, str, str]]  # file index -> (device, its path when first seen, its pg_class)
    facts: list[Durability]
    start_ns: int
    end_ns: int
    calls: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=tracefile.RECORD))  # the trace's calls, by time
    failed_writes: tuple[int, int] = (0, 0)  # the write requests a failed fsync lost: how many, their bytes


def _durable_times(req: np.ndarray, flushes_by_dev: dict[int, np.ndarray], facts: list[Durability],
                   fua: np.ndarray) -> np.ndarray:
    durable = req["complete_ns"].astype(np.uint64).copy()
    for dev, fact in enumerate(facts):
        mine = np.flatnonzero(req["dev"] == dev)
        if not fact.volatile_bytes or not len(mine):
            continue
        complete = req["complete_ns"][mine].astype(np.uint64)
        when = np.full(len(mine), INF, dtype=np.uint64)
        if fact.flush_honoured:
            arrivals, completes = flushes_by_dev.get(dev, (np.empty(0, np.uint64), np.empty(0, np.uint64)))
            k = np.searchsorted(arrivals, complete, side="left")  # the first flush issued after it completed
            has = k < len(arrivals)
            when[has] = completes[k[has]]
            when[fua[mine]] = complete[fua[mine]]
        # destaged for room: once the cache's size of later writes has come to this device
        sizes = req["len"][mine].astype(np.uint64)
        after = np.cumsum(sizes)  # bytes up to and including each
        k = np.searchsorted(after, after - sizes + np.uint64(fact.volatile_bytes), side="right")
        pushed = k < len(mine)
        room = np.full(len(mine), INF, dtype=np.uint64)
        room[pushed] = req["submit_ns"][mine][k[pushed]]
        durable[mine] = np.maximum(complete, np.minimum(when, room))
    return durable


def _lost_to_failed_fsync(recs: np.ndarray, writes: np.ndarray, file: int, at_ns: int) -> np.ndarray:
    """The write requests of `file` a failed fsync at at_ns stands for: the page cache's writeback of it
    issued after its last fsync that succeeded ended, up to the failure. A direct write is not the page
    cache's: it reached the device as it completed (its own error, had it failed, was the write's)."""
    calls = recs[(recs["kind"] == tracefile.CALL) & (recs["op"] == tracefile.FLUSH) & (recs["file"] == file)
                 & (recs["end_ns"] <= at_ns)]
    since = int(calls["end_ns"].max()) if len(calls) else 0
    writeback = (writes["flags"] & tracefile.FLAGS["direct"]) == 0
    return (writes["file"] == file) & writeback & (writes["submit_ns"] >= since) & (writes["submit_ns"] <= at_ns)


def build(log: durlog.DurabilityLog, trace_dir: Path, files: dict[int, tuple[int, str, str]], base_files: dict[int, Path],
          facts: list[Durability], scratch: Path, failed: tuple[int, int] | None = None) -> Timeline:
    """base_files: each file index's copy in the base image (a file that existed before the log);
    failed: (file index, when) of an fsync that failed."""
    recs = tracefile.read_records(trace_dir)
    reqs = recs[recs["kind"] == tracefile.REQUEST]
    writes = reqs[(reqs["op"] == tracefile.WRITE) & (reqs["file"] >= 0)]
    writes = writes[np.argsort(writes["submit_ns"], kind="stable")]
    flush = reqs[reqs["op"] == tracefile.FLUSH]
    flushes_by_dev = {}
    for dev in np.unique(flush["dev"]):
        f = flush[flush["dev"] == dev]
        order = np.argsort(f["submit_ns"], kind="stable")
        flushes_by_dev[int(dev)] = (f["submit_ns"][order].astype(np.uint64),
                                    np.maximum.accumulate(f["complete_ns"][order].astype(np.uint64)))
    fua = (writes["flags"] & tracefile.FLAGS["dsync"]) != 0
    durable = _durable_times(writes, flushes_by_dev, facts, fua)
    lost = np.zeros(len(writes), dtype=bool)
    if failed is not None:
        lost = _lost_to_failed_fsync(recs, writes, *failed)
        durable[lost] = INF

    # The program's view, in time order: each request takes its bytes from it as it is issued.
    scratch.mkdir(exist_ok=True)
    view = scratch / "view"
    view.mkdir()
    spool_path = scratch / "spool"
    entries = log.entries
    log_order = np.flatnonzero(np.isin(entries["kind"], (durlog.WRITE, durlog.TRUNCATE, durlog.ALLOCATE))
                               & (entries["file"] >= 0))
    handles: dict[int, int] = {}

    def fd(index: int) -> int:
        if index not in handles:
            path = view / str(index)
            if not path.exists() and index in base_files:
                shutil.copyfile(base_files[index], path)
            handles[index] = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        return handles[index]

    spool_at = np.zeros(len(writes), dtype=np.uint64)
    spool_len = np.zeros(len(writes), dtype=np.uint64)
    li, ri, n_log, n_req = 0, 0, len(log_order), len(writes)
    try:
        with open(spool_path, "wb") as spool:
            while li < n_log or ri < n_req:
                take_log = ri >= n_req or (li < n_log and entries["t0"][log_order[li]] <= writes["submit_ns"][ri])
                if take_log:
                    i = int(log_order[li])
                    li += 1
                    e = entries[i]
                    f = fd(int(e["file"]))
                    if e["kind"] == durlog.WRITE:
                        os.pwrite(f, log.payload(i), int(e["off"]))
                    elif e["kind"] == durlog.TRUNCATE:
                        os.ftruncate(f, int(e["off"]))
                    elif not int(e["aux"]) & durlog.KEEP_SIZE and os.fstat(f).st_size < int(e["off"] + e["size"]):
                        os.ftruncate(f, int(e["off"] + e["size"]))
                else:
                    w = writes[ri]
                    data = os.pread(fd(int(w["file"])), int(w["len"]), int(w["offset"]))
                    spool_at[ri] = spool.tell()
                    spool_len[ri] = len(data)
                    spool.write(data)
                    ri += 1
    finally:
        for h in handles.values():
            os.close(h)
    shutil.rmtree(view, ignore_errors=True)

    requests = Requests(writes["file"].astype(np.int64), writes["offset"].astype(np.uint64),
                        writes["len"].astype(np.uint64), writes["dev"].astype(np.int64),
                        writes["submit_ns"].astype(np.uint64), writes["complete_ns"].astype(np.uint64), durable,
                        spool_at, spool_len)
    events = [MediaEvent(int(durable[k]), "request", k) for k in range(len(writes)) if durable[k] != INF]
    for i in range(len(entries)):
        e = entries[i]
        kind = int(e["kind"])
        if kind == durlog.WRITE:
            if e["flags"] & durlog.PAUSED and e["file"] >= 0:
                events.append(MediaEvent(int(e["t0"]), "write", i))
        elif kind in (durlog.TRUNCATE, durlog.ALLOCATE):
            events.append(MediaEvent(int(e["t0"]), "size", i))
        elif kind == durlog.RENAME:
            events.append(MediaEvent(int(e["t0"]), "rename", i))
        elif kind == durlog.UNLINK:
            events.append(MediaEvent(int(e["t0"]), "unlink", i))
    # a file made during the run exists, empty, from its first call (its bytes come when they are durable)
    first: dict[int, int] = {}
    for i in np.flatnonzero(entries["file"] >= 0):
        first.setdefault(int(entries["file"][i]), int(entries["t0"][i]))
    events.extend(MediaEvent(t, "appear", index) for index, t in first.items() if index not in base_files)
    events.sort(key=lambda ev: ev.t)  # stable: a log entry's own order, requests in arrival order
    measured = entries["t0"][(entries["flags"] & durlog.PAUSED) == 0]
    times = [int(x) for x in (measured.min() if len(measured) else 0, writes["submit_ns"].min() if n_req else 0) if x]
    all_flushes = np.sort(np.concatenate([c for _a, c in flushes_by_dev.values()])) if flushes_by_dev \
        else np.empty(0, np.uint64)
    ends = [int(x) for x in (measured.max() if len(measured) else 0, writes["complete_ns"].max() if n_req else 0,
                             all_flushes[-1] if len(all_flushes) else 0) if x]
    calls = recs[recs["kind"] == tracefile.CALL]
    return Timeline(log, requests, all_flushes, events, spool_path, files, facts, min(times, default=0),
                    max(ends, default=0), calls[np.argsort(calls["submit_ns"], kind="stable")],
                    (int(lost.sum()), int(writes["len"][lost].sum())))
