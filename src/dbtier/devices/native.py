"""The native libraries: where they are, and the simulator library's C API through ctypes.

The device physics is C (native/iotap/devmodel.c and its dev_*.c kinds); this module only calls it.
Every layout Python shares with C (the trace record, the replay's event and request, the device
specs a state is built from, a PostgreSQL path's parts, op codes, kinds, flag bits, constants) is
the library's own description of itself (dbt_layout_json): this module builds its numpy dtypes and
constants from it when it loads, and declares none by hand."""

from __future__ import annotations

import ctypes
import functools
import json
import math
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dbtier import lifecycle
from dbtier.errors import UserError

IOTAP_LIB = "libdbtier_iotap.so"
SIM_LIB = "libdbtier_sim.so"
ABI_VERSION = 4019002  # devmodel ops 4, state file 19, trace format 2: dbt_abi_version's handshake
LAYOUT_VERSION = 1  # the version of the layout document (dbt_layout_json) this module reads
SPEC_VERSION = 1  # the version of the device specs (struct dbt_device_spec, dbt_pc_config) this module writes


def native_dir() -> Path:
    """The folder holding the built libraries (DBTIER_NATIVE_DIR overrides, for a dev build)."""
    override = os.environ.get("DBTIER_NATIVE_DIR")
    candidates = [Path(override)] if override else []
    candidates.append(Path(__file__).resolve().parent.parent / "_native")
    for folder in candidates:
        if (folder / SIM_LIB).exists() and (folder / IOTAP_LIB).exists():
            return folder
    raise UserError(
        f"dbtier's native libraries are missing (looked in {', '.join(map(str, candidates))}); "
        "reinstall with 'pip install .' from the source tree, which builds them"
    )


def iotap_path() -> Path:
    return native_dir() / IOTAP_LIB


@functools.cache
def lib() -> ctypes.CDLL:
    sim = ctypes.CDLL(str(native_dir() / SIM_LIB))
    sim.dbt_abi_version.restype = ctypes.c_int
    if sim.dbt_abi_version() != ABI_VERSION:
        raise UserError("dbtier's native library does not match this Python package; reinstall dbtier")
    u64, u32, c_int, vp, cp = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p
    sim.dbt_param_table_json.restype = vp
    sim.dbt_layout_json.restype = vp
    sim.dbt_free.argtypes = [vp]
    sim.dbt_sim_new.restype = vp
    sim.dbt_sim_new.argtypes = [u32, vp, cp, ctypes.c_size_t]
    sim.dbt_sim_free.argtypes = [vp]
    sim.dbt_sim_submit.restype = u64
    sim.dbt_sim_submit.argtypes = [vp, u64, c_int, u64, u32, ctypes.POINTER(u64), ctypes.POINTER(u32)]
    arr = np.ctypeslib.ndpointer(dtype=np.uint64, flags="C_CONTIGUOUS")
    sim.dbt_pattern_offsets.argtypes = [u64, c_int, u64, u32, u64, arr]
    sim.dbt_sim_qd1.argtypes = [vp, c_int, arr, u64, u32, u64, u64, u64, arr]
    arr8 = np.ctypeslib.ndpointer(dtype=np.uint8, flags="C_CONTIGUOUS")
    arr32 = np.ctypeslib.ndpointer(dtype=np.uint32, flags="C_CONTIGUOUS")
    sim.dbt_sim_closed.argtypes = [vp, u64, arr8, arr, arr32, arr, c_int, arr, arr]
    sim.dbt_sim_pattern.restype = u64
    sim.dbt_sim_pattern.argtypes = [vp, c_int, c_int, u32, u64, c_int, u64, u64, arr, u64, arr, u64,
                                    ctypes.POINTER(u64)]
    sim.dbt_state_bytes.restype = u64
    sim.dbt_state_bytes.argtypes = [u64]
    sim.dbt_create_state.restype = c_int
    sim.dbt_create_state.argtypes = [cp, u32, vp, u32, vp, cp, ctypes.c_size_t]
    sim.dbt_set_paused.restype = c_int
    sim.dbt_set_paused.argtypes = [cp, c_int, cp, ctypes.c_size_t]
    sim.dbt_set_durlog.restype = c_int
    sim.dbt_set_durlog.argtypes = [cp, c_int, cp, ctypes.c_size_t]
    sim.dbt_set_undilated.restype = c_int
    sim.dbt_set_undilated.argtypes = [cp, u32, cp, ctypes.c_size_t]
    sim.dbt_set_fault.restype = c_int
    sim.dbt_set_fault.argtypes = [cp, c_int, ctypes.c_uint, c_int, cp, cp, ctypes.c_size_t]
    sim.dbt_bench_loop.restype = ctypes.c_int64
    sim.dbt_bench_loop.argtypes = [c_int, c_int, vp, u64, u64, c_int, u64, u64, arr, u64, ctypes.POINTER(u64),
                                   ctypes.POINTER(u64)]
    sim.dbt_set_credits.restype = c_int
    sim.dbt_set_credits.argtypes = [cp, ctypes.c_double, u64, cp, ctypes.c_size_t]
    sim.dbt_sim_set_credits.argtypes = [vp, ctypes.c_double, u64]
    sim.dbt_clear_page_cache.restype = c_int
    sim.dbt_clear_page_cache.argtypes = [cp, cp, ctypes.c_size_t]
    sim.dbt_max_devices.restype = c_int
    sim.dbt_chunk_map.restype = ctypes.c_int64
    sim.dbt_chunk_map.argtypes = [cp, vp, u64, vp, cp, ctypes.c_size_t]
    sim.dbt_replay_attach.restype = vp
    sim.dbt_replay_attach.argtypes = [cp, cp, ctypes.c_size_t]
    sim.dbt_replay_detach.argtypes = [vp]
    sim.dbt_pg_path.argtypes = [cp, vp]
    sim.dbt_replay_layout.restype = c_int
    sim.dbt_replay_layout.argtypes = [vp, vp, u64, vp, u64, cp, ctypes.c_size_t]
    sim.dbt_replay_run.restype = c_int
    sim.dbt_replay_run.argtypes = [vp, vp, u64, u64, u64, ctypes.c_double, c_int, u32, vp, ctypes.POINTER(c_int), vp,
                                   vp, vp, ctypes.POINTER(vp), ctypes.POINTER(u64), cp, ctypes.c_size_t]
    sim.dbt_replay_events.argtypes = [vp, u64, vp, vp, vp, vp]
    sim.dbt_objio_create.restype = vp
    sim.dbt_objio_destroy.argtypes = [vp]
    sim.dbt_objio_clear.argtypes = [vp]
    sim.dbt_objio_add_records.argtypes = [vp, vp, u64]
    sim.dbt_objio_table.restype = ctypes.c_int64
    sim.dbt_objio_table.argtypes = [vp, vp, u64]
    sim.dbt_dump_state.restype = vp
    sim.dbt_dump_state.argtypes = [cp, cp, ctypes.c_size_t]
    return sim


def _take_string(ptr: int) -> str:
    try:
        return ctypes.string_at(ptr).decode()
    finally:
        lib().dbt_free(ptr)


@functools.cache
def param_table() -> dict:
    """{kind: {"help": str, "params": [{name, unit, default, min, max, help}]}} from the C table."""
    ptr = lib().dbt_param_table_json()
    if not ptr:
        raise MemoryError("the device parameter table could not be written")
    return json.loads(_take_string(ptr))


#: numpy's code for each element type the layout names: unsigned, signed, IEEE double, byte string
_NUMPY_TYPE = {"u": "<u", "i": "<i", "f": "<f", "S": "S"}


@dataclass(frozen=True)
class Layout:
    """Every layout the C side shares with Python, as the library describes it (dbt_layout_json,
    native/iotap/border.c): structs as numpy dtypes with C's offsets, enums, flag bits, the bits of
    a C-owned byte reserved for Python's own marks, and constants. Nothing of it is declared here."""

    doc: dict

    def dtype(self, struct: str) -> np.dtype:
        d = self.doc["structs"][struct]
        formats = []
        for f in d["fields"]:
            code = _NUMPY_TYPE[f["type"]]
            element = f["size"] // f["count"]
            formats.append(f"S{f['size']}" if code == "S" else
                           (f"{code}{element}", (f["count"],)) if f["count"] > 1 else f"{code}{element}")
        return np.dtype({"names": [f["name"] for f in d["fields"]], "formats": formats,
                         "offsets": [f["offset"] for f in d["fields"]], "itemsize": d["size"]})

    def enum(self, name: str) -> dict[str, int]:
        return dict(self.doc["enums"][name])

    def flags(self, byte: str) -> dict[str, int]:
        return dict(self.doc["flags"][byte])

    def reserved(self, byte: str) -> dict[str, int]:
        return dict(self.doc["reserved"][byte])

    def constant(self, name: str) -> int:
        return int(self.doc["constants"][name])


@functools.cache
def layout() -> Layout:
    """The shared layouts, read from the library once."""
    ptr = lib().dbt_layout_json()
    if not ptr:
        raise MemoryError("the native library's layout description could not be written")
    doc = json.loads(_take_string(ptr))
    if doc.get("version") != LAYOUT_VERSION:
        raise UserError("dbtier's native library does not match this Python package; reinstall dbtier")
    return Layout(doc)


def trace_format() -> int:
    """The trace record layout this build writes and reads (native/iotap/trace.h)."""
    return layout().constant("trace_format")


def sync_coverage() -> int:
    """Which waits this build's sync records cover (native/iotap/trace.h: DBT_SYNC_COVERAGE)."""
    return layout().constant("sync_coverage")


def max_devices() -> int:
    """The most devices one emulation has (state.h)."""
    return layout().constant("max_devices")


def state_bytes(page_cache_bytes: int) -> int:
    """The size of a run's shared state file with an emulated page cache of that size (0: none)."""
    return int(lib().dbt_state_bytes(page_cache_bytes))


def _unsigned(value, bits: int, what: str) -> int:
    """A whole number a C field of `bits` unsigned bits holds as it is (never wrapped, never cut)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < 1 << bits:
        raise UserError(f"{what} must be a whole number from 0 to {(1 << bits) - 1}, not {value!r}")
    return int(value)


def device_specs(devices: list[tuple[str, str, str, dict[str, float]]]) -> np.ndarray:
    """(name, kind, folder, parameters) per device, as the library's struct dbt_device_spec: the
    parameters in the kind's option table order, each one the profile does not give at its default.
    The library checks every field (dbt_spec_device) and refuses what it would not take."""
    specs = np.zeros(len(devices), dtype=DEVICE_SPEC)
    for i, (name, kind, folder, params) in enumerate(devices):
        if kind not in DEVICE_KINDS:
            raise UserError(f"unknown device kind '{kind}'; one of {', '.join(DEVICE_KINDS)}")
        table = param_table()[kind]["params"]
        known = {p["name"] for p in table}
        for key in params:
            if key not in known:
                raise UserError(f"{kind} devices have no parameter '{key}'")
        specs[i]["name"] = os.fsencode(name)  # one byte too long: no terminator left, and refused
        specs[i]["dir"] = os.fsencode(str(folder))
        specs[i]["kind"] = DEVICE_KINDS[kind]
        specs[i]["nparams"] = len(table)
        specs[i]["params"][:len(table)] = [float(params.get(p["name"], p["default"])) for p in table]
    return specs


def pc_config(page_cache) -> np.ndarray:
    """A page cache's settings (devices.pagecache.PageCache) as the library's struct dbt_pc_config."""
    pc = np.zeros(1, dtype=PC_CONFIG)
    pc["bytes"] = _unsigned(page_cache.bytes, 64, "the page cache's size")
    for field in ("readahead_kb", "dirty_background_pct", "dirty_pct"):
        pc[field] = _unsigned(getattr(page_cache, field), 32, f"the page cache's {field}")
    pc["dsync_data"] = int(bool(page_cache.dsync_data))
    return pc


def create_state(state_path: Path, devices: list[tuple[str, str, str, dict[str, float]]], page_cache=None) -> None:
    """Builds a run's shared state for the devices (see device_specs) and a page cache (None: none)."""
    specs = device_specs(devices)
    pc = pc_config(page_cache) if page_cache is not None else None
    err = ctypes.create_string_buffer(1024)
    if lib().dbt_create_state(str(state_path).encode(), SPEC_VERSION, specs.ctypes.data, len(specs),
                              pc.ctypes.data if pc is not None else None, err, len(err)) != 0:
        raise UserError(err.value.decode())


def set_paused(state_path: Path, paused: bool) -> None:
    """While paused, I/O gets its device layout but is neither delayed, counted nor traced."""
    err = ctypes.create_string_buffer(1024)
    if lib().dbt_set_paused(str(state_path).encode(), int(paused), err, len(err)) != 0:
        raise UserError(err.value.decode())


def set_durability_log(state_path: Path, on: bool) -> None:
    """The durability log (native/iotap/durlog.h) is kept from now, or no more."""
    err = ctypes.create_string_buffer(1024)
    if lib().dbt_set_durlog(str(state_path).encode(), int(on), err, len(err)) != 0:
        raise UserError(err.value.decode())


def set_undilated(state_path: Path, pid: int) -> None:
    """The process `pid` (0: none) belongs to the measurement: --cpu-scale does not slow it (state.h)."""
    err = ctypes.create_string_buffer(1024)
    if lib().dbt_set_undilated(str(state_path).encode(), pid, err, len(err)) != 0:
        raise UserError(err.value.decode())


def set_fsync_error(state_path: Path, device: int, nth: int = 1, pg_class: str | None = None,
                    suffix: str = "") -> None:
    """From now, the nth fsync or fdatasync of a regular file on `device` (its index; of pg_class, one
    of pgpath.h's classes, if given; whose path ends with suffix, if given) fails with EIO, its dirty
    pages marked clean (state.h); device -1 disarms it. What it did is in dump_state's fault."""
    err = ctypes.create_string_buffer(1024)
    cls = -1 if pg_class is None else _LAYOUT.enum("pg_class")[pg_class]
    if lib().dbt_set_fault(str(state_path).encode(), int(device), int(nth), cls, suffix.encode(), err,
                           len(err)) != 0:
        raise UserError(err.value.decode())


def clear_page_cache(state_path: Path) -> None:
    """Empties the emulated page cache: a cold start."""
    err = ctypes.create_string_buffer(1024)
    if lib().dbt_clear_page_cache(str(state_path).encode(), err, len(err)) != 0:
        raise UserError(err.value.decode())


def set_credits(state_path: Path, fraction: float, at_ns: int = 0) -> None:
    """Every capped volume's burst credits set to `fraction` of a full bucket, refilling from
    `at_ns` (0: now): what the measured interval starts with."""
    err = ctypes.create_string_buffer(1024)
    if lib().dbt_set_credits(str(state_path).encode(), fraction, at_ns, err, len(err)) != 0:
        raise UserError(err.value.decode())


def dump_state(state_path: Path) -> dict:
    err = ctypes.create_string_buffer(1024)
    ptr = lib().dbt_dump_state(str(state_path).encode(), err, len(err))
    if not ptr:
        raise UserError(err.value.decode())
    return json.loads(_take_string(ptr))


def chunk_bytes() -> int:
    """Files get device space in chunks of this many bytes, in order of first touch (state.h)."""
    return layout().constant("chunk_bytes")


def chunk_map(state_path: Path) -> tuple[np.ndarray, list[int]]:
    """Where every file's 1 MiB chunks lie on their device: rows of (file index, chunk, byte address),
    and each device's allocation cursor (what a replay needs to lay the files out the same way)."""
    err = ctypes.create_string_buffer(1024)
    cursors = np.zeros(max_devices(), dtype=np.uint64)
    cap = 4096
    while True:
        out = np.empty((cap, 3), dtype=np.uint64)
        n = lib().dbt_chunk_map(str(state_path).encode(), out.ctypes.data, cap, cursors.ctypes.data, err, len(err))
        if n < 0:
            raise UserError(err.value.decode())
        if n <= cap:
            return out[:n], [int(c) for c in cursors]
        cap = int(n) + 1024  # files grew meanwhile: room for the count and some


def pattern_offsets(seed: int, random: bool, span: int, block: int, n: int) -> np.ndarray:
    out = np.empty(n, dtype=np.uint64)
    lib().dbt_pattern_offsets(seed, int(random), span, block, n, out)
    return out


def bench_loop(fd: int, reading: bool, buf_addr: int, bs: int, blocks: int, random: bool, seed: int,
               runtime_s: float, cap: int) -> tuple[np.ndarray, int, int]:
    """iobench's timed loop, in C: (latencies ns, bytes moved, loop time ns)."""
    lat = np.empty(cap, dtype=np.uint64)
    moved, elapsed = ctypes.c_uint64(), ctypes.c_uint64()
    n = lib().dbt_bench_loop(fd, int(reading), buf_addr, bs, blocks, int(random), seed, int(runtime_s * 1e9), lat, cap,
                             ctypes.byref(moved), ctypes.byref(elapsed))
    if n < 0:
        raise OSError(-n, os.strerror(-n))
    return lat[:n], moved.value, elapsed.value


class Model:
    """One device model on the heap: submit requests at chosen times, read back completions."""

    def __init__(self, kind: str, params: dict[str, float]):
        err = ctypes.create_string_buffer(1024)
        spec = device_specs([("model", kind, "/", params)])
        self._h = lib().dbt_sim_new(SPEC_VERSION, spec.ctypes.data, err, len(err))
        if not self._h:
            raise UserError(err.value.decode())

    def __del__(self):
        if getattr(self, "_h", None):
            lib().dbt_sim_free(self._h)
            self._h = None

    def set_credits(self, fraction: float, at_ns: int = 0) -> None:
        """Its burst credits (a capped volume's) set to `fraction` of a full bucket as of at_ns."""
        lib().dbt_sim_set_credits(self._h, fraction, at_ns)

    def submit(self, arrival_ns: int, op: int, addr: int, length: int) -> tuple[int, int]:
        """Returns (service start, completion) in ns."""
        start = ctypes.c_uint64()
        done = lib().dbt_sim_submit(self._h, arrival_ns, op, addr, length, ctypes.byref(start), None)
        return start.value, done

    def qd1(self, op: int, offsets: np.ndarray, block: int, base_addr: int = 0, t0: int = 0, gap_ns: int = 0) -> np.ndarray:
        """Latencies (ns) of offsets served one at a time, each issued gap_ns after the last completed."""
        offsets = np.ascontiguousarray(offsets, dtype=np.uint64)
        lat = np.empty(len(offsets), dtype=np.uint64)
        lib().dbt_sim_qd1(self._h, op, offsets, len(offsets), block, base_addr, t0, gap_ns, lat)
        return lat

    def closed(self, ops: np.ndarray, addrs: np.ndarray, lengths: np.ndarray, gaps: np.ndarray | None = None,
               jobs: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """A request list served by `jobs` closed-loop workers, each taking the next request gaps[i]
        ns after the one it completed: (issue, completion) times in ns, in list order."""
        n = len(ops)
        ops = np.ascontiguousarray(ops, dtype=np.uint8)
        addrs = np.ascontiguousarray(addrs, dtype=np.uint64)
        lengths = np.ascontiguousarray(lengths, dtype=np.uint32)
        gaps = np.ascontiguousarray(np.zeros(n) if gaps is None else gaps, dtype=np.uint64)
        issue, done = np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64)
        lib().dbt_sim_closed(self._h, n, ops, addrs, lengths, gaps, jobs, issue, done)
        return issue, done


def _wait_uninterrupted(finished: threading.Event) -> None:
    """Waits for the event, whatever further signals arrive meanwhile (their handlers may raise)."""
    while not finished.is_set():
        try:
            finished.wait()
        except BaseException:  # a second Ctrl-C: the loop is stopping already, so wait on
            continue


def _pg_path(path: str) -> tuple[np.void, bytes]:
    raw = os.fsencode(path)
    out = np.zeros(1, dtype=PG_PATH)
    lib().dbt_pg_path(raw, out.ctypes.data)
    return out[0], raw


def pg_path(path: str) -> dict:
    """What a PostgreSQL file is, from its path, by the grammar the interposer uses (pgpath.c):
    {"class": relation, fsm, vm, wal, temp or other; "tablespace": pg_global, pg_default or a
    tablespace's location; "database", "relfilenode", "segment": ints, or None}."""
    p, raw = _pg_path(path)
    space = _PG_SPACES[int(p["space"])]
    if space == "location":
        space = os.fsdecode(raw[:int(p["space_len"])])
    return {"class": _PG_CLASSES[int(p["cls"])], "tablespace": None if space == "none" else space,
            "database": None if p["database"] < 0 else int(p["database"]),
            "relfilenode": None if p["relfilenode"] < 0 else int(p["relfilenode"]),
            "segment": None if p["segment"] < 0 else int(p["segment"])}


def dsync_scope(path: str) -> bool:
    """A database file (relation fork or segment, WAL, SLRU), which a dsync device writes through;
    the rule is the interposer's own (pgpath.c)."""
    return bool(_pg_path(path)[0]["dsync"])


def sim_pattern(model: "Model", op: int, random: bool, block: int, span: int, jobs: int, seed: int,
                runtime_s: float, cap: int) -> tuple[np.ndarray, np.ndarray, int]:
    """iobench's loop through the model alone in simulated time: (first `cap` latencies ns,
    completions per second, bytes moved)."""
    nsec = max(1, math.ceil(runtime_s))
    lat, per_s, moved = np.empty(cap, dtype=np.uint64), np.empty(nsec, dtype=np.uint64), ctypes.c_uint64()
    n = lib().dbt_sim_pattern(model._h, op, int(random), block, span, jobs, seed, int(runtime_s * 1e9), lat, cap,
                              per_s, nsec, ctypes.byref(moved))
    return lat[: min(n, cap)], per_s, moved.value


class Replay:
    """The offline replay (native/iotap/replay.c) on a state file made for it: lay the files out, then
    replay streams of events through the emulation core in simulated time."""

    def __init__(self, state_path: Path):
        err = ctypes.create_string_buffer(1024)
        self.state_path = state_path
        self._h = lib().dbt_replay_attach(str(state_path).encode(), err, len(err))
        if not self._h:
            raise UserError(err.value.decode())

    def close(self) -> None:
        if getattr(self, "_h", None):
            lib().dbt_replay_detach(self._h)
            self._h = None

    __del__ = close

    def layout(self, files: np.ndarray, chunks: np.ndarray) -> None:
        """files: rows of (file index, device, dsync scope: see dsync_scope); chunks: rows of (file
        index, device, chunk, address)."""
        files = np.ascontiguousarray(files, dtype=np.uint64)
        chunks = np.ascontiguousarray(chunks, dtype=np.uint64)
        err = ctypes.create_string_buffer(1024)
        if lib().dbt_replay_layout(self._h, files.ctypes.data, len(files), chunks.ctypes.data, len(chunks), err,
                                   len(err)) != 0:
            raise UserError(err.value.decode())

    def run(self, events: np.ndarray, recorded_from: int, replay_from: int, cpu_scale: float = 1.0, *,
            same_devices=None, objects: "ObjectIO | None" = None, requests: bool = True,
            out: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """Replays the events (REPLAY_EVENT, grouped by stream) of an interval recorded from
        `recorded_from`, starting the replay at `replay_from`; returns each event's replayed start,
        end and outcome flags, and the device requests issued (REPLAY_REQUEST; None unless
        `requests`). same_devices: None, the events are placed already (their dev and late_ns as
        given); else the replay places each call on its file's device in this state's layout and
        keeps a call's recorded lateness only where it stays on a device of same_devices (the
        recorded devices whose profile the prediction keeps). objects: counts the interval's I/O per
        file and device as it runs. out: arrays of len(events) (uint64, uint64, uint8) to write the
        starts, ends and flags to (a caller replaying the same events again keeps them)."""
        events = np.ascontiguousarray(events, dtype=REPLAY_EVENT)
        n = len(events)
        if out is None:
            out = np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint8)
        start, end, flags = out
        if not (len(start) == len(end) == len(flags) == n and start.dtype == end.dtype == np.uint64
                and flags.dtype == np.uint8 and all(a.flags.c_contiguous and a.flags.writeable for a in out)):
            raise ValueError("the output arrays are not one writable uint64, uint64 and uint8 array per event")
        mask = 0
        for d in same_devices or ():
            mask |= 1 << int(d)
        place = same_devices is not None
        reqs, nreqs = ctypes.c_void_p(), ctypes.c_uint64()
        err = ctypes.create_string_buffer(1024)
        cancel = ctypes.c_int(0)
        outcome: list[int] = []
        finished = threading.Event()

        def replay() -> None:
            try:
                # A signal the process gets goes to a thread that does not block it: not this one, so
                # the main thread's wait is cut short and its handler runs.
                signal.pthread_sigmask(signal.SIG_BLOCK, lifecycle.ENDING_SIGNALS)
                outcome.append(lib().dbt_replay_run(self._h, events.ctypes.data, n, recorded_from, replay_from,
                                                    cpu_scale, int(place), mask, objects._h if objects else None,
                                                    ctypes.byref(cancel), start.ctypes.data, end.ctypes.data,
                                                    flags.ctypes.data, ctypes.byref(reqs) if requests else None,
                                                    ctypes.byref(nreqs), err, len(err)))
            finally:
                finished.set()

        # The C loop runs in a thread of its own (ctypes lets go of the GIL), so that this thread, the
        # main one, still takes Ctrl-C and SIGTERM: it raises the flag the loop looks at, waits for the
        # loop to notice (a few thousand events at most), and only then lets the interrupt go on, so
        # nothing the loop uses (the state, these arrays) is freed under it. An Event, not join(): a
        # join() cut short by a signal marks a thread that still runs as ended (CPython's bpo-45274 fix).
        threading.Thread(target=replay, name="dbtier replay", daemon=True).start()
        try:
            finished.wait()
        except BaseException:
            cancel.value = 1
            _wait_uninterrupted(finished)
            if reqs.value:
                lib().dbt_free(reqs.value)
            raise
        rc = outcome[0]
        try:
            if rc == -2:  # cancelled by someone else's flag: only an interrupt sets it
                raise KeyboardInterrupt
            if rc != 0:
                raise UserError(err.value.decode())
            issued = None
            if requests:
                issued = np.empty(nreqs.value, dtype=REPLAY_REQUEST)
                if nreqs.value:
                    ctypes.memmove(issued.ctypes.data, reqs.value, nreqs.value * REPLAY_REQUEST.itemsize)
        finally:
            if reqs.value:
                lib().dbt_free(reqs.value)
        return start, end, flags, issued


def replay_events(records: np.ndarray, stream: np.ndarray, dep: np.ndarray, guard: np.ndarray) -> np.ndarray:
    """The replay's events (REPLAY_EVENT) of trace records, each in its stream with its dependency and
    guard, as native/iotap/replay.h says a replay takes a record."""
    records = np.ascontiguousarray(records, dtype=_LAYOUT.dtype("trace_rec"))
    n = len(records)
    stream, dep, guard = (np.ascontiguousarray(a, dtype=np.int64) for a in (stream, dep, guard))
    if not len(stream) == len(dep) == len(guard) == n:
        raise ValueError("one stream, dependency and guard per record")
    out = np.empty(n, dtype=REPLAY_EVENT)
    lib().dbt_replay_events(records.ctypes.data, n, stream.ctypes.data, dep.ctypes.data, guard.ctypes.data,
                            out.ctypes.data)
    return out


class ObjectIO:
    """The interval's I/O per file and device (native/iotap/objio.c): counted from a live run's trace
    records (add_records), or by a replay as it runs (Replay.run's objects); rows() gives them as
    OBJIO_ROW, the files in the order first met, each file's devices in index order."""

    def __init__(self):
        self._h = lib().dbt_objio_create()
        if not self._h:
            raise MemoryError("no memory to count I/O per object")

    def close(self) -> None:
        if getattr(self, "_h", None):
            lib().dbt_objio_destroy(self._h)
            self._h = None

    __del__ = close

    def clear(self) -> None:
        """Empty again, for another interval (its memory kept)."""
        lib().dbt_objio_clear(self._h)

    def add_records(self, records: np.ndarray) -> None:
        """Trace records (measure.trace.RECORD), each as its kind says."""
        records = np.ascontiguousarray(records, dtype=_LAYOUT.dtype("trace_rec"))
        lib().dbt_objio_add_records(self._h, records.ctypes.data, len(records))

    def rows(self) -> np.ndarray:
        n = lib().dbt_objio_table(self._h, None, 0)
        out = np.zeros(max(n, 0), dtype=OBJIO_ROW)
        if n > 0:
            n = lib().dbt_objio_table(self._h, out.ctypes.data, len(out))
        if n < 0:
            raise MemoryError("no memory to count I/O per object")
        return out


#: the names other modules use, built from the library's description when this module loads
_LAYOUT = layout()
_DEVICE_OPS = _LAYOUT.enum("device_op")
OP_READ, OP_WRITE, OP_FLUSH = _DEVICE_OPS["read"], _DEVICE_OPS["write"], _DEVICE_OPS["flush"]
#: struct dbt_replay_event and struct dbt_replay_request (native/iotap/replay.h)
REPLAY_EVENT = _LAYOUT.dtype("replay_event")
REPLAY_REQUEST = _LAYOUT.dtype("replay_request")
#: struct dbt_objio_row (native/iotap/objio.h): one file's I/O on one device
OBJIO_ROW = _LAYOUT.dtype("objio_row")
#: struct dbt_device_spec and struct dbt_pc_config (native/iotap/state.h): what a state is built from
DEVICE_SPEC = _LAYOUT.dtype("device_spec")
PC_CONFIG = _LAYOUT.dtype("pc_config")
DEVICE_KINDS = _LAYOUT.enum("device_kind")
#: what can hold a volume's request back (enum dbt_limit): name -> index, in the library's order
DEVICE_LIMITS = _LAYOUT.enum("device_limit")
#: struct dbt_pg_path (native/iotap/pgpath.h) and the names of its values
PG_PATH = _LAYOUT.dtype("pg_path")
_PG_CLASSES = {code: name for name, code in _LAYOUT.enum("pg_class").items()}
_PG_SPACES = {code: name for name, code in _LAYOUT.enum("pg_space").items()}
