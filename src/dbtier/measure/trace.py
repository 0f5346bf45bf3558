"""The interposer's binary trace: reading the per-process record files, and Parquet conversion.

Record layout: native/iotap/trace.h (64 bytes, little endian), versioned by its format number, which
this module reads from the native library. Two kinds of record: the program's calls (what it asked
for, when, and when it got its answer) and the device requests each call caused (written just
before the call's own record, by the same thread)."""

from __future__ import annotations

import functools
import json
import operator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dbtier.devices import native
from dbtier.errors import UserError

_LAYOUT = native.layout()
#: struct dbt_trace_rec (native/iotap/trace.h), as the library describes it
RECORD = _LAYOUT.dtype("trace_rec")
_KIND = _LAYOUT.enum("trace_kind")
REQUEST, CALL, SYNC = _KIND["request"], _KIND["call"], _KIND["sync"]
KINDS = {code: name for name, code in _KIND.items()}
SYNC_OPS = {code: name for name, code in _LAYOUT.enum("sync_op").items()}
WAKE, SLEEP = _LAYOUT.enum("sync_op")["wake"], _LAYOUT.enum("sync_op")["sleep"]
_SYNC_FLAGS = _LAYOUT.flags("sync")  # a sync record's flags: what it was
SYNC_KILL, SYNC_SEM, SYNC_EPOLL = _SYNC_FLAGS["kill"], _SYNC_FLAGS["sem"], _SYNC_FLAGS["epoll"]
SYNC_AIO = _SYNC_FLAGS["aio"]  # a sleep in io_getevents: its complete_ns is the request it waited for
SYNC_FUTEX = _SYNC_FLAGS["futex"]  # a futex waited on or woken through syscall(): its aux says if it is the process's own
SYNC_COND = _SYNC_FLAGS["cond"]  # a condition variable's wait (woken) or signal: the process's own
SYNC_FLAG_BITS = functools.reduce(operator.or_, _SYNC_FLAGS.values())  # every flag a wake or sleep may have

OPS = {code: name for name, code in _LAYOUT.enum("trace_op").items()}
READ, WRITE, FLUSH = (_LAYOUT.enum("trace_op")[op] for op in ("read", "write", "flush"))
#: a record's flags, each also a column of the Parquet trace; with_request is how a record is written,
#: not what happened, and is expanded away (expand)
FLAGS = {name: bit for name, bit in _LAYOUT.flags("trace").items() if name != "with_request"}
WITH_REQUEST = _LAYOUT.flags("trace")["with_request"]  # a call's record that stands for its one device request too
RECORDED_FLAG_BITS = functools.reduce(operator.or_, FLAGS.values())  # every flag a call or request may have
#: what a call's own record keeps (async: a libaio request, which the program did not wait for at the call)
_CALL_FLAGS = FLAGS["direct"] | FLAGS["dsync"] | FLAGS["page_cache"] | FLAGS["async"]
SIZE_UNKNOWN = _LAYOUT.constant("trace_size_unknown")
UNCOMMITTED = _LAYOUT.constant("trace_op_uncommitted")  # a record's op until it is written whole
SIZE_PAGE = _LAYOUT.constant("trace_size_page")  # a read call's file size is in aux, in these units


def expand(recs: np.ndarray) -> np.ndarray:
    """Each record that stands for a call and its one device request, as the two records it stands
    for (the request just before its call), so that readers see one shape."""
    folded = (recs["kind"] == CALL) & ((recs["flags"] & WITH_REQUEST) != 0)
    if not folded.any():
        return recs
    at = np.arange(len(recs)) + np.cumsum(folded)  # where each record lands once the requests are in
    out = np.empty(len(recs) + int(folded.sum()), dtype=RECORD)
    out[at] = recs
    f = recs[folded]
    req = f.copy()
    req["kind"], req["end_ns"], req["aux"] = REQUEST, f["complete_ns"], 0
    req["flags"] = f["flags"] & ~np.uint8(WITH_REQUEST)
    out[at[folded] - 1] = req
    call = f.copy()
    call["start_ns"] = f["submit_ns"] + f["aux"]  # the host call's end
    call["aux"] = np.where(f["op"] == READ, SIZE_UNKNOWN, 0)
    call["flags"] = f["flags"] & np.uint8(_CALL_FLAGS)
    out[at[folded]] = call
    return out


def _read_file(path: Path) -> np.ndarray:
    """One process's record file: whole 64-byte records, or it is not one of ours."""
    try:
        size = path.stat().st_size
        if size % RECORD.itemsize:
            raise UserError(f"{path}: {size:,} bytes is not a whole number of {RECORD.itemsize}-byte trace records; "
                            "it is damaged or not a dbtier trace file")
        return np.fromfile(path, dtype=RECORD)
    except OSError as exc:
        raise UserError(f"cannot read the trace file {path}: {exc.strerror}") from None


def _segment_order(path: Path) -> tuple[int, int]:
    """iotap-<process>-<segment>.trc: a process's records in the order it wrote them."""
    try:
        _, proc, seg = path.stem.split("-")
        return int(proc), int(seg)
    except ValueError:
        return (1 << 62, 0)


def read_records(trace_dir: Path, in_order: bool = False) -> np.ndarray:
    """Every committed record. Sorted by submit time, or (in_order) as each process wrote them, one
    process after another: a call's requests just before it, as a replay needs them."""
    files = sorted((p for p in Path(trace_dir).glob("iotap-*.trc") if p.is_file()), key=_segment_order)
    parts = [_read_file(f) for f in files]
    recs = np.concatenate(parts) if parts else np.empty(0, dtype=RECORD)
    recs = expand(recs[recs["op"] != UNCOMMITTED])
    return recs if in_order else recs[np.argsort(recs["submit_ns"], kind="stable")]


def requests(recs: np.ndarray) -> np.ndarray:
    return recs[recs["kind"] == REQUEST]


def calls(recs: np.ndarray) -> np.ndarray:
    return recs[recs["kind"] == CALL]


def load_meta(trace_dir: Path) -> tuple[dict, dict[int, str]]:
    trace_dir = Path(trace_dir)
    meta_path, files_path = trace_dir / "meta.json", trace_dir / "files.json"
    if not meta_path.exists() or not files_path.exists():
        raise UserError(f"{trace_dir} is not a dbtier trace (no meta.json/files.json); record one with --trace")
    meta, table = _json(meta_path), _json(files_path)
    check_format(meta.get("trace_format", 1) if isinstance(meta, dict) else None, meta_path)
    devices = meta.get("devices") if isinstance(meta, dict) else None
    if not isinstance(devices, list) or not all(isinstance(d, dict) and isinstance(d.get("name"), str)
                                                for d in devices):
        raise UserError(f"{meta_path}: not a dbtier trace's description (no list of named devices); record the "
                        "trace again with --trace")
    if not isinstance(table, list) or not all(
            isinstance(e, list) and len(e) == 3 and isinstance(e[0], int) and not isinstance(e[0], bool)
            and isinstance(e[2], str) for e in table):
        raise UserError(f"{files_path}: not a dbtier trace's file table (a list of [index, device, path]); record "
                        "the trace again with --trace")
    return meta, {idx: path for idx, _dev, path in table}


def load_layout(trace_dir: Path) -> dict:
    """The file layout a replay needs (layout.json): each file's chunks on its device."""
    path = Path(trace_dir) / "layout.json"
    if not path.exists():
        raise UserError(f"{trace_dir} has no layout.json (the file layout on the devices); record it again with --trace")
    layout = _json(path)
    if not (isinstance(layout, dict) and isinstance(layout.get("chunks"), list)
            and isinstance(layout.get("cursors"), list) and isinstance(layout.get("chunk_bytes"), int)):
        raise UserError(f"{path}: not a dbtier trace's file layout; record the trace again with --trace")
    return layout


def check_format(found, where) -> None:
    """A trace of another record layout cannot be read as this one: refused, with what to do."""
    expected = native.trace_format()
    if found != expected:
        raise UserError(f"{where}: recorded in trace format {found}, but this dbtier reads format {expected}; "
                        "record the run again with --trace")


def _json(path: Path):
    try:
        return json.loads(path.read_bytes())
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:  # not JSON, or not UTF-8
        raise UserError(f"{path}: not valid JSON ({exc}); it is damaged or not part of a dbtier trace") from None


def to_table(trace_dir: Path) -> pa.Table:
    meta, files = load_meta(trace_dir)
    recs = read_records(trace_dir)
    names = [d["name"] for d in meta["devices"]]
    if not len(recs):
        raise UserError(f"{trace_dir}: the trace holds no I/O (the program did none under the devices' folders "
                        "while it was traced); nothing to convert")
    bad_kind = recs[~np.isin(recs["kind"], list(KINDS))]
    if len(bad_kind):
        raise UserError(f"{trace_dir}: a record has the unknown kind {int(bad_kind['kind'][0])}; the trace is "
                        "damaged or not a dbtier trace")
    is_sync = recs["kind"] == SYNC
    bad_op = recs[(~is_sync & ~np.isin(recs["op"], list(OPS))) | (is_sync & ~np.isin(recs["op"], list(SYNC_OPS)))]
    if len(bad_op):
        raise UserError(f"{trace_dir}: a record has the unknown operation {int(bad_op['op'][0])}; the trace is "
                        "damaged or not a dbtier trace")
    beyond = recs[recs["dev"] >= len(names)]
    if len(beyond):
        raise UserError(f"{trace_dir}: a record names device {int(beyond['dev'][0])}, but the trace lists "
                        f"{len(names)} device(s); its meta.json is not this trace's")
    t0 = int(recs["submit_ns"][0]) if len(recs) else 0
    file_idx = recs["file"]
    uniq, which = np.unique(file_idx, return_inverse=True)
    info = [native.pg_path(files.get(int(i), "")) for i in uniq]

    def per_file(values, type_=pa.string()):  # one value per distinct file, spread over the records
        return pa.array(values, type=type_).take(pa.array(which)).dictionary_encode()

    def per_file_int(key):
        return pa.array(np.array([-1 if x[key] is None else x[key] for x in info], dtype=np.int64)[which],
                        mask=np.array([x[key] is None for x in info], dtype=bool)[which])

    is_call, is_sync = recs["kind"] == CALL, recs["kind"] == SYNC
    submit = recs["submit_ns"].astype(np.int64)
    width = max(*OPS, *SYNC_OPS) + 1  # one dictionary for both: a call's op codes, then a sync's
    op_labels = [OPS.get(i, "?") for i in range(width)] + [SYNC_OPS.get(i, "?") for i in range(width)]
    op_code = recs["op"].astype(np.int32) + np.where(is_sync, width, 0).astype(np.int32)
    kind_labels = [KINDS.get(i, "?") for i in range(max(KINDS) + 1)]
    columns = {
        "t_s": (recs["submit_ns"] - t0) / 1e9,
        # a program call, a device request one caused (a call's requests come just before it), or a sync
        # (a process woke another: offset is the target pid or semaphore; or slept until woken)
        "record": pa.DictionaryArray.from_arrays(pa.array(recs["kind"].astype(np.int32)), pa.array(kind_labels)),
        "device": pa.DictionaryArray.from_arrays(pa.array(recs["dev"].astype(np.int32)), pa.array(names)),
        "op": pa.DictionaryArray.from_arrays(pa.array(op_code), pa.array(op_labels)),
        "offset": recs["offset"],
        "len": recs["len"],
        "file": file_idx,
        "path": per_file([files.get(int(i), "") for i in uniq]),
        "path_class": per_file([x["class"] for x in info]),
        # pg_global, pg_default or a tablespace's oid; none for a file outside PostgreSQL's layout
        "tablespace": per_file([x["tablespace"] for x in info]),
        "database": per_file_int("database"),
        "relfilenode": per_file_int("relfilenode"),
        "segment": per_file_int("segment"),
        # a request's time queued at the device; a call has none
        "queue_us": np.where(is_call | is_sync, 0, recs["start_ns"].astype(np.int64) - submit) / 1e3,
        # modelled: a request's service with its queueing, a call's answer (0 when nothing was waited for)
        "latency_us": np.where(is_sync, 0, recs["complete_ns"].astype(np.int64) - submit) / 1e3,
        # a call's return after its modelled completion, and its host call's own time; 0 for the rest
        "lateness_us": np.where(is_call, recs["end_ns"].astype(np.int64) - recs["complete_ns"].astype(np.int64),
                                0) / 1e3,
        "host_us": np.where(is_call, recs["start_ns"].astype(np.int64) - submit, 0) / 1e3,
        "pid": recs["pid"],
        "tid": recs["tid"],
        # the record as written (trace.h), for a replay: every time in ns, the raw flags and aux
        "submit_ns": recs["submit_ns"],
        "start_ns": recs["start_ns"],
        "complete_ns": recs["complete_ns"],
        "end_ns": recs["end_ns"],
        "aux": recs["aux"],
        "flags": recs["flags"],
    }
    for flag, bit in FLAGS.items():  # a sync record's flags say something else (trace.h)
        columns[flag] = ((recs["flags"] & bit) != 0) & ~is_sync
    layout = load_layout(trace_dir)
    table_files = _json(Path(trace_dir) / "files.json")  # [index, device, path]: every file laid out
    return pa.table(columns, metadata={"dbtier": json.dumps(meta), "dbtier_files": json.dumps(table_files),
                                       "dbtier_layout": json.dumps(layout)})


def from_table(table: pa.Table) -> np.ndarray:
    """The records a Parquet trace holds, as read_records gave them (what a replay starts from)."""
    meta = json.loads(table.schema.metadata[b"dbtier"])
    names = [d["name"] for d in meta["devices"]]
    recs = np.zeros(table.num_rows, dtype=RECORD)
    for col in ("submit_ns", "start_ns", "complete_ns", "end_ns", "offset", "len", "file", "pid", "aux", "tid",
                "flags"):
        recs[col] = table[col].to_numpy()
    kind_of = {v: k for k, v in KINDS.items()}
    recs["kind"] = _codes(table["record"], kind_of)
    recs["dev"] = _codes(table["device"], {n: i for i, n in enumerate(names)})
    sync_of, op_of = {v: k for k, v in SYNC_OPS.items()}, {v: k for k, v in OPS.items()}
    is_sync = recs["kind"] == SYNC
    recs["op"] = np.where(is_sync, _codes(table["op"], sync_of, 0), _codes(table["op"], op_of, 0))
    return recs


def _codes(column, mapping: dict, missing: int | None = None) -> np.ndarray:
    """A dictionary-encoded text column as the numbers the mapping gives its words (a word no row uses
    may be anything)."""
    col = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    if not pa.types.is_dictionary(col.type):
        col = col.dictionary_encode()
    words = col.dictionary.to_pylist()
    lookup = np.array([mapping.get(w, -1) for w in words], dtype=np.int64)
    codes = lookup[col.indices.to_numpy(zero_copy_only=False)]
    if missing is not None:
        return np.where(codes < 0, missing, codes)
    if (codes < 0).any():
        word = words[int(col.indices.to_numpy(zero_copy_only=False)[np.argmax(codes < 0)])]
        raise UserError(f"the trace names '{word}', which it does not describe; it is damaged or not a dbtier trace")
    return codes


def convert(trace_dir: Path, out: Path) -> pa.Table:
    table = to_table(trace_dir)
    tmp = out.with_name(out.name + ".tmp")
    try:
        pq.write_table(table, tmp)
        tmp.replace(out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
    return table
