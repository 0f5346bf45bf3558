"""A prediction: the recorded run's course replayed, interval by interval, on a state of its own
(the scenario's devices and page cache, the recorded file layout), and each measured phase's figures
computed by the same code a live run uses (measure.devices, measure.objects)."""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dbtier.devices import native
from dbtier.devices.pagecache import PageCache
from dbtier.devices.session import Device, Session
from dbtier.measure import devices as device_figures
from dbtier.measure import objects, trace
from dbtier.predict import events as event_streams
from dbtier.predict.recording import Recording
from dbtier.predict.scenario import Scenario, file_devices

#: processes whose work does not decide when a measured interval ends (the clients' backends do)
BACKGROUND = {"postmaster", "dbtier wait sampler", "checkpointer", "background writer", "walwriter", "io worker", "autovacuum launcher",
              "autovacuum worker", "logical replication launcher", "archiver", "walsummarizer", "walreceiver",
              "walsender", "startup", "slotsync worker"}
_PER_SECOND = re.compile(r"(/s|tps|tpm|nopm)$", re.IGNORECASE)
_PER_ITEM = re.compile(r"^(ms|us|s)/", re.IGNORECASE)


@dataclass
class PhaseFigures:
    """One measured phase, recorded or predicted: the figures both reports show."""
    phase: str
    elapsed_s: float
    io_wait_s: float
    server_cpu_s: float
    rates: dict = field(default_factory=dict)
    devices: list = field(default_factory=list)
    object_io: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Prediction:
    recording: Recording
    scenario: Scenario
    phases: list[tuple[PhaseFigures, PhaseFigures]]  # (recorded, predicted)
    calls: int
    events: int
    replay_s: float
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        s = self.scenario
        return {
            "kind": "prediction", "run_dir": str(self.recording.run_dir),
            "workload": self.recording.result.get("workload"),
            "scenario": {"devices": [{"name": n, "profile": p.name, "kind": p.kind} for n, p in s.devices],
                         "placement": s.placement.describe() if s.placement else "as recorded",
                         "page_cache_bytes": s.page_cache_bytes, "cpu_scale": s.cpu_scale},
            "phases": [{"phase": r.phase, "recorded": r.to_dict(), "predicted": p.to_dict()} for r, p in self.phases],
            "replay": {"events": self.events, "calls": self.calls, "seconds": self.replay_s,
                       "calls_per_s": self.calls / self.replay_s if self.replay_s > 0 else None},
            "notes": self.notes,
        }


def _recorded_file_devices(records: np.ndarray) -> dict[int, int]:
    io = records[(records["kind"] != trace.SYNC) & (records["file"] >= 0)]
    files, first = np.unique(io["file"], return_index=True)
    return {int(f): int(io["dev"][i]) for f, i in zip(files, first)}


def _layout(rec: Recording, scenario: Scenario, placed: dict[int, int], recorded: dict[int, int]):
    """Files keep their recorded chunks where they stay; a file moved to another disk gets fresh space
    after what that disk holds, in order, as a copy onto it would."""
    chunk_bytes = int(rec.layout["chunk_bytes"])
    cursors = [int(c) for c in rec.layout["cursors"]] + [0] * len(scenario.devices)
    rows = []
    chunks = sorted((int(f), int(c), int(a)) for f, c, a in rec.layout["chunks"])
    for f, c, addr in chunks:
        if f not in placed:
            continue
        dev = placed[f]
        if dev == recorded.get(f, dev):
            rows.append((f, dev, c, addr))
            cursors[dev] = max(cursors[dev], addr + chunk_bytes)
    for f, c, _addr in chunks:
        if f in placed and placed[f] != recorded.get(f, placed[f]):
            dev = placed[f]
            rows.append((f, dev, c, cursors[dev]))
            cursors[dev] += chunk_bytes
    files = np.array(sorted(placed.items()), dtype=np.uint64).reshape(-1, 2)
    return files, np.array(rows, dtype=np.uint64).reshape(-1, 4)


def _page_cache(rec: Recording, scenario: Scenario) -> PageCache | None:
    pc = rec.result["lab"].get("page_cache") or {}
    size = scenario.page_cache_bytes if scenario.page_cache_bytes is not None else pc.get("bytes", 0)
    if not size:
        return None
    return PageCache(int(size), readahead_kb=pc.get("readahead_kb", 128),
                     dirty_background_pct=pc.get("dirty_background_pct", 10), dirty_pct=pc.get("dirty_pct", 20),
                     dsync_data=bool(pc.get("dsync_data", False)))


def _scaled_rates(rates: dict, ratio: float) -> dict:
    """A phase's rates at the predicted elapsed (ratio = predicted / recorded): per-second figures
    divide by it, per-item times multiply; what is neither is not a prediction and is left out."""
    out = {}
    for key, value in (rates or {}).items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if _PER_SECOND.search(key):
            out[key] = value / ratio
        elif _PER_ITEM.search(key):
            out[key] = value * ratio
    return out


def _requests_as_records(reqs: np.ndarray, recs: np.ndarray, flags: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The replay's device requests, and its page-cache hits, as trace records (for objects.object_io)."""
    out = np.zeros(len(reqs), dtype=trace.RECORD)
    out["kind"] = trace.REQUEST
    out["submit_ns"], out["start_ns"], out["complete_ns"] = reqs["arrival"], reqs["start"], reqs["complete"]
    out["end_ns"] = reqs["complete"]
    out["offset"], out["len"], out["file"] = reqs["off"], reqs["len"], reqs["file"]
    out["op"], out["dev"], out["flags"] = reqs["op"], reqs["dev"], reqs["flags"]
    hits = np.flatnonzero((flags & trace.FLAGS["page_cache"]) != 0)
    cached = recs[order][hits].copy()
    cached["flags"] = trace.FLAGS["page_cache"]
    return np.concatenate([out, cached])


def predict(rec: Recording, scenario: Scenario, workdir: Path | None = None, say=lambda _line: None) -> Prediction:
    started = time.perf_counter()
    recorded_dev = _recorded_file_devices(rec.records)
    placed = file_devices(rec, scenario, recorded_dev)
    tmp = Path(tempfile.mkdtemp(prefix="dbtier-predict-", dir=workdir or _scratch()))
    recorded_dirs = {d["name"]: d["dir"] for d in rec.devices}
    devices = [Device(n, Path(recorded_dirs.get(n, tmp / "devices" / n)), p) for n, p in scenario.devices]
    notes: list[str] = []
    try:
        session = Session(devices, tmp, page_cache=_page_cache(rec, scenario))
        session.create()
        replay = native.Replay(session.state_path)
        try:
            files, chunks = _layout(rec, scenario, placed, recorded_dev)
            replay.layout(files, chunks)
            phases, calls, nevents = [], 0, 0
            measured = iter(rec.phases)
            shift = 0  # how far the replay runs ahead (or behind) the recorded clock
            for step in rec.meta["timeline"]:
                if step["event"] == "page cache emptied":
                    session.clear_page_cache()
                    continue
                recs = event_streams.interval_records(rec.records, step["t0_ns"], step["t1_ns"])
                streams = event_streams.build(recs, placed)
                before = session.snapshot()
                start, end, flags, reqs = replay.run(streams.events, step["t0_ns"], step["t0_ns"] + shift,
                                                     scenario.cpu_scale)
                after = session.snapshot()
                calls += int(np.sum(streams.events["kind"] == trace.CALL))
                nevents += len(streams.events)
                step_shift = _interval_shift(streams, start, end, step.get("processes", {}), shift)
                if step["event"] != "measured":
                    shift += step_shift or 0
                    continue
                recorded_phase = next(measured)
                phase_shift = step_shift
                if phase_shift is None:
                    notes.append(f"phase {step['phase']}: no client process did anything the trace holds; its "
                                 "elapsed is given as recorded")
                    phase_shift = 0
                shift += phase_shift
                elapsed = max(1e-9, recorded_phase["elapsed_s"] + phase_shift / 1e9)
                rows = device_figures.rows(devices, after, elapsed, before)
                io = objects.object_io(_requests_as_records(reqs, recs, flags, streams.record_index), rec.files,
                                       scenario.names, rec.names)
                ratio = elapsed / recorded_phase["elapsed_s"]
                phases.append((_recorded(recorded_phase, step["phase"]), PhaseFigures(
                    step["phase"], elapsed, device_figures.wait_s(rows),
                    recorded_phase.get("server_cpu_s", 0.0) * scenario.cpu_scale,
                    _scaled_rates(recorded_phase.get("rates"), ratio), rows, io)))
        finally:
            replay.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Prediction(rec, scenario, phases, calls, nevents, time.perf_counter() - started, notes)


def _interval_shift(streams, start, end, processes: dict, shift: int) -> int | None:
    """How much later (or earlier) the interval ends in the replay: the most any client process's last
    event moved (its recorded end against its replayed one), beyond the shift it started with."""
    ev = streams.events
    if not len(ev):
        return None
    last = np.r_[np.flatnonzero(np.diff(ev["stream"])), len(ev) - 1]
    best = None
    for i in last:
        pid = int(streams.pids[ev["stream"][i]])
        if processes.get(str(pid)) in BACKGROUND:
            continue
        moved = int(end[i]) - int(ev["t1"][i]) - shift
        best = moved if best is None else max(best, moved)
    return best


def _recorded(phase: dict, name: str) -> PhaseFigures:
    return PhaseFigures(name, phase["elapsed_s"], phase.get("io_wait_s", 0.0), phase.get("server_cpu_s", 0.0),
                        {k: v for k, v in (phase.get("rates") or {}).items()
                         if isinstance(v, (int, float)) and not isinstance(v, bool)
                         and (_PER_SECOND.search(k) or _PER_ITEM.search(k))},
                        phase.get("devices", []), phase.get("object_io", []))


def _scratch() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None
