"""`dbtier crash`: the workload run once on the emulated devices with a durability log, then power cut
at many instants, each state recovered by the real server and checked against the acknowledged
commits and the database's structure.

The course: the data loaded (unmeasured), the server stopped cleanly and the devices' folders copied
(the base image), the durability log switched on, the server started and the workload measured as a
run is; then the server stopped for good, and the cuts planned from (seed, index), built, recovered
and checked one after another. Everything it made (image, log, states, servers) is in the lab's
workspace and goes with it, on success, failure or Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import threading
import time
from concurrent import futures
from dataclasses import replace
from pathlib import Path
from typing import Callable

from dbtier import engines
from dbtier.crash import devices as durability
from dbtier.crash import fsync_error as fsync_errors, fsync_error_innodb, image, ledger as ledgers, pagestory
from dbtier.crash import recover, recover_innodb
from dbtier.crash import states
from dbtier.errors import UserError
from dbtier.experiments import runner
from dbtier.experiments.experiment import Experiment
from dbtier.workloads.base import QuietProgress

#: --cuts: more than this is not a test that ends today
MAX_CUTS = 1_000_000
#: every this many cuts (from the first) is recovered on the emulated devices and timed (recover.py),
#: or more apart, so that no more than TIMED_AT_MOST are: a range of recovery times needs no more
TIMED_EVERY = 10
TIMED_AT_MOST = 50
#: --recoveries: each is a recovering server and its checks, a CPU's worth at times
MAX_RECOVERIES = 64
#: each engine's recovery of a state and its checks
RECOVERY = {"postgres": recover.recover, "mariadb": recover_innodb.recover}
#: each engine's failed fsync: which file fails, and what the server is asked to do so that it fsyncs one
FAIL_FSYNC = {"postgres": fsync_errors.inject, "mariadb": fsync_error_innodb.inject}
#: each engine's reading of the page its server or its checks named as damaged (pagestory.py tells its story)
DAMAGED_PAGE = {"postgres": recover.damaged_page, "mariadb": recover_innodb.damaged_page}


def check_cuts(cuts: int, kinds: tuple[str, ...]) -> None:
    if not 1 <= cuts <= MAX_CUTS:
        raise UserError(f"--cuts {cuts}: give from 1 to {MAX_CUTS:,} power cuts")
    for k in kinds:
        if k not in states.KINDS:
            raise UserError(f"--only {k}: the kinds of cut are {', '.join(states.KINDS)}")


def default_recoveries() -> int:
    return max(1, min(os.cpu_count() or 1, MAX_RECOVERIES))


def check_recoveries(recoveries: int) -> None:
    if not 1 <= recoveries <= MAX_RECOVERIES:
        raise UserError(f"--recoveries {recoveries}: give from 1 to {MAX_RECOVERIES} states to recover at once "
                        f"(this machine has {os.cpu_count()} CPUs)")


def _quiet():
    return contextlib.nullcontext(QuietProgress())


def run_crash(exp: Experiment, cuts: int, seed: int = 0, kinds: tuple[str, ...] = states.KINDS,
              workspace: Path | None = None, progress_for: Callable = _quiet,
              say: Callable[[str], None] = print, durability_log: bool = True, keep: Path | None = None,
              fsync_error: bool = False, ledger_table: str | None = None, recoveries: int | None = None) -> dict:
    """The crash test of one experiment: its result (the cuts, what each found, the verdict).
    keep: where the run's material goes if a cut found something (image.Material: any state rebuilt
    from it). durability_log False: the same course with the log left off and no cut made (what the
    log costs the run, bench/power_loss.py). fsync_error: after the run, a checkpoint's fsync of a data
    file fails (fsync_error.py); the server must PANIC and recover, and the cuts are made from then on.
    ledger_table: the table a user's own pgbench scripts write a row to in each transaction (ledger.py).
    recoveries: how many states recover side by side (each a server of its own; the timed ones alone),
    by default as many as this machine has CPUs."""
    check_cuts(cuts, kinds)
    recoveries = default_recoveries() if recoveries is None else recoveries
    check_recoveries(recoveries)
    facts = [durability.of(d.name, d.profile) for d in exp.devices]
    workload, options, requests = runner.check(exp, workspace)
    ledger = ledgers.for_workload(workload, ledger_table)
    if len(workload.phases(exp.cache_state)) != 1:
        raise UserError(f"dbtier crash runs a workload of one measured phase; {exp.workload} has several")
    options = replace(options, trace=True, durability_log=True)
    lab = engines.get(exp.engine).lab(requests, exp.placement, options, say)
    with lab, progress_for() as progress:
        db = lab.handle
        workload.prepare(db, progress)
        progress.phase("placing the objects")
        lab.place_objects()  # no WAL recycled ahead: each crash state would copy the empty segments
        ledger.apply(workload, lab)
        base = lab.claim.inside("crash-base", mode=0o700)

        def capture():
            inodes = image.take_base(lab.devices, base)
            lab.session.keep_durability_log(durability_log)
            return inodes

        progress.phase("stopping the server: the base image")
        inodes = lab.while_stopped(capture)
        before = lab.session.snapshot()
        phase = workload.phases(exp.cache_state)[0]
        with lab.measure(label=phase.name) as m:
            metrics = phase.run(db, progress)
        gaps = lab.session.gaps(lab.session.snapshot(), before)
        if gaps:
            raise UserError(f"the durability log is incomplete, so no state could be trusted: {gaps[0]}")
        acked = ledgers.Acknowledged.from_recording(lab.recording.transactions, ledger.counted)
        if isinstance(ledger, ledgers.UserLedger):  # the user's scripts each wrote their row, or no cut means much
            with lab.connect() as conn:
                ledger.check_live(conn, acked)
        names = [d.name for d in lab.devices]
        roles = {role: names.index(dev) for role, dev in exp.placement.roles.items() if dev in names}
        injected = None
        if fsync_error:
            progress.phase("failing a table file's fsync with EIO")
            with lab.warm():  # emulated, so that what the checkpoint wrote waits in the page cache
                injected = FAIL_FSYNC[exp.engine](lab, roles["data"])
        lab.session.pause()
        lab.session.keep_durability_log(False)
        lab.stop_server()
        tps = metrics.get("tps") or (metrics["tpm"] / 60 if metrics.get("tpm") else None)  # TPC-C's: every type
        run = {"elapsed_s": m.result["elapsed_s"], "transactions": acked.total, "tps": tps}
        if not durability_log:
            return {"kind": "crash-unlogged", "run": run}
        say(f"the run: {acked.total:,} transactions acknowledged in {m.result['elapsed_s']:.1f} s; cutting the power "
            f"{cuts:,} times")
        scratch = lab.startable_folder("crash-scratch")  # the recovering servers pass through it to their state
        progress.phase("reading the durability log")
        material = image.material(lab.session, base, inodes)
        builder = material.builder(scratch / "timeline")
        after_ns = injected.at_ns if injected else None
        t_cuts = time.monotonic()
        try:
            results = _cut_all(lab, builder, ledger, acked, cuts, seed, kinds, exp.engine, roles, scratch,
                               progress, after_ns, recoveries)
            if injected:
                run["fsync_error"] = {**injected.to_json(builder.tl.files.get(injected.file, (0, "?", ""))[1]),
                                      "lost_writes": builder.tl.failed_writes[0],
                                      "lost_bytes": builder.tl.failed_writes[1],
                                      "never_written_bytes": builder.never_written(injected.file, injected.at_ns)}
                run["after_ns"] = after_ns
        finally:
            builder.close()
        # states an hour: the cuts over cutting_s
        run["cutting_s"], run["recoveries"] = time.monotonic() - t_cuts, recoveries
        if keep is not None and any(r["problems"] or r["lost"] for r in results):
            progress.phase("keeping the image and the log, to rebuild the states that found something")
            material.keep(keep)
        run["span_ms"] = (builder.tl.end_ns - builder.tl.start_ns) / 1e6
    return _result(exp, facts, lab, cuts, seed, kinds, run, results)


def _cut_all(lab, builder, ledger, acked, cuts, seed, kinds, engine: str, roles: dict[str, int], scratch,
             progress, after_ns=None, recoveries: int = 1) -> list[dict]:
    """Each cut built (here, one after another: the builder's media image moves with them), then
    recovered and checked by the engine's recovery (roles: where each of its files' roles is, by
    device number), `recoveries` states at a time, each recovering server on a socket folder of its
    own. A timed cut recovers alone: its time is the devices' and the server's, not its neighbours'."""
    tl, recovery = builder.tl, RECOVERY[engine]
    rows: dict[int, dict] = {}
    sockets: queue.SimpleQueue = queue.SimpleQueue()
    for j in range(recoveries):
        sockets.put(lab.private_folder(f"s{j}"))
    stop = threading.Event()

    def check(i: int, folder: Path, timed: bool):
        sock = sockets.get()
        t0 = time.monotonic()
        try:
            if stop.is_set():
                return None, 0.0
            return recovery(lab, folder, roles, ledger, scratch / f"state-{i}.log", timed=timed,
                            socket_dir=sock), time.monotonic() - t0
        finally:
            sockets.put(sock)
            shutil.rmtree(folder, ignore_errors=True)

    def finish(done) -> None:
        for fut in done:
            i, cut, built_s = running.pop(fut)
            checked, checked_s = fut.result()
            rows[i] = _row(builder, acked, cut, checked, built_s, checked_s, scratch, engine, roles)
            progress.advance(1)

    every = max(TIMED_EVERY, -(-cuts // TIMED_AT_MOST))
    progress.phase(f"cutting the power {cuts:,} times", total=cuts)
    running: dict[futures.Future, tuple] = {}
    pool = futures.ThreadPoolExecutor(max_workers=recoveries, thread_name_prefix="recover")
    try:
        for i in range(cuts):
            timed = i % every == 0
            while running and (timed or len(running) >= recoveries):  # a timed cut waits for the others to end
                finish(futures.wait(running, return_when=futures.FIRST_COMPLETED).done)
            cut = states.plan(tl, kinds, seed, i, cuts, after_ns)
            folder = scratch / f"state-{i}"
            t0 = time.monotonic()
            builder.build(cut, folder)
            running[pool.submit(check, i, folder, timed)] = (i, cut, time.monotonic() - t0)
            if timed:  # and the next waits for it
                finish(futures.wait(running).done)
        while running:
            finish(futures.wait(running, return_when=futures.FIRST_COMPLETED).done)
    except BaseException:
        stop.set()  # the states not yet started are not; those recovering end as they are
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
    return [rows[i] for i in range(cuts)]


def _row(builder, acked, cut, checked, built_s: float, checked_s: float, scratch: Path, engine: str,
         roles: dict[str, int]) -> dict:
    """What one cut found; a state that lost commits or was damaged is built again to fingerprint it
    (its recovery changed the first), with what was pending where at its instant and the story of the
    page its problems name, if they name one."""
    tl, i = builder.tl, cut.index
    loss = ledgers.judge(acked, checked.kept, cut.at_ns) if checked.started and checked.ledger_read else None
    row = {"index": i, "kind": cut.kind, "at_ms": (cut.at_ns - tl.start_ns) / 1e6, "at_ns": cut.at_ns,
           "started": checked.started, "recovery_s": checked.recovery_s, "built_s": built_s,
           "checked_s": checked_s,
           "acknowledged": sum(acked.count_by(cut.at_ns).values()),
           "lost": loss.lost if loss else None, "lost_span_ms": loss.span_ms if loss else None,
           "suffix": loss.suffix if loss else None, "problems": checked.problems}
    if checked.problems or (loss and loss.lost):
        again = scratch / f"state-{i}-again"
        try:
            row["state_sha256"] = builder.digest(builder.build(cut, again))
            named = DAMAGED_PAGE[engine](checked.problems, again, roles) if checked.problems else None
            if named:
                row["page"] = pagestory.tell(builder, cut, *named)
        finally:
            shutil.rmtree(again, ignore_errors=True)
        pending = builder.pending(cut.at_ns)
        row["pending"] = ([{"file": f, "where": "in the page cache", "ranges": [list(r) for r in rs]}
                           for f, rs in pending.in_page_cache.items()]
                          + [{"file": f, "where": "in flight", "ranges": [list(r) for r in rs]}
                             for f, rs in pending.in_flight.items()]
                          + [{"file": f, "where": "in the device cache", "ranges": [list(r) for r in rs]}
                             for f, rs in pending.in_device_cache.items()])
        row["calls_before"] = pending.calls
        row["log_tail"] = checked.log_tail
    else:
        (scratch / f"state-{i}.log").unlink(missing_ok=True)
    return row


def _result(exp, facts, lab, cuts, seed, kinds, run, rows) -> dict:
    lost = [r for r in rows if r["lost"]]
    damaged = [r for r in rows if r["problems"]]
    recovery = [r["recovery_s"] for r in rows if r["recovery_s"] is not None]
    return {
        "kind": "crash", "workload": exp.workload, "engine": exp.engine, "seed": seed, "cuts": cuts,
        "kinds": list(kinds),
        "settings": dict(exp.settings), "devices": [{"name": d.name, "profile": d.profile.name,
                                                      "durability": f.describe()}
                                                     for d, f in zip(lab.devices, facts)],
        "run": run,
        "summary": {"lost_commits": len(lost), "most_lost": max((r["lost"] for r in lost), default=0),
                    "longest_loss_ms": max((r["lost_span_ms"] for r in lost), default=0.0),
                    "not_a_suffix": sum(1 for r in lost if not r["suffix"]),
                    "damaged": len(damaged), "first_damage": next((r["index"] for r in damaged), None),
                    "first_loss": next((r["index"] for r in lost), None),
                    "recovery_s": [min(recovery), max(recovery)] if recovery else None,
                    "recoveries_timed": len(recovery)},
        "states": rows,
    }


def rebuild(run_dir: Path, index: int, into: Path, workspace: Path | None = None) -> tuple[Path, str, str | None]:
    """State `index` of a crash run built again from its kept material into `into` (made new): the
    folder, its fingerprint, and the fingerprint the run recorded for it (None: it found nothing)."""
    import json
    import tempfile

    try:
        doc = json.loads((Path(run_dir) / "result.json").read_text())
    except (OSError, ValueError):
        raise UserError(f"{run_dir} is not a crash run's directory (no readable result.json)") from None
    if doc.get("kind") != "crash":
        raise UserError(f"{run_dir} is a {doc.get('kind')!r} result, not a crash run's")
    if not 0 <= index < doc["cuts"]:
        raise UserError(f"--cut {index}: the run made cuts 0 to {doc['cuts'] - 1}")
    if Path(into).exists():
        raise UserError(f"--into {into} exists; give a folder to make")
    material = image.load(Path(run_dir) / "material")
    with tempfile.TemporaryDirectory(prefix="dbtier-rebuild-", dir=workspace) as scratch:
        builder = material.builder(Path(scratch) / "timeline")
        try:
            cut = states.plan(builder.tl, tuple(doc["kinds"]), int(doc["seed"]), index, int(doc["cuts"]),
                              doc["run"].get("after_ns"))
            built = builder.build(cut, Path(into))
            return built, builder.digest(built), doc["states"][index].get("state_sha256")
        finally:
            builder.close()


def verdict(result: dict) -> str:
    s, n = result["summary"], result["cuts"]
    rec = s["recovery_s"]
    took = (f"; recovery took {rec[0]:.2f}-{rec[1]:.2f} s on the emulated devices ({s['recoveries_timed']} "
            f"timed)") if rec else ""
    fault = result["run"].get("fsync_error")
    before = ""
    if fault:
        what = (f"an fsync of {Path(fault['file']).name} failed with EIO (its writeback since its last fsync, "
                f"{fault['lost_writes']:,} write{'s' * (fault['lost_writes'] != 1)} of "
                f"{fault['lost_bytes'] / 1024:,.0f} KiB, never reached the media; {fault['pages']:,} dirty "
                f"page{'s were' if fault['pages'] != 1 else ' was'} marked clean)")
        gone = fault.get("never_written_bytes")  # results made before it was measured have none
        stale = ("" if gone is None else "; at the end the media held all it had written to it" if not gone else
                 f"; at the end, {gone / 1024:,.0f} KiB it had written to it before the failure were on no media "
                 f"(lost, whether or not a check of a cut below finds it)")
        before = (f"{what}: the server {fault.get('stopped') or 'PANICked and recovered'}{stale}. After it, "
                  if fault["panicked"] else
                  f"{what}: the server carried on ({fault['server_said'] or 'no PANIC'}){stale}. After it, ")
    if not s["lost_commits"] and not s["damaged"]:
        return f"{before}0 of {n:,} cuts lost an acknowledged commit or left damage{took}"
    parts = []
    if s["lost_commits"]:
        parts.append(f"{s['lost_commits']:,} of {n:,} cuts lost acknowledged commits (up to {s['most_lost']:,} "
                     f"transactions, {s['longest_loss_ms'] / 1000:.2f} s; the first at cut {s['first_loss']})")
    if s["damaged"]:
        first = next(r for r in result["states"] if r["problems"])
        of = "" if s["lost_commits"] else f" of {n:,} cuts"
        parts.append(f"{s['damaged']:,}{of} left damage (the first at cut {first['index']}: {first['problems'][0]})")
    return before + "; ".join(parts) + took
