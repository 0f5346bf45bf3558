"""A prediction: the recorded run's course replayed, interval by interval, on a state of its own
(the scenario's devices and page cache, the recorded file layout), and each measured phase's figures
computed by the same code a live run uses (measure.emulated), in the same shape (measure.result)."""

from __future__ import annotations

import functools
import re
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from dbtier import lifecycle
from dbtier.devices import native
from dbtier.engines.mariadb import measure as mariadb_measure
from dbtier.devices.pagecache import PageCache
from dbtier.devices.session import Device, Session
from dbtier.measure import emulated, trace
from dbtier.measure.result import PhaseResult
from dbtier.prediction import events as event_streams
from dbtier.prediction import latency
from dbtier.prediction.recording import Recording
from dbtier.crash import safety
from dbtier.prediction.scenario import Scenario, file_devices, file_identities, mariadb_names
from dbtier.workspace import Workspace

#: processes whose work does not decide when a measured interval ends (the clients' backends do)
BACKGROUND = {"postmaster", "dbtier wait sampler", "checkpointer", "background writer", "walwriter", "io worker",
              "autovacuum launcher", "autovacuum worker", "logical replication launcher", "archiver",
              "walsummarizer", "walreceiver", "walsender", "startup", "slotsync worker"}
#: on a threaded server (an interval that names its threads): the threads that serve a client's
#: connection (MariaDB's; engines/mariadb/measure.py), and one the interval does not name (a connection
#: that came and went within it); every other thread is the server's own
CLIENT_THREADS = {mariadb_measure.CLIENT_THREAD, None}
#: a threaded server's pool workers, whose tasks do not wait for each other (events.prepare)
POOL_THREADS = {mariadb_measure.POOL_THREAD}
_PER_SECOND = re.compile(r"(_per_s|^tps|^tpm|^nopm)$")
_PER_ITEM = re.compile(r"^(ms|us|s)_per_")
_TXN_RATE = re.compile(r"^(tps|tpm|nopm)$")


@dataclass
class Prediction:
    recording: Recording
    scenario: Scenario
    phases: list[dict]  # per measured phase: its name, its recorded figures, its predicted ones
    calls: int
    events: int
    replay_s: float   # the whole prediction once the trace was read: streams built, replayed, figures computed
    engine_s: float   # the replay itself (native/iotap/replay.c)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        s = self.scenario
        return {
            "kind": "prediction", "run_dir": str(self.recording.run_dir),
            "workload": self.recording.result.get("workload"),
            "scenario": {"devices": [{"name": n, "profile": p.name, "kind": p.kind} for n, p in s.devices],
                         "placement": s.placement.describe() if s.placement else "as recorded",
                         "page_cache_bytes": s.page_cache_bytes, "cpu_scale": s.cpu_scale,
                         "credits": self.recording.lab.credits if s.credits is None else s.credits},
            "phases": self.phases,
            "replay": {"events": self.events, "calls": self.calls, "seconds": self.replay_s,
                       "engine_seconds": self.engine_s,
                       "calls_per_s": self.calls / self.replay_s if self.replay_s > 0 else None,
                       "engine_calls_per_s": self.calls / self.engine_s if self.engine_s > 0 else None},
            "notes": self.notes,
            # what the predicted layout risks at a power cut, beside the speed it buys (crash/safety.py)
            "not_crash_safe": safety.risks({
                "settings": (self.recording.result.get("lab") or {}).get("settings") or {},
                "devices": [{"name": n, "kind": p.kind, "params": p.params} for n, p in s.devices]}),
        }


def _recorded_file_devices(records: np.ndarray) -> dict[int, int]:
    io = np.flatnonzero((records["kind"] != trace.SYNC) & (records["file"] >= 0))  # (columns, not records, copied)
    files, first = np.unique(records["file"][io], return_index=True)
    return {int(f): int(d) for f, d in zip(files, records["dev"][io[first]])}


def _layout(rec: Recording, scenario: Scenario, placed: dict[int, int], recorded: dict[int, int],
            dsync: dict[int, bool]):
    """Where each file's chunks lie on its disk in the predicted placement. As a fresh run would have
    laid them out: on each disk, the chunks of the files that stay keep their recorded order, closed
    up where files moved away left space; files moved onto a disk follow, in their recorded order.
    dsync: file index -> its dsync scope (native.dsync_scope of its path), filled as files are met."""
    chunk_bytes = int(rec.layout["chunk_bytes"])
    cursors = [0] * len(scenario.devices)
    rows = []
    chunks = sorted((int(a), int(f), int(c)) for f, c, a in rec.layout["chunks"] if int(f) in placed)
    staying = [(a, f, c) for a, f, c in chunks if placed[f] == recorded.get(f, placed[f])]
    moving = [(a, f, c) for a, f, c in chunks if placed[f] != recorded.get(f, placed[f])]
    for dev in range(len(scenario.devices)):  # recorded devices keep their index
        for _a, f, c in sorted(x for x in staying if placed[x[1]] == dev):
            rows.append((f, dev, c, cursors[dev]))
            cursors[dev] += chunk_bytes
    for _a, f, c in sorted(moving, key=lambda x: (recorded.get(x[1], 0), x[0])):
        dev = placed[f]
        rows.append((f, dev, c, cursors[dev]))
        cursors[dev] += chunk_bytes
    for f in placed.keys() - dsync.keys():
        dsync[f] = native.dsync_scope(rec.files.get(f, ""))
    files = np.array([(f, dev, dsync[f]) for f, dev in sorted(placed.items())], dtype=np.uint64).reshape(-1, 3)
    return files, np.array(rows, dtype=np.uint64).reshape(-1, 4)


def _page_cache(rec: Recording, scenario: Scenario) -> PageCache | None:
    """The recorded page cache (its figures checked when the recording was read), or the scenario's size."""
    pc = rec.lab.page_cache
    if scenario.page_cache_bytes is not None:
        return replace(pc or PageCache(0), bytes=scenario.page_cache_bytes)
    return pc


def _scaled_rates(rates: dict, ratio: float, span: float) -> dict:
    """A phase's rates at the predicted elapsed (ratio = predicted / recorded): per-second figures
    divide by it, per-item times multiply; what is neither is not a prediction and is left out.
    Transaction rates (tpm, NOPM, tps) were counted over the client's own run, not the measured
    interval around it: they scale by the client processes' span (span = replayed / recorded)."""
    out = {}
    for key, value in (rates or {}).items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if _TXN_RATE.search(key):
            out[key] = value / span
        elif _PER_SECOND.search(key):
            out[key] = value / ratio
        elif _PER_ITEM.search(key):
            out[key] = value * ratio
    return out


@dataclass
class _Ending:
    """What decides when a measured interval ends in a replay (see _ending), taken from the
    recording once: the client processes' backends' last events."""
    last: np.ndarray      # each such stream's last event
    within: np.ndarray    # it ended within the interval (else it runs past the edge: counted up to it)
    rest: np.ndarray      # from its recorded start to the interval's end
    near: np.ndarray      # it ended near the latest of them (within the window)
    slack: np.ndarray     # what came after it recorded, to the interval's end

    def shift(self, start: np.ndarray, end: np.ndarray, t1_ns: int, shift: int) -> int:
        replayed = np.where(self.within, end[self.last].astype(np.int64),
                            start[self.last].astype(np.int64) + self.rest)
        latest = max(int((replayed[self.near] + self.slack[self.near]).max()), int(replayed.max()))
        return latest - t1_ns - shift


@dataclass
class _Span:
    """The client's main work (see _span), from the recording once: its backends' first
    and last calls, and the time from the first to the last, recorded."""
    first: np.ndarray
    last: np.ndarray
    recorded: int

    def ratio(self, start: np.ndarray, end: np.ndarray) -> float | None:
        # each stream's events are replayed one after another (each starts no sooner than the one
        # before it ended), so its first call starts first and its last call ends last
        replayed = int(end[self.last].max()) - int(start[self.first].min())
        return replayed / self.recorded if self.recorded > 0 and replayed > 0 else None


@dataclass
class _Interval:
    step: dict                         # the timeline's entry
    clients: np.ndarray                # per stream: it served the client (a backend, a connection's thread)
    streams: event_streams.Streams     # prepared once, placed by each replay
    calls: int = 0                     # the calls among its events
    ending: _Ending | None = None      # a measured interval's: what decides its end
    span: _Span | None = None          # and its client's main work
    transactions: latency.Placed | None = None  # and the transactions its client timed
    _out: tuple | None = None          # the replay's starts, ends and flags: written anew by each replay

    def outputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._out is None:
            n = len(self.streams.events)
            self._out = (np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint8))
        return self._out


class Predictor:
    """A recording made ready for many questions: its intervals' event streams are prepared once,
    and each prediction places them and replays (advise asks hundreds). Each replay's state lives in a
    claim of the workspace (the default one unless given), removed when the prediction ends; a
    prediction killed outright leaves its claim to the next command's reaper."""

    def __init__(self, rec: Recording, workspace: Workspace | None = None):
        self.rec = rec
        self.workspace = workspace
        self.recorded_dev = {**rec.file_devices, **_recorded_file_devices(rec.records)}
        self.identities = file_identities(rec, self.recorded_dev)
        self.counter: native.ObjectIO | None = None  # the replay's I/O per file and device, made once
        self.named: dict[int, tuple[str, str]] = {}  # file index -> (object, kind), as files are named
        self.name_of = mariadb_names(rec) if rec.lab.engine == "mariadb" else None  # another engine's naming
        self.dsync: dict[int, bool] = {}  # file index -> its dsync scope, as files are laid out
        self.timeline: list[_Interval | dict] = []
        for step in rec.meta["timeline"]:
            if step["event"] == "page cache emptied":
                self.timeline.append(step)
                continue
            recs = event_streams.interval_records(rec.records, step["t0_ns"], step["t1_ns"])
            procs, threads = step.get("processes", {}), step.get("threads")
            # a process's backends come one after another (_client_order); a threaded server's connections are threads
            clients = {int(p) for p in np.unique(recs["pid"]) if procs.get(str(int(p))) not in BACKGROUND} \
                if step["event"] == "measured" and threads is None else set()
            pooled = {int(t) for t, name in (threads or {}).items() if name in POOL_THREADS}
            streams = event_streams.prepare(recs, clients, pooled)
            served = _clients(streams, procs, threads) if step["event"] == "measured" else \
                np.zeros(len(streams.pids), dtype=bool)
            item = _Interval(step, served, streams, int(np.count_nonzero(streams.events["kind"] == trace.CALL)))
            if step["event"] == "measured":
                item.ending = _ending(streams, served, step["t1_ns"])
                item.span = _span(streams, served)
                item.transactions = latency.prepare(rec.transactions, streams, served, step["t0_ns"], step["t1_ns"])
            self.timeline.append(item)

    @functools.cached_property
    def host_delays_ns(self) -> np.ndarray:
        """The recording's host delays (_host_delays_ns), worked out when a spread first asks."""
        return _host_delays_ns(self.rec.records)

    def predict(self, scenario: Scenario, figures: bool = True, spread: int = 0, seed: int = 0,
                latency: bool = False) -> Prediction:
        """figures=False: elapsed and rates only (no per-device, per-object or latency figures; with
        latency=True, the transactions' latencies too).
        spread=N: also N replays with each call reaching its device's model earlier or later (seeded)
        by a delay drawn from this recording's own host delays, for the range a live run's races give (see _spread)."""
        if self.workspace is None:
            self.workspace = Workspace.open()
        claim = self.workspace.claim("predict")
        try:
            prediction = self._predict(scenario, claim.inside("replay"), figures, with_latency=latency)
            if spread:
                self._spread(prediction, scenario, claim, spread, seed)
            elif figures and self._races_possible(scenario):
                prediction.notes.append(
                    "several processes used a disk that queues and chooses among their requests: one recording "
                    "is one sample of the order they reached it in; --spread 20 measures how far that moves "
                    "the prediction")
            return prediction
        finally:
            with lifecycle.shielded():
                claim.remove()

    def _races_possible(self, scenario: Scenario) -> bool:
        """Whether a measured interval had more than one client process making calls while the
        recording's or the scenario's devices include a disk (the model that queues and chooses)."""
        disks = any(p.kind == "hdd" for _n, p in [*self.rec.lab.devices, *scenario.devices])
        return disks and any(isinstance(i, _Interval) and np.count_nonzero(i.clients) > 1 for i in self.timeline)

    def _spread(self, prediction: Prediction, scenario: Scenario, claim, n: int, seed: int) -> None:
        """Concurrent processes on a drive that queues and chooses reach it, live, in an order their
        clock readings do not show (a process pre-empted between reading the clock and reaching the
        device arrives later); a few such races change what the drive finds queued and all that follows.
        One recording is one sample of that spread: replayed again with every call heard by the core
        a delay of this host's earlier or later (the recorded wake-up delays), the range is measured."""
        if not len(self.host_delays_ns):
            prediction.notes.append("spread: the recording holds no host delays to move calls by; no spread given")
            return
        rng = np.random.default_rng(seed)
        elapsed: list[list[float]] = []
        for k in range(n):
            folder = claim.inside(f"spread-{k}")
            try:
                moved = self._predict(scenario, folder, False, (rng, self.host_delays_ns))
            finally:
                shutil.rmtree(folder, ignore_errors=True)  # one state at a time (each as large as the first)
            elapsed.append([ph["predicted"]["elapsed_s"] for ph in moved.phases])
        by_phase = np.array(elapsed)
        delays_us = self.host_delays_ns / 1e3
        for i, ph in enumerate(prediction.phases):
            runs = np.append(by_phase[:, i], ph["predicted"]["elapsed_s"])
            ph["spread"] = {"replays": n + 1, "seed": seed,
                            "host_delay_us": {"p50": float(np.percentile(delays_us, 50)),
                                              "p90": float(np.percentile(delays_us, 90))},
                            "elapsed_s": {"min": float(runs.min()), "median": float(np.median(runs)),
                                          "max": float(runs.max())}}

    def _predict(self, scenario: Scenario, tmp: Path, figures: bool, moved=None,
                 with_latency: bool = False) -> Prediction:
        rec = self.rec
        started = time.perf_counter()
        same = {i for i, (_name, p) in enumerate(rec.lab.devices)  # devices whose profile the prediction keeps
                if i < len(scenario.devices) and scenario.devices[i][1].params == p.params
                and scenario.devices[i][1].kind == p.kind}
        placed = file_devices(rec, scenario, self.recorded_dev, self.identities)
        # A device's folder is only a name in the replay's state (nothing is made there): the recorded
        # one (checked: an absolute path, one line), or one of the claim's for an added device.
        devices = [Device(n, rec.lab.dirs.get(n, tmp / "devices" / n), p) for n, p in scenario.devices]
        notes = [f"device {name}: nothing is placed on it, so it changes nothing; --place (for example "
                 f"data={name},wal={name}) moves objects there, and -d {rec.lab.devices[0][0]}=PROFILE gives a "
                 "recorded device another profile"
                 for i, (name, _p) in enumerate(scenario.devices)
                 if i >= len(rec.lab.devices) and i not in set(placed.values())]
        session = Session(devices, tmp, page_cache=_page_cache(rec, scenario))
        session.create()
        replay = native.Replay(session.state_path)
        if figures and self.counter is None:
            self.counter = native.ObjectIO()
        try:
            files, chunks = _layout(rec, scenario, placed, self.recorded_dev, self.dsync)
            replay.layout(files, chunks)
            phases, calls, nevents, engine_s = [], 0, 0, 0.0
            measured = iter(rec.phases)
            shift = 0  # how far behind the recorded clock the replay runs
            replayed = False  # a new state's page cache is empty: nothing to clear before the first interval
            credited = False  # capped volumes' credits are set as the first measured interval begins
            for item in self.timeline:
                if not isinstance(item, _Interval):  # the page cache emptied
                    if replayed:
                        session.clear_page_cache()
                    continue
                replayed = True
                step = item.step
                events = item.streams.events if moved is None else _arrivals_moved(item.streams, *moved).events
                if step["event"] == "measured" and not credited:  # as the live run: when it began measuring
                    session.set_credits(rec.lab.credits if scenario.credits is None else scenario.credits,
                                        step["t0_ns"] + shift)
                    credited = True
                counted = self.counter if figures and step["event"] == "measured" else None
                if counted is not None:
                    counted.clear()
                before = session.snapshot() if counted is not None else None
                t = time.perf_counter()
                # the replay places each call on its file's device in the layout above, as event_streams.place would
                start, end, flags, _ = replay.run(events, step["t0_ns"], step["t0_ns"] + shift, scenario.cpu_scale,
                                                  same_devices=same, objects=counted, requests=False,
                                                  out=item.outputs())
                engine_s += time.perf_counter() - t
                calls += item.calls
                nevents += len(events)
                if step["event"] != "measured":  # warming: its clients are unknown, and it ends when the run says
                    continue
                after = session.snapshot() if figures else None
                step_shift = item.ending.shift(start, end, step["t1_ns"], shift) if item.ending else None
                recorded_phase = next(measured)
                phase_shift = step_shift
                if phase_shift is None:
                    notes.append(f"phase {step['phase']}: no client process did anything the trace holds; its "
                                 "elapsed is given as recorded")
                    phase_shift = 0
                # A later interval starts later when this one ran longer; never earlier: the server's
                # background processes keep their recorded pace (their I/O tail stays where it was),
                # and the lab's own time between intervals does not shrink with the devices.
                shift = max(0, shift + phase_shift)
                elapsed = max(1e-9, recorded_phase["elapsed_s"] + phase_shift / 1e9)
                floor = _schedule_end_s(recorded_phase)
                if floor is not None and elapsed < floor:
                    notes.append(f"phase {step['phase']}: a paced replay ends no sooner than its schedule, "
                                 f"{floor:.3g} s; the devices alone would have let it end at {elapsed:.3g} s")
                    elapsed = floor
                cpu_note = _cpu_bound_note(rec, recorded_phase, elapsed, scenario.cpu_scale)
                if cpu_note:
                    notes.append(f"phase {step['phase']}: {cpu_note}")
                ratio = elapsed / recorded_phase["elapsed_s"]
                span = (item.span.ratio(start, end) if item.span else None) or ratio
                rates = _scaled_rates(recorded_phase.get("rates"), ratio, span)
                cpu_s = recorded_phase.get("server_cpu_s", 0.0) * scenario.cpu_scale
                if not figures:
                    txn = latency.replayed(item.transactions, start, end, scenario.cpu_scale)[0] \
                        if with_latency else None
                    phases.append({"phase": step["phase"], "recorded": _recorded(recorded_phase),
                                   "predicted": {"elapsed_s": elapsed, "server_cpu_s": cpu_s, "rates": rates},
                                   **({"latency": txn} if txn else {})})
                    continue
                emu = emulated.figures(devices, before, after, elapsed, None, rec.files, rec.names,
                                       counted=counted.rows(), named=self.named, name_of=self.name_of)
                predicted = PhaseResult(elapsed, cpu_s, emu.io_wait_s, emu.devices, emu.object_io)
                txn, unplaced = latency.replayed(item.transactions, start, end, scenario.cpu_scale)
                if unplaced:
                    notes.append(f"phase {step['phase']}: {unplaced:,} transactions could not be placed on a "
                                 "backend; their latencies are left out")
                phases.append({"phase": step["phase"], "recorded": _recorded(recorded_phase),
                               "predicted": {**predicted.to_dict(), "rates": rates},
                               **({"latency": txn} if txn else {})})
        finally:
            replay.close()
        return Prediction(rec, scenario, phases, calls, nevents, time.perf_counter() - started, engine_s, notes)


def predict(rec: Recording, scenario: Scenario, workspace: Workspace | None = None, spread: int = 0,
            seed: int = 0) -> Prediction:
    """One question of one recording (Predictor, for many)."""
    return Predictor(rec, workspace).predict(scenario, spread=spread, seed=seed)


def _schedule_end_s(phase: dict) -> float | None:
    """A paced replay's (run replay at a speed, not max) schedule: its sessions open and close at the
    capture's times over the speed, so it ends no sooner, whatever the devices; None for any other."""
    r = (phase.get("metrics") or {}).get("replay") or {}
    speed = r.get("speed")
    if not isinstance(speed, (int, float)) or isinstance(speed, bool) or speed <= 0:
        return None
    return float(r.get("production_span_s") or 0.0) / speed or None


def _host_delays_ns(records: np.ndarray) -> np.ndarray:
    """How late this host let each recorded call go on past what it waited for (its wake-up delay): the
    measured scale of the host's scheduling noise."""
    is_call = records["kind"] == trace.CALL
    calls = {k: records[k][is_call] for k in ("submit_ns", "start_ns", "complete_ns", "end_ns")}
    host_end = np.maximum(calls["start_ns"], calls["submit_ns"])
    waited_until = np.maximum(calls["complete_ns"], host_end)
    return np.where(calls["end_ns"] > waited_until, calls["end_ns"] - waited_until, 0).astype(np.int64)


def _arrivals_moved(streams: event_streams.Streams, rng: np.random.Generator, delays_ns: np.ndarray
                    ) -> event_streams.Streams:
    """Every call reaching the core a host delay earlier or later (never before its own start; the
    replay keeps that), its process's own times unchanged: only the order the core hears of concurrent
    calls moves. (Moving the calls' host time instead lengthened every process: a move later counted
    whole, one earlier at most the call's few microseconds, so on a busy host, whose delays run to
    milliseconds, each replay came out longer than the last by half a delay per call.)"""
    ev = streams.events.copy()
    calls = np.flatnonzero(ev["kind"] == trace.CALL)
    limit = np.iinfo(ev["nudge_ns"].dtype).max
    shift = np.minimum(rng.choice(delays_ns, size=len(calls)), limit) * rng.choice(np.array([-1, 1]), size=len(calls))
    ev["nudge_ns"][calls] = shift
    return replace(streams, events=ev)


def _cpu_bound_note(rec: Recording, phase: dict, elapsed: float, cpu_scale: float) -> str | None:
    """When the CPU the recorded phase used (the server's, scaled, and its client's on the same host)
    would fill most of the host's CPUs over the predicted time: the replay keeps each process's CPU
    time between its calls but does not share CPUs between processes, so a prediction that frees the
    devices may come out shorter than CPUs allow."""
    host = (rec.result.get("lab") or {}).get("host") or {}
    cpus = host.get("cpus")
    server, client = phase.get("server_cpu_s"), phase.get("client_cpu_s") or 0.0
    if not isinstance(cpus, int) or cpus < 1 or not isinstance(server, (int, float)) or elapsed <= 0:
        return None
    demand = server * cpu_scale + (client if isinstance(client, (int, float)) else 0.0)
    floor = demand / cpus
    if floor < 0.7 * elapsed:
        return None
    return (f"its server and client used {demand:.3g} CPU-seconds, at least {floor:.3g} s on the host's {cpus} "
            f"CPUs, against {elapsed:.3g} s predicted: the replay does not share CPUs between processes, so a "
            "CPU-bound run may take longer than predicted")


def _clients(streams, processes: dict, threads: dict | None) -> np.ndarray:
    """Per stream, whether it served the workload's client: a backend process (not one of
    PostgreSQL's own), or on a threaded server a thread its interval names as a connection's, or does
    not name (CLIENT_THREADS)."""
    if threads is not None:
        return np.array([threads.get(str(int(t))) in CLIENT_THREADS for t in streams.tids], dtype=bool)
    return np.array([processes.get(str(int(p))) not in BACKGROUND for p in streams.pids], dtype=bool)


def _ending(streams, clients: np.ndarray, t1_ns: int) -> _Ending | None:
    """How much later (or earlier) the interval ends in the replay than it did recorded, beyond the
    shift it started with (_Ending.shift). The interval ended when its client had its last answer:
    the client processes' backends busy to the end of the recorded interval decide it (a connection
    that closed early does not), each followed by what came after its last event; and no client
    process may end after the predicted end. None: no client process did anything."""
    ev = streams.events
    if not len(ev):
        return None
    last = np.r_[np.flatnonzero(np.diff(ev["stream"])), len(ev) - 1]
    fg = last[clients[ev["stream"][last]]].astype(np.int64)
    if not len(fg):
        return None
    t0, t1 = ev["t0"][fg].astype(np.int64), ev["t1"][fg].astype(np.int64)
    # a last event that runs past the interval (an idle wait for the next query) counts up to its edge
    recorded_end = np.minimum(t1, t1_ns)
    window = max(2_000_000, (t1_ns - int(ev["t0"].min())) // 50)
    return _Ending(fg, t1 <= t1_ns, t1_ns - t0, recorded_end >= int(recorded_end.max()) - window,
                   t1_ns - recorded_end)


def _span(streams, clients: np.ndarray) -> _Span | None:
    """How long the client's main work took replayed against recorded, from its first call to its last,
    is what a rate the workload counted over its own run (tpm) scales by (_Span.ratio). Its main work:
    the backends busy for at least a tenth as long as the longest-busy one (not a connection that only
    set up or checked). None: too few calls to tell."""
    ev = streams.events
    calls = np.flatnonzero(ev["kind"] == trace.CALL)
    if not len(calls):
        return None
    stream = ev["stream"][calls]
    cut = np.r_[0, np.flatnonzero(np.diff(stream)) + 1]  # each stream's calls, in order
    first, last = calls[cut], calls[np.r_[cut[1:], len(calls)] - 1]
    t0, t1 = ev["t0"][calls].astype(np.int64), ev["t1"][calls].astype(np.int64)
    began, ended = np.minimum.reduceat(t0, cut), np.maximum.reduceat(t1, cut)
    client = clients[stream[cut]]
    if not client.any():
        return None
    busy = ended - began
    main = client & (busy >= int(busy[client].max()) // 10)
    if np.diff(np.r_[cut, len(calls)])[main].sum() < 2:
        return None
    return _Span(first[main], last[main], int(ended[main].max()) - int(began[main].min()))


def _recorded(phase: dict) -> dict:
    """The recorded phase's figures that a prediction gives too."""
    keep = ("elapsed_s", "server_cpu_s", "io_wait_s", "emulation_spin_s", "devices", "object_io")
    return {**{k: phase[k] for k in keep if k in phase}, "rates": {
        k: v for k, v in (phase.get("rates") or {}).items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and (_PER_SECOND.search(k) or _PER_ITEM.search(k))}}

