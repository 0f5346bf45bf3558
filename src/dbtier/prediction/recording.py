"""A recorded run, as a prediction reads it: its result, its trace (program calls, device requests,
waits between processes), the file layout on its devices and the course of the run.

A run directory may come from anyone (handed over, damaged, forged), so everything in it is checked
as it is read, before any of it is used: result.json against the published schema, then every
figure a prediction or a live re-run takes from it as the command-line option it stands for would
be (RecordedLab); the trace against its record format (kinds, operations per kind, flags, files and
devices it names, times, offsets and lengths), the file layout and the run's course. Only files
inside the given directory are read; a path written inside a document is never followed. Every
refusal is one line naming the directory, the file and what is wrong."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dbtier.devices import hostfs, native
from dbtier.devices.pagecache import PageCache
from dbtier.devices.profile import Profile
from dbtier.errors import UserError
from dbtier.measure import trace
from dbtier.report import jsonout

#: result.json, and each description a trace carries, is at most this large (a long run's is ~1 MB)
MAX_JSON_BYTES = 64 << 20
#: and nested at most this deep (dbtier's own go six levels down)
MAX_JSON_DEPTH = 64
#: the longest text a document may hold (a path, a setting, an object's name)
MAX_TEXT = 4096
#: what one call may move, one read (or read-ahead advice) may ask, and the furthest byte it may
#: touch (native/iotap/replay.h: beyond them a call is no PostgreSQL's, and one such record could keep
#: the replay busy for hours)
MAX_CALL_BYTES = 1 << 30
MAX_READ_BYTES = 16 << 20
MAX_FILE_END = 1 << 48
#: times are CLOCK_MONOTONIC nanoseconds, far below this (146 years): sums of them cannot wrap
MAX_TIME_NS = 1 << 62
#: a phase's elapsed time in seconds: above 0, below a year
MAX_ELAPSED_S = 366 * 86400.0
#: file indexes the state's file table holds (native/iotap/state.h)
FILE_CAP = 65536
TIMELINE_EVENTS = ("measured", "warm", "page cache emptied")
#: the least sync coverage (native.sync_coverage) a threaded server's recording needs: its timers' and
#: idle pool workers' waits that timed out (a replay of an older one kept them as work, 8 s for 4 clients
#: on flash where 0.9 s was right)
THREADED_SYNC_COVERAGE = 2
_WORKLOAD = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_TRACE_COLUMNS = ("submit_ns", "start_ns", "complete_ns", "end_ns", "offset", "len", "file", "pid", "aux", "tid",
                  "flags", "record", "device", "op")
_TXN_COLUMNS = ("script", "client", "end_ns", "latency_us")


class Damaged(UserError):
    """A file of a run directory that is not what dbtier wrote."""

    def __init__(self, where: Path, what: str):
        super().__init__(f"{where}: {what}; it is damaged or was not written by dbtier (record the run again "
                         "with 'dbtier run --trace')")


# -- reading files inside the directory -------------------------------------------------------------


def inside(folder: Path, name: str) -> Path | None:
    """folder/name if it is a regular file within the folder (a link may lead only to another file in
    it): None where there is none. A link leading out, or anything but a regular file (a pipe would
    block the read forever), is refused."""
    path = folder / name
    if not os.path.lexists(path):
        return None
    try:
        real = path.resolve(strict=True)
        st = real.stat()
    except (OSError, RuntimeError):
        raise UserError(f"{path}: a link that leads nowhere; give the run directory as dbtier wrote it") from None
    if folder.resolve() not in real.parents:
        raise UserError(f"{path} is a link to {real}, outside the run directory; dbtier reads a run directory's "
                        "own files only (copy the file in instead)")
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{path} is not a regular file; give the run directory as dbtier wrote it")
    return path


def _depth(doc) -> int:
    """How deep a parsed document nests (iteratively: a forged one may be deep)."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_JSON_DEPTH:
                return depth
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return deepest


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def parse_json(data: bytes, where: Path):
    """A document dbtier wrote: at most MAX_JSON_BYTES, nested at most MAX_JSON_DEPTH deep, without
    NaN or infinities, every text one line of printable characters and every number within range."""
    if len(data) > MAX_JSON_BYTES:
        raise Damaged(where, f"{len(data):,} bytes, more than any document dbtier writes ({MAX_JSON_BYTES >> 20} MiB)")
    try:
        doc = json.loads(data, parse_constant=_refuse_constant)
    except RecursionError:
        raise Damaged(where, f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # not JSON, not UTF-8, or NaN
        raise Damaged(where, f"not valid JSON ({str(exc)[:120]})") from None
    if _depth(doc) > MAX_JSON_DEPTH:
        raise Damaged(where, f"nested deeper than {MAX_JSON_DEPTH} levels")
    problem = _odd_value(doc)
    if problem:
        raise Damaged(where, problem)
    return doc


def _odd_value(doc) -> str | None:
    """The first text or number no dbtier document holds: a control character (a newline in a name
    would break the one-line messages and the terminal's tables), a huge text, an infinity."""
    stack = [("", doc)]
    while stack:
        key, value = stack.pop()
        if isinstance(value, str):
            if len(value) > MAX_TEXT or _CONTROL.search(value):
                return f"{key or 'a text'} is not one line of at most {MAX_TEXT} printable characters"
        elif isinstance(value, float):
            if not math.isfinite(value):
                return f"{key or 'a number'} is {value}, not a finite number"
        elif isinstance(value, int) and not isinstance(value, bool):
            if not -(1 << 63) <= value < 1 << 64:
                return f"{key or 'a number'} is {str(value)[:30]}..., beyond any figure dbtier writes"
        elif isinstance(value, dict):
            for k, v in value.items():
                if len(k) > MAX_TEXT or _CONTROL.search(k):
                    return f"a key in {key or 'the document'} is not one line of printable characters"
                stack.append((f"{key}.{k}" if key else k, v))
        elif isinstance(value, list):
            stack.extend((f"{key}[{i}]", v) for i, v in enumerate(value))
    return None


def read_json(folder: Path, name: str):
    """folder/name, a JSON document of dbtier's, checked as parse_json does (None: no such file)."""
    path = inside(folder, name)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_JSON_BYTES + 1)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    return parse_json(data, path)


def check_result(doc, path: Path) -> dict:
    """A result document: a JSON object of this schema_version that follows the published schema."""
    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise Damaged(path, "not a dbtier result (no schema_version)")
    jsonout.check_version(doc, path)
    from dbtier.report import schema

    try:
        found = schema.problems(doc)
    except RecursionError:  # parse_json bounds the depth; a validator's recursion is bounded by it too
        raise Damaged(path, "nested too deeply to check") from None
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise Damaged(path, f"does not follow dbtier's result schema: {_short(found[0])}{more}")
    return doc


def _short(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


# -- the recorded lab -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedLab:
    """The recorded run's lab, every figure checked as its command-line option is (--cache,
    --page-cache against this machine's memory, --io-mode, --cpu-scale, --set, --scale-model, each
    --device's profile as a profile file's): what a prediction replays with and what `advise
    --verify` runs again with."""
    cache_bytes: int
    io_mode: str
    page_cache: PageCache | None
    cpu_scale: float
    user_settings: dict[str, str]
    scale_factor: float
    devices: list[tuple[str, Profile]]   # in the recorded order (a trace names devices by index)
    dirs: dict[str, Path]                # each device's recorded folder: a name in the replay's device map
    placement: dict                      # the recorded --place: roles and objects -> device names
    settings: dict[str, str] = field(default_factory=dict)  # the server's settings as the run had them
    credits: float = 1.0                 # capped volumes' burst credits when the measured part began
    engine: str = "postgres"             # the database it ran (engines.ENGINES)

    def options(self, workspace: Path | None = None):
        """The lab options a live run of the recorded workload takes (advise --verify)."""
        from dbtier import engines

        return engines.get(self.engine).lab_options(
            cache_bytes=self.cache_bytes, io_mode=self.io_mode,
            page_cache_bytes=self.page_cache.bytes if self.page_cache else None, sets=dict(self.user_settings),
            workspace=workspace, cpu_scale=self.cpu_scale, credits=self.credits)


def recorded_lab(result: dict, where: Path) -> RecordedLab:
    """The lab of a run's result document (checked against the published schema already), each figure
    checked; `where` names the document in the messages."""
    from dbtier import engines, units
    from dbtier.devices import profile as profiles
    from dbtier.devices.spec import NAME
    from dbtier.experiments import scale_model

    lab = result.get("lab")
    if not isinstance(lab, dict):
        raise Damaged(where, "it has no lab (the devices and settings of the run)")

    def bad(what: str) -> Damaged:
        return Damaged(where, what)

    engine_name = lab.get("engine", "postgres")
    if engine_name not in engines.names():
        raise bad(f"lab.engine is {_short(repr(engine_name), 40)}, not one of {', '.join(engines.names())}")
    engine = engines.get(engine_name)
    memory = hostfs.mem_total()
    cache = lab.get("cache_bytes")
    if not isinstance(cache, int) or isinstance(cache, bool) or cache < engine.min_cache:
        raise bad(f"lab.cache_bytes is {cache!r}, not a database cache {engine.title} can run with (at least "
                  f"{units.size_text(engine.min_cache)})")
    if memory is not None and cache > memory:
        raise bad(f"lab.cache_bytes is {cache:,}, more than this machine's {memory:,} bytes of memory")
    io_mode = lab.get("io_mode")
    if io_mode not in engine.io_modes:
        raise bad(f"lab.io_mode is {io_mode!r}, not one of {', '.join(engine.io_modes)}")
    cpu_scale = lab.get("cpu_scale", 1.0)
    if isinstance(cpu_scale, bool) or not isinstance(cpu_scale, (int, float)) or not 1.0 <= cpu_scale <= 1000.0:
        raise bad(f"lab.cpu_scale is {cpu_scale!r}; a run's --cpu-scale is from 1 to 1000")
    credits = lab.get("credits", 1.0)  # a run before --credits started with them full
    if isinstance(credits, bool) or not isinstance(credits, (int, float)) or not 0.0 <= credits <= 1.0:
        raise bad(f"lab.credits is {credits!r}; a run's --credits is a fraction from 0 to 1")
    page_cache = _page_cache(lab.get("page_cache"), memory, bad)
    scale = lab.get("scale_model") or {}
    factor = scale.get("factor", 1.0) if isinstance(scale, dict) else None
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1.0 <= factor <= scale_model.MAX_FACTOR:
        raise bad(f"lab.scale_model.factor is {factor!r}; --scale-model is from 1 to {scale_model.MAX_FACTOR:g}")
    user = lab.get("user_settings") or {}
    if not isinstance(user, dict) or not all(isinstance(v, str) for v in user.values()):
        raise bad("lab.user_settings is not a map of setting names to their values")
    try:
        sets = engine.parse_settings([f"{k}={v}" for k, v in user.items()])
    except UserError as exc:
        raise UserError(f"{where}: the recorded run carries a setting dbtier would refuse ({exc}); a run dbtier "
                        "wrote cannot carry it: the run directory was altered") from None
    server = lab.get("settings") or {}
    if not isinstance(server, dict) or not all(isinstance(v, str) and len(v) <= 200 for v in server.values()):
        raise bad("lab.settings is not a map of setting names to short values")

    devices = lab.get("devices")
    top = native.lib().dbt_max_devices()
    if not isinstance(devices, list) or not 1 <= len(devices) <= top:
        raise bad(f"lab.devices lists {len(devices) if isinstance(devices, list) else 'no'} devices; a run has 1 to {top}")
    table = native.param_table()
    out, dirs = [], {}
    for i, dev in enumerate(devices):
        name, kind, prof, params = dev.get("name"), dev.get("kind"), dev.get("profile"), dev.get("params") or {}
        if not isinstance(name, str) or not NAME.match(name):
            raise bad(f"lab.devices[{i}].name {name!r} is not a device name (a letter, then up to 30 letters, digits, "
                      "- or _)")
        if name in dirs:
            raise bad(f"lab.devices names {name} twice")
        if kind not in table:
            raise bad(f"device {name}'s kind is {kind!r}, not one of {', '.join(sorted(table))}")
        if not isinstance(prof, str) or not 0 < len(prof) <= 500:
            raise bad(f"device {name}'s profile name is not a short text")
        if not isinstance(params, dict):
            raise bad(f"device {name}'s params are not a map of parameters")
        try:
            checked = profiles.check_params(kind, params, f"device {name}")
        except UserError as exc:
            raise UserError(f"{where}: the recorded profile of {exc} (a profile file would be refused so); the run "
                            "directory was altered") from None
        folder = dev.get("dir")
        if folder is not None and (not isinstance(folder, str) or not folder.startswith("/") or "\t" in folder):
            raise bad(f"device {name}'s dir is not an absolute path")
        dirs[name] = Path(folder) if folder else None
        out.append((name, Profile(prof, kind, "", checked, "the recorded run")))
    if len({d for d in dirs.values() if d is not None}) != len([d for d in dirs.values() if d is not None]):
        raise bad("two devices have the same dir")
    placement = lab.get("placement") or {}
    names = [n for n, _ in out]
    for role in engine.roles:
        if placement.get(role) not in names:
            raise bad(f"lab.placement puts {role} on {placement.get(role)!r}, which is not a device of the run")
    objects = placement.get("objects") or {}
    stray = next((o for o, d in objects.items() if d not in names), None)
    if stray is not None:
        raise bad(f"lab.placement puts {stray} on {objects[stray]!r}, which is not a device of the run")
    return RecordedLab(cache, io_mode, page_cache, float(cpu_scale), sets, float(factor), out,
                       {n: d for n, d in dirs.items() if d is not None}, placement, dict(server), float(credits), engine_name)


def _page_cache(pc, memory: int | None, bad) -> PageCache | None:
    """lab.page_cache: as --page-cache is checked (at least 64kB, within this machine's memory: the
    replay's state holds ~36 bytes a page of it), its read-ahead and dirty limits as the C core takes them."""
    from dbtier.devices.pagecache import MIN_PAGE_CACHE

    if pc is None:
        return None
    if not isinstance(pc, dict):
        raise bad("lab.page_cache is not a page cache's description")

    def whole(key: str, default: int, lo: int, hi: int) -> int:
        v = pc.get(key, default)
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise bad(f"lab.page_cache.{key} is {v!r}; it is from {lo:,} to {hi:,}")
        return v

    size = pc.get("bytes", 0)
    if size == 0:
        return None
    size = whole("bytes", 0, MIN_PAGE_CACHE, memory if memory is not None else 1 << 50)
    readahead = whole("readahead_kb", 128, 4, 65536)
    background = whole("dirty_background_pct", 10, 1, 100)
    dirty = whole("dirty_pct", 20, 1, 100)
    if dirty <= background:
        raise bad(f"lab.page_cache.dirty_pct {dirty} is not above dirty_background_pct {background}")
    dsync = pc.get("dsync_data", False)
    if not isinstance(dsync, bool):
        raise bad("lab.page_cache.dsync_data is not true or false")
    return PageCache(size, readahead, background, dirty, dsync)


def lab_options(rec: "Recording", workspace: Path | None = None):
    """The recorded run's lab options, checked (see RecordedLab): what advise --verify runs with."""
    return rec.lab.options(workspace)


# -- what a prediction reads of result.json beyond the schema -----------------------------------------

_COUNT = {"type": "integer", "minimum": 0}
_BYTES = {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_FILE_END}
_PHASE = {  # every measured phase has these (measure/result.py's PhaseResult)
    "type": "object", "required": ["elapsed_s", "server_cpu_s", "io_wait_s", "devices", "object_io"],
    "properties": {
        "phase": {"type": "string"},
        "elapsed_s": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_ELAPSED_S},
        "server_cpu_s": {"type": "number", "minimum": 0, "maximum": 1e9},
        "io_wait_s": {"type": "number", "minimum": 0},
        "object_io": {"type": "array", "items": {
            "type": "object", "required": ["object", "kind"],
            "properties": {"object": {"type": "string"}, "kind": {"type": "string"},
                           **{k: _COUNT for k in ("reads", "writes", "flushes", "cached_reads", "read_bytes")},
                           "sequential_pct": {"type": ["number", "null"], "minimum": 0, "maximum": 100},
                           "device_s": {"type": "number", "minimum": 0, "maximum": 1e9}}}},
    },
}
#: What predict and advise read of a run's result.json, beyond what the published schema asks of
#: every run (which allows, for instance, an elapsed of 0).
RECORDED_RUN = {
    "type": "object", "required": ["workload", "lab"],
    "properties": {
        "workload": {"type": "string", "pattern": _WORKLOAD.pattern},
        "params": {"type": "object"},
        "objects": {"type": "array", "items": {
            "type": "object", "required": ["object", "kind"],
            "properties": {"object": {"type": "string", "minLength": 1}, "kind": {"type": "string"},
                           "path": {"type": ["string", "null"]}, "table": {"type": ["string", "null"]},
                           "bytes": _BYTES, "total_bytes": _BYTES},
            # a candidate's size: pg_table_size, else pg_relation_size
            "anyOf": [{"required": ["total_bytes"], "properties": {"total_bytes": {"type": "integer"}}},
                      {"required": ["bytes"], "properties": {"bytes": {"type": "integer"}}}]}},
        "catalog_bytes": _BYTES, "wal_bytes": _BYTES,
        "phases": {"type": "array", "minItems": 1, "items": _PHASE},
    },
    "if": {"not": {"required": ["phases"]}}, "then": _PHASE,
}


@functools.cache
def _recorded_validator():
    import jsonschema

    return jsonschema.Draft202012Validator(RECORDED_RUN)


def _check_recorded(result: dict, where: Path) -> None:
    errors = sorted(_recorded_validator().iter_errors(result), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        e = errors[0]
        at = ".".join(str(p) for p in e.absolute_path) or "the document"
        raise Damaged(where, _short(f"{at}: {e.message}"))


# -- the trace ------------------------------------------------------------------------------------


def _description(md: dict, key: bytes, where: Path):
    raw = md.get(key)
    if raw is None:
        return None
    return parse_json(raw, where)


def check_files_table(table, ndev: int, where: Path) -> dict[int, tuple[int, str]]:
    """The trace's file table: [index, device, path] rows, each index once, each device recorded."""
    if not isinstance(table, list):
        raise Damaged(where, "its file table is not a list of [index, device, path]")
    out: dict[int, tuple[int, str]] = {}
    for row in table:
        if not (isinstance(row, list) and len(row) == 3 and _whole(row[0], 0, FILE_CAP - 1)
                and _whole(row[1], 0, ndev - 1) and isinstance(row[2], str)):
            raise Damaged(where, f"its file table has the row {_short(json.dumps(row), 80)}, not [index below "
                          f"{FILE_CAP}, device below {ndev}, path]")
        if row[0] in out:
            raise Damaged(where, f"its file table lists file {row[0]} twice")
        out[row[0]] = (row[1], row[2])
    return out


def _whole(v, lo: int, hi: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def check_layout(layout, files: dict, where: Path) -> dict:
    """layout.json's contents: the C core's chunk size, chunks of known files at aligned addresses."""
    if not isinstance(layout, dict) or not isinstance(layout.get("chunks"), list) \
            or not isinstance(layout.get("cursors"), list):
        raise Damaged(where, "its file layout is not a layout (chunk_bytes, chunks, cursors)")
    chunk = native.chunk_bytes()
    if layout.get("chunk_bytes") != chunk:
        raise Damaged(where, f"its file layout has chunks of {layout.get('chunk_bytes')!r} bytes; dbtier lays "
                      f"files out in {chunk:,}-byte chunks")
    seen = set()
    for row in layout["chunks"]:
        if not (isinstance(row, list) and len(row) == 3 and _whole(row[0], 0, FILE_CAP - 1)
                and _whole(row[1], 0, MAX_FILE_END // chunk) and _whole(row[2], 0, MAX_FILE_END)
                and row[2] % chunk == 0):
            raise Damaged(where, f"its file layout has the chunk {_short(json.dumps(row), 80)}, not [file, chunk, "
                          "aligned address]")
        if row[0] not in files:
            raise Damaged(where, f"its file layout places file {row[0]}, which its file table does not list")
        if (row[0], row[1]) in seen:
            raise Damaged(where, f"its file layout places chunk {row[1]} of file {row[0]} twice")
        seen.add((row[0], row[1]))
    if len(layout["cursors"]) > native.lib().dbt_max_devices() or \
            not all(_whole(c, 0, MAX_FILE_END) for c in layout["cursors"]):
        raise Damaged(where, "its file layout's cursors are not one address per device")
    return layout


def check_timeline(timeline, where: Path) -> list[dict]:
    """The run's course: known events, each interval's end at or after its start, in order."""
    if not isinstance(timeline, list):
        raise Damaged(where, "the run's course (timeline) is not a list of events")
    last = 0
    for i, step in enumerate(timeline):
        event = step.get("event") if isinstance(step, dict) else None
        if event not in TIMELINE_EVENTS:
            raise Damaged(where, f"timeline[{i}] is the event {_short(repr(event), 60)}, not one of "
                          f"{', '.join(TIMELINE_EVENTS)}")
        if event == "page cache emptied":
            t0 = t1 = step.get("t_ns")
        else:
            t0, t1 = step.get("t0_ns"), step.get("t1_ns")
        if not (_whole(t0, 0, MAX_TIME_NS) and _whole(t1, 0, MAX_TIME_NS)):
            raise Damaged(where, f"timeline[{i}] ({event}) has no times in nanoseconds")
        if t1 < t0:
            raise Damaged(where, f"timeline[{i}] ({event}) ends before it begins ({t1:,} < {t0:,} ns)")
        if t0 < last:
            raise Damaged(where, f"timeline[{i}] ({event}) begins before the event before it ended")
        last = t1
        if event == "measured":
            procs, threads = step.get("processes"), step.get("threads", {})
            if not isinstance(step.get("phase"), str) or not isinstance(procs, dict) or \
                    not all(k.isdigit() and isinstance(v, str) for k, v in procs.items()):
                raise Damaged(where, f"timeline[{i}] (measured) names no phase, or its processes are not pid: name")
            if not isinstance(threads, dict) or not all(k.isdigit() and isinstance(v, str) for k, v in threads.items()):
                raise Damaged(where, f"timeline[{i}] (measured): its threads are not thread id: name")
    return timeline


def trace_records(table, names: list[str], where: Path) -> np.ndarray:
    """The records a Parquet trace holds (trace.from_table), once its columns are what dbtier writes."""
    import pyarrow as pa

    for col in _TRACE_COLUMNS:
        if col not in table.column_names:
            raise Damaged(where, f"the trace has no column '{col}'")
        c = table[col]
        if c.null_count:
            raise Damaged(where, f"the trace's column '{col}' has empty values")
        t = c.type.value_type if pa.types.is_dictionary(c.type) else c.type
        text = col in ("record", "device", "op")
        if (text and not pa.types.is_string(t)) or (not text and not pa.types.is_integer(t)):
            raise Damaged(where, f"the trace's column '{col}' holds {c.type}, not what dbtier writes")
    meta = {b"dbtier": json.dumps({"devices": [{"name": n} for n in names]}).encode()}
    try:
        return trace.from_table(table.replace_schema_metadata(meta))
    except UserError as exc:
        raise Damaged(where, str(exc).split(";")[0]) from None
    except (pa.ArrowException, ValueError, OverflowError) as exc:
        raise Damaged(where, f"the trace's values cannot be read ({_short(str(exc), 100)})") from None


def check_records(recs: np.ndarray, files: dict[int, tuple[int, str]], ndev: int, where: Path) -> None:
    """Each record as the format promises it (native/iotap/trace.h): known kinds, operations per kind
    and flags; files the file table lists, on the devices it says; devices the run had; times in
    order and in range; offsets and lengths no call of PostgreSQL's exceeds."""
    def refuse(mask: np.ndarray, what: str) -> None:
        if mask.any():
            i = int(np.argmax(mask))
            raise Damaged(where, f"trace record {i:,} {what}")

    kind, op, flags = recs["kind"], recs["op"], recs["flags"]
    refuse(~np.isin(kind, list(trace.KINDS)), "has an unknown kind")
    sync = kind == trace.SYNC
    io = ~sync
    refuse(io & ~np.isin(op, list(trace.OPS)), "has an unknown operation")
    refuse(sync & ~np.isin(op, list(trace.SYNC_OPS)), "has an unknown wake or sleep")
    refuse(io & ((flags & ~np.uint8(trace.RECORDED_FLAG_BITS)) != 0), "has flags no call or request has")
    refuse(sync & ((flags & ~np.uint8(trace.SYNC_FLAG_BITS)) != 0), "has flags no wake or sleep has")
    refuse(io & (recs["dev"] >= ndev), f"names a device beyond the run's {ndev}")
    known = np.array(sorted(files), dtype=np.int64)
    f = recs["file"].astype(np.int64)
    refuse(io & (f != -1) & ~np.isin(f, known), "names a file its file table does not list")
    if len(known):
        lut = np.full(FILE_CAP, -1, dtype=np.int64)
        lut[known] = [files[int(k)][0] for k in known]
        on = io & (f >= 0) & (f < FILE_CAP)
        refuse(on & (lut[np.clip(f, 0, FILE_CAP - 1)] != recs["dev"]), "puts a file on another device than its "
               "file table does")
    for col in ("submit_ns", "start_ns", "complete_ns", "end_ns"):
        refuse(recs[col] >= MAX_TIME_NS, f"has a {col} beyond any clock's")
    refuse(recs["end_ns"] < recs["submit_ns"], "ends before it was made")
    refuse(io & (recs["start_ns"] < recs["submit_ns"]), "started before it was made")
    request = kind == trace.REQUEST
    refuse(request & (recs["complete_ns"] < recs["start_ns"]), "completed before its service started")
    refuse(np.diff(recs["submit_ns"].astype(np.int64), prepend=0) < 0, "comes before the record before it "
           "(the trace is in the order the calls were made)")
    refuse(io & (recs["len"] > MAX_CALL_BYTES), f"moves more than {MAX_CALL_BYTES >> 30} GiB, more than any call of "
           "PostgreSQL's")
    reads = (kind == trace.CALL) & ((op == 1) | (op == 7))
    refuse(reads & (recs["len"] > MAX_READ_BYTES), f"reads more than {MAX_READ_BYTES >> 20} MiB at once, more than "
           "PostgreSQL reads in one call")
    refuse(io & (recs["offset"] > np.uint64(MAX_FILE_END) - recs["len"].astype(np.uint64)),
           "reaches beyond byte 2^48 of its file")


# -- the recording ----------------------------------------------------------------------------------


@dataclass
class Recording:
    run_dir: Path
    result: dict
    meta: dict
    records: np.ndarray            # trace.RECORD, sorted by submit time
    files: dict[int, str]          # file index -> path
    file_devices: dict[int, int]   # file index -> its device in the recorded run (every file laid out)
    layout: dict                   # chunk_bytes, chunks [[file, chunk, addr]], cursors
    names: dict[tuple[int, int], tuple[str, str]]  # (database oid, relfilenode) -> (name, kind)
    transactions: dict | None = None  # a client's transactions (script, client, end_ns, latency_us), if it timed them
    lab: RecordedLab | None = None    # the recorded lab, checked

    @property
    def measured(self) -> list[dict]:
        return [t for t in self.meta["timeline"] if t["event"] == "measured"]

    @property
    def phases(self) -> list[dict]:
        """The recorded result of each measured phase, in order."""
        return self.result.get("phases") or [self.result]


def _fail(run_dir: Path, why: str) -> UserError:
    return UserError(f"{run_dir}: {why}")


def read_trace(run_dir: Path, names: list[str]):
    """trace.parquet of a run directory, checked: (table, meta, files, layout, records)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = inside(run_dir, "trace.parquet")
    if path is None:
        return None
    try:
        table = pq.ParquetFile(path).read()  # not read_table: its dataset layer imports pandas (0.5 s)
    except (pa.ArrowException, OSError, ValueError) as exc:  # pyarrow raises several kinds for a damaged file
        raise Damaged(path, f"it cannot be read ({_short(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, 100)})") from None
    md = table.schema.metadata or {}
    if b"dbtier" not in md:
        raise _fail(run_dir, "trace.parquet was not written by dbtier (no description in it)")
    meta = _description(md, b"dbtier", path)
    if not isinstance(meta, dict):
        raise Damaged(path, "its description is not a JSON object")
    trace.check_format(meta.get("trace_format", 1), path)
    if "timeline" not in meta or b"dbtier_layout" not in md:
        raise _fail(run_dir, "the trace has no record of the run's course or file layout; record it again with --trace")
    recorded = meta.get("devices")
    if not isinstance(recorded, list) or [d.get("name") if isinstance(d, dict) else None for d in recorded] != names:
        raise Damaged(path, f"the trace's devices are not the run's ({', '.join(names)})")
    files = check_files_table(_description(md, b"dbtier_files", path) or [], len(names), path)
    layout = check_layout(_description(md, b"dbtier_layout", path), files, path)
    check_timeline(meta["timeline"], path)
    run_names = meta.get("names", [])
    if not isinstance(run_names, list) or not all(
            isinstance(r, list) and len(r) == 4 and _whole(r[0], 0, 1 << 32) and _whole(r[1], 0, 1 << 32)
            and isinstance(r[2], str) and isinstance(r[3], str) for r in run_names):
        raise Damaged(path, "its object names are not [database, relfilenode, name, kind] rows")
    records = trace_records(table, names, path)
    check_records(records, files, len(names), path)
    return table, meta, files, layout, records


def read_transactions(run_dir: Path) -> dict | None:
    """transactions.parquet, if the client timed its transactions: each one's script, client, end and
    latency, checked."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = inside(run_dir, "transactions.parquet")
    if path is None:
        return None
    try:
        t = pq.ParquetFile(path).read()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise Damaged(path, f"it cannot be read ({_short(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, 100)})") from None
    for col in _TXN_COLUMNS:
        if col not in t.column_names or t[col].null_count:
            raise Damaged(path, f"it has no column '{col}', or empty values in it")
    try:
        scripts = t["script"].cast("string").to_pylist()
        out = {"script": np.asarray(scripts, dtype=object),
               **{k: t[k].to_numpy() for k in ("client", "end_ns", "latency_us")}}
    except (pa.ArrowException, ValueError) as exc:
        raise Damaged(path, f"its values cannot be read ({_short(str(exc), 100)})") from None
    if any(_CONTROL.search(s) or len(s) > 200 for s in set(scripts)):
        raise Damaged(path, "a script's name is not one line of printable characters")
    for k in ("client", "end_ns"):
        if not np.issubdtype(out[k].dtype, np.integer) or (out[k] < 0).any() or (out[k] >= MAX_TIME_NS).any():
            raise Damaged(path, f"its column '{k}' holds values no client wrote")
    lat = out["latency_us"]
    if not np.issubdtype(lat.dtype, np.number) or not np.isfinite(lat).all() or (lat < 0).any() or (lat > 1e15).any():
        raise Damaged(path, "its column 'latency_us' holds latencies no client measured")
    # a replay's statements name the server process each ran on, not a client to be matched to one
    out["on_backend"] = (t.schema.metadata or {}).get(b"client") == b"backend_pid"
    return out


def load(run_dir: Path) -> Recording:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir} is not a directory; give a run directory that 'dbtier run --trace' wrote")
    result_path = run_dir / "result.json"
    result = read_json(run_dir, "result.json")
    if result is None:
        raise _fail(run_dir, "not a dbtier run directory (no result.json); give one that 'dbtier run --trace' wrote")
    if isinstance(result, dict) and "schema_version" in result:
        jsonout.check_version(result, result_path)
    if not isinstance(result, dict) or result.get("kind") != "run":
        kind = result.get("kind") if isinstance(result, dict) else None
        raise _fail(run_dir, f"a {_short(str(kind), 40)} result, not one run's; give the run directory of one layout"
                    if kind else "result.json is not a dbtier run's result")
    check_result(result, result_path)
    _check_recorded(result, result_path)
    lab = recorded_lab(result, result_path)
    read = read_trace(run_dir, [n for n, _ in lab.devices])
    if read is None:
        raise _fail(run_dir, "the run was recorded without --trace, and a prediction replays the trace; run it "
                    "again with --trace")
    _table, meta, files, layout, records = read
    phases = result.get("phases") or [result]
    measured = sum(1 for t in meta["timeline"] if t["event"] == "measured")
    if measured != len(phases):
        raise Damaged(run_dir / "trace.parquet", f"the trace's course has {measured} measured interval(s), and "
                      f"result.json {len(phases)} phase(s)")
    if lab.engine != "postgres" and any("threads" not in t for t in meta["timeline"] if t["event"] == "measured"):
        raise _fail(run_dir, f"a run on {lab.engine} recorded without the names of its server's threads (an older "
                    "dbtier's): the replay cannot tell its connections from its own threads; record it again with "
                    "--trace")
    if lab.engine != "postgres" and meta.get("sync_coverage", 1) < THREADED_SYNC_COVERAGE:
        raise _fail(run_dir, f"a run on {lab.engine} recorded before its server's timed waits were traced (an older "
                    "dbtier's): the replay would take its idle threads' waits for work; record it again with --trace")
    names = {(db, node): (name, kind) for db, node, name, kind in meta.get("names", [])}
    return Recording(run_dir, result, meta, records, {i: p for i, (_d, p) in files.items()},
                     {i: d for i, (d, _p) in files.items()}, layout, names, read_transactions(run_dir), lab)
