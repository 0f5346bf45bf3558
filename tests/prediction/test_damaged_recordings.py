"""Run directories dbtier did not write, or not as they are now: damaged, forged, handed over. Each case
is a damaged copy of one real, small traced run, given to `predict`, `advise` or `dbtier.load` (and
cloud profiles of one's own to `devices show` and `predict -d`). Every one ends as a bad input does
(tests/cli/test_bad_input.py): one line on stderr, `dbtier: error: <what is wrong>`, naming the file,
exit status 2, no traceback, nothing made (no workspace, no JSON, nothing in /dev/shm or /tmp). From
Python: dbtier.UserError. A valid recording still predicts itself exactly, a prediction interrupted
in its replay ends at once and leaves nothing, and one killed outright is cleaned up by the next
command.

The cases run a few at a time, each its own process with its own folders."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dbtier as dbtier_api
from tests.conftest import assert_refused_in_one_line, dbtier

UID = os.geteuid()
SHARED = (Path("/dev/shm"), Path("/tmp"))
FIXTURE_PREFIXES = ("dbtier-test-", "dbtier-gib-")
ROWS = 300


@pytest.fixture(scope="module")
def recorded(module_shm_dir, tmp_path_factory):
    """random-index on an SSD, traced: a few hundred calls, a second to record."""
    out = tmp_path_factory.mktemp("recorded")
    dbtier("run", "random-index", "--rows", str(ROWS), "-d", "d=ssd-sata-mlc", "--trace", "-q",
           "--workspace", str(module_shm_dir), "--output", str(out), check=True)
    return next(out.glob("random-index-*"))


# -- damage ---------------------------------------------------------------------------------------------


def edit_result(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        doc = json.loads((run / "result.json").read_text())
        change(doc)
        (run / "result.json").write_text(json.dumps(doc))
    return damage


def raw_result(text: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        (run / "result.json").write_text(text)
    return damage


def setter(dotted: str, value) -> Callable[[dict], None]:
    """Sets doc[a][b]... (a list index as a number) to value."""
    def change(doc: dict) -> None:
        keys = [int(k) if k.isdigit() else k for k in dotted.split(".")]
        for k in keys[:-1]:
            doc = doc[k]
        doc[keys[-1]] = value
    return change


def remover(dotted: str) -> Callable[[dict], None]:
    def change(doc: dict) -> None:
        keys = dotted.split(".")
        for k in keys[:-1]:
            doc = doc[k]
        del doc[keys[-1]]
    return change


def edit_trace(change: Callable[[dict, dict], None]) -> Callable[[Path], None]:
    """change(columns, metadata): columns as numpy arrays (the text columns as lists of words), metadata
    as parsed JSON under its keys; the trace is written back with them."""
    def damage(run: Path) -> None:
        table = pq.read_table(run / "trace.parquet")
        md = {k.decode(): json.loads(v) for k, v in table.schema.metadata.items() if k.startswith(b"dbtier")}
        cols = {}
        for name in table.column_names:
            col = table[name]
            cols[name] = col.to_pylist() if pa.types.is_dictionary(col.type) else col.to_numpy().copy()
        change(cols, md)
        arrays = {k: (pa.array(v).dictionary_encode() if isinstance(v, list) else v) for k, v in cols.items()}
        metadata = {k.encode(): v if isinstance(v, bytes) else json.dumps(v).encode() for k, v in md.items()}
        pq.write_table(pa.table(arrays, metadata=metadata), run / "trace.parquet")
    return damage


def a_call(cols: dict) -> int:
    """A program call's row, in the middle of the trace."""
    calls = [i for i, r in enumerate(cols["record"]) if r == "call"]
    return calls[len(calls) // 2]


def record(column: str, value, kind: str = "call") -> Callable[[Path], None]:
    def change(cols: dict, _md: dict) -> None:
        i = a_call(cols) if kind == "call" else cols["record"].index(kind)
        if isinstance(cols[column], list):
            cols[column][i] = value
        else:
            cols[column][i] = value
    return edit_trace(change)


def meta(change: Callable[[dict], None]) -> Callable[[Path], None]:
    return edit_trace(lambda _cols, md: change(md))


def both(*damages) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        for d in damages:
            d(run)
    return damage


def replace_file(name: str, data: bytes) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        (run / name).write_bytes(data)
    return damage


def fifo(name: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        (run / name).unlink()
        os.mkfifo(run / name)
    return damage


def link_out(name: str) -> Callable[[Path], None]:
    """The file replaced by a link to a copy of it outside the run directory."""
    def damage(run: Path) -> None:
        elsewhere = run.parent / f"elsewhere-{name}"
        shutil.move(run / name, elsewhere)
        (run / name).symlink_to(elsewhere)
    return damage


def deep_json(run: Path) -> None:
    depth = 200_000
    (run / "result.json").write_text('{"schema_version": 2, "kind": "run", "x": ' + "[" * depth + "]" * depth + "}")


def huge_json(run: Path) -> None:
    doc = json.loads((run / "result.json").read_text())
    doc["padding"] = ["x" * 4000] * 17_000  # 68 MB
    (run / "result.json").write_text(json.dumps(doc))


def transactions(table: pa.Table) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        pq.write_table(table, run / "transactions.parquet")
    return damage


def run_dir_elsewhere(run: Path) -> None:
    """result.json names another directory, which holds a trace; this one holds none."""
    other = run.parent / "other-run"
    shutil.copytree(run, other)
    (run / "trace.parquet").unlink()
    edit_result(setter("run_dir", str(other)))(run)


def timeline(i_or_all, key: str | None = None, value=None) -> Callable[[Path], None]:
    def change(md: dict) -> None:
        steps = md["dbtier"]["timeline"]
        if callable(i_or_all):
            i_or_all(steps)
        else:
            steps[i_or_all][key] = value
    return meta(change)


def measured_index(md: dict) -> int:
    return next(i for i, s in enumerate(md["dbtier"]["timeline"]) if s["event"] == "measured")


def swap_timeline(steps: list) -> None:
    steps.reverse()


def t1_before_t0(steps: list) -> None:
    m = next(s for s in steps if s["event"] == "measured")
    m["t1_ns"] = m["t0_ns"] - 1


def reverse_two_submits(cols: dict, _md: dict) -> None:
    i = a_call(cols)
    cols["submit_ns"][i + 1] = cols["submit_ns"][i] - 1_000_000


def layout(change: Callable[[dict], None]) -> Callable[[Path], None]:
    return meta(lambda md: change(md["dbtier_layout"]))


def chunk_of_an_unlisted_file(md: dict) -> None:
    """The first chunk placed for a file index the file table does not list: indices are slots of a
    hash table, so a recording's own files may hold any one (60000 was once taken)."""
    listed = {row[0] for row in md["dbtier_files"]}
    md["dbtier_layout"]["chunks"][0][0] = next(i for i in range(60_000, 65_536) if i not in listed)


def files_table(change: Callable[[list], None]) -> Callable[[Path], None]:
    return meta(lambda md: change(md["dbtier_files"]))


def drop_column(name: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        table = pq.read_table(run / "trace.parquet")
        pq.write_table(table.drop_columns([name]), run / "trace.parquet")
    return damage


def null_values(name: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        table = pq.read_table(run / "trace.parquet")
        col = table[name].to_pylist()
        col[3] = None
        i = table.column_names.index(name)
        table = table.set_column(i, name, pa.array(col, type=table[name].type))
        pq.write_table(table, run / "trace.parquet")
    return damage


def cloud_device(run: Path) -> None:
    """The run's device recorded as a cloud volume whose burst is below its baseline."""
    doc = json.loads((run / "result.json").read_text())
    dev = doc["lab"]["devices"][0]
    dev.update(kind="cloud", profile="my-volume", params={"iops": 3000, "burst_iops": 1000, "burst_credits": 5000})
    (run / "result.json").write_text(json.dumps(doc))


def seventeen_devices(doc: dict) -> None:
    first = doc["lab"]["devices"][0]
    doc["lab"]["devices"] = [first] + [{**first, "name": f"x{i}", "dir": f"/nonexistent/x{i}"} for i in range(16)]


def more_phases(doc: dict) -> None:
    phase = {k: doc[k] for k in ("elapsed_s", "server_cpu_s", "io_wait_s", "devices", "top_events", "object_io")}
    doc["phases"] = [{**phase, "phase": "one"}, {**phase, "phase": "two"}]


CLOUD_PROFILES = {
    "burst_below.toml": 'kind = "cloud"\n[params]\niops = 3000\nburst_iops = 2000\nburst_credits = 100000\n',
    "burst_no_credits.toml": 'kind = "cloud"\n[params]\niops = 300\nburst_iops = 3000\n',
    "credits_no_burst.toml": 'kind = "cloud"\n[params]\niops = 300\nburst_credits = 100000\n',
    "mb_burst_below.toml": 'kind = "cloud"\n[params]\nmb_s = 150\nburst_mb_s = 100\nburst_mb = 1000\n',
    "mb_credits_no_burst.toml": 'kind = "cloud"\n[params]\nmb_s = 150\nburst_mb = 1000\n',
}


# -- the cases ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    message: str                       # a fragment the one line must hold
    damage: Callable[[Path], None] | None
    command: str = "predict"           # predict RUN, advise RUN ..., or a command of its own (args)
    args: tuple[str, ...] = ()


ADVISE = ("--fast", "fast=nvme-gen4", "--budget", "1GB")

CASES = [
    # -- result.json: the lab's figures, each checked as its option would be
    Case("page-cache-negative", "lab.page_cache.bytes is -1", edit_result(setter("lab.page_cache.bytes", -1))),
    Case("page-cache-4-tib", "lab.page_cache.bytes is 4398046511104", edit_result(setter("lab.page_cache.bytes", 1 << 42))),
    Case("page-cache-a-word", "lab.page_cache.bytes is 'lots'", edit_result(setter("lab.page_cache.bytes", "lots"))),
    Case("page-cache-readahead-zero", "lab.page_cache.readahead_kb is 0", edit_result(setter("lab.page_cache.readahead_kb", 0))),
    Case("page-cache-dirty-below-background", "dirty_pct 5 is not above dirty_background_pct 10",
         edit_result(setter("lab.page_cache.dirty_pct", 5))),
    Case("page-cache-dirty-over-100", "lab.page_cache.dirty_background_pct is 150",
         edit_result(setter("lab.page_cache.dirty_background_pct", 150))),
    Case("cache-negative", "lab/cache_bytes: -1 is less than the minimum of 0", edit_result(setter("lab.cache_bytes", -1))),
    Case("cache-below-postgres-minimum", "lab.cache_bytes is 100", edit_result(setter("lab.cache_bytes", 100))),
    Case("cache-beyond-memory", "more than this machine's", edit_result(setter("lab.cache_bytes", 1 << 60))),
    Case("io-mode-unknown", "lab/io_mode: 'fast' is not one of", edit_result(setter("lab.io_mode", "fast"))),
    Case("cpu-scale-zero", "lab/cpu_scale: 0 is less than or equal to the minimum of 0",
         edit_result(setter("lab.cpu_scale", 0))),
    Case("cpu-scale-huge", "lab.cpu_scale is 5000", edit_result(setter("lab.cpu_scale", 5000))),
    Case("cpu-scale-nan", "NaN is not a number JSON allows", raw_result('{"schema_version": 2, "kind": "run", "lab": {"cpu_scale": NaN}}')),
    Case("scale-model-zero", "lab.scale_model.factor is 0", edit_result(setter("lab.scale_model", {"factor": 0}))),
    Case("user-setting-lab-owned", "the recorded run carries a setting dbtier would refuse (--set listen_addresses",
         edit_result(setter("lab.user_settings", {"listen_addresses": "'*'"}))),
    Case("user-setting-io-uring", "--set io_method=io_uring", edit_result(setter("lab.user_settings", {"io_method": "io_uring"}))),
    Case("devices-none", "lab.devices lists 0 devices", edit_result(setter("lab.devices", []))),
    Case("devices-seventeen", "lab.devices lists 17 devices; a run has 1 to 16", edit_result(seventeen_devices)),
    Case("device-name-two-lines", "is not one line of at most", edit_result(setter("lab.devices.0.name", "d\nrm -rf"))),
    Case("device-name-bad", "is not a device name", edit_result(setter("lab.devices.0.name", "../d"))),
    Case("device-kind-unknown", "device d's kind is 'tape'", edit_result(setter("lab.devices.0.kind", "tape"))),
    Case("device-param-out-of-range", "channels = 0 is outside", edit_result(setter("lab.devices.0.params.channels", 0))),
    Case("device-param-unknown", "ssd devices have no parameter 'warp'", edit_result(setter("lab.devices.0.params.warp", 9))),
    Case("device-param-a-word", "params/channels: '8' is not of type", edit_result(setter("lab.devices.0.params.channels", "8"))),
    Case("device-cloud-burst-below-baseline", "burst_iops = 1000 is not above iops = 3000", cloud_device),
    Case("placement-unknown-device", "lab.placement puts data on 'nosuch'", edit_result(setter("lab.placement.data", "nosuch"))),
    Case("workload-a-path", "workload: '../../x' does not match", edit_result(setter("workload", "../../x"))),
    Case("lab-missing", "'lab' is a required property", edit_result(remover("lab"))),
    # -- result.json: the measured figures
    Case("elapsed-negative", "elapsed_s: -0.1 is less than the minimum of 0", edit_result(setter("elapsed_s", -0.1))),
    Case("elapsed-zero", "elapsed_s: 0 is less than or equal to the minimum of 0", edit_result(setter("elapsed_s", 0))),
    Case("elapsed-infinite", "elapsed_s is inf, not a finite number", raw_result('{"elapsed_s": 1e400}')),
    Case("elapsed-a-word", "elapsed_s: 'fast' is not of type", edit_result(setter("elapsed_s", "fast"))),
    Case("object-io-reads-negative", "reads: -5 is less than the minimum of 0", edit_result(setter("object_io.0.reads", -5))),
    Case("phases-beyond-the-trace", "1 measured interval(s), and result.json 2 phase(s)", edit_result(more_phases)),
    # -- result.json: the file itself
    Case("result-deep", "nested deeper than 64 levels", deep_json),
    Case("result-huge", "more than any document dbtier writes", huge_json),
    Case("result-a-list", "result.json is not a dbtier run's result", raw_result("[1, 2]")),
    Case("result-not-json", "not valid JSON", raw_result('{"kind": ')),
    Case("result-a-pipe", "is not a regular file", fifo("result.json")),
    Case("result-a-link-out", "outside the run directory", link_out("result.json")),
    Case("result-names-another-run-dir", "was recorded without --trace", run_dir_elsewhere),
    # -- the trace's records, each field out of its range
    Case("record-file-unknown", "names a file its file table does not list", record("file", 99_999)),
    Case("record-op-unknown", "has an unknown operation", record("op", "wake")),
    Case("record-kind-unknown", "the trace names 'bogus'", record("record", "bogus")),
    Case("record-device-unknown", "the trace names 'nosuch'", record("device", "nosuch")),
    Case("record-end-zero", "ends before it was made", record("end_ns", 0)),
    Case("record-started-before-made", "started before it was made", record("start_ns", 5)),
    Case("record-submits-reversed", "comes before the record before it", edit_trace(reverse_two_submits)),
    Case("record-offset-2-63", "reaches beyond byte 2^48", record("offset", 1 << 63)),
    Case("record-len-2-gib", "moves more than 1 GiB", record("len", 1 << 31)),
    Case("record-read-32-mib", "reads more than 16 MiB at once", record("len", 32 << 20)),
    Case("record-flags-unknown", "has flags no call or request has", record("flags", 0x80)),
    Case("record-time-beyond-clocks", "beyond any clock's", record("complete_ns", 1 << 63)),
    Case("record-request-completed-before-start", "completed before its service started",
         edit_trace(lambda cols, _md: cols["complete_ns"].__setitem__(cols["record"].index("request"), 0))),
    Case("trace-column-missing", "the trace has no column 'end_ns'", drop_column("end_ns")),
    Case("trace-column-empty-values", "the trace's column 'len' has empty values", null_values("len")),
    Case("trace-not-parquet", "trace.parquet: it cannot be read", replace_file("trace.parquet", b"PAR1 not really")),
    Case("trace-a-link-out", "outside the run directory", link_out("trace.parquet")),
    Case("trace-description-not-json", "not valid JSON", edit_trace(lambda _c, md: md.__setitem__("dbtier", b"{"))),
    Case("trace-devices-not-the-runs", "the trace's devices are not the run's",
         meta(lambda md: md["dbtier"]["devices"][0].__setitem__("name", "e"))),
    # -- the file layout and the file table
    Case("layout-chunk-bytes-zero", "chunks of 0 bytes; dbtier lays files out in 1,048,576-byte chunks",
         layout(lambda lay: lay.__setitem__("chunk_bytes", 0))),
    Case("layout-unknown-file", "which its file table does not list", meta(chunk_of_an_unlisted_file)),
    Case("layout-unaligned-address", "not [file, chunk, aligned address]",
         layout(lambda lay: lay["chunks"][0].__setitem__(2, 12345))),
    Case("layout-chunk-twice", "twice", layout(lambda lay: lay["chunks"].append(list(lay["chunks"][0])))),
    Case("files-device-beyond", "its file table has the row", files_table(lambda t: t[0].__setitem__(1, 5))),
    Case("files-index-twice", "its file table lists file", files_table(lambda t: t.append(list(t[0])))),
    # -- the run's course
    Case("timeline-ends-before-it-begins", "ends before it begins", timeline(t1_before_t0)),
    Case("timeline-out-of-order", "begins before the event before it ended", timeline(swap_timeline)),
    Case("timeline-unknown-event", "'nap', not one of", timeline(lambda steps: steps[0].__setitem__("event", "nap"))),
    Case("timeline-times-as-words", "has no times in nanoseconds",
         timeline(lambda steps: [s.__setitem__("t0_ns", "soon") for s in steps if s["event"] == "measured"])),
    Case("timeline-threads-not-named", "its threads are not thread id: name",
         timeline(lambda steps: [s.__setitem__("threads", {"main": 7}) for s in steps if s["event"] == "measured"])),
    Case("engine-unknown", "lab/engine: 'oracle' is not one of", edit_result(setter("lab.engine", "oracle"))),
    # -- transactions
    Case("transactions-not-parquet", "transactions.parquet: it cannot be read", replace_file("transactions.parquet", b"nope")),
    Case("transactions-negative-latency", "latency_us' holds latencies no client measured", transactions(pa.table(
        {"script": ["a"], "client": np.array([0]), "end_ns": np.array([1]), "latency_us": np.array([-3.0])}))),
    Case("transactions-column-missing", "it has no column 'latency_us'", transactions(pa.table(
        {"script": ["a"], "client": np.array([0]), "end_ns": np.array([1])}))),
    # -- advise reads the same recordings
    Case("advise-page-cache-negative", "lab.page_cache.bytes is -1", edit_result(setter("lab.page_cache.bytes", -1)),
         "advise", ADVISE),
    Case("advise-offset-2-63", "reaches beyond byte 2^48", record("offset", 1 << 63), "advise", ADVISE),
    Case("advise-chunk-bytes-zero", "chunks of 0 bytes", layout(lambda lay: lay.__setitem__("chunk_bytes", 0)),
         "advise", ADVISE),
    Case("advise-deep", "nested deeper than 64 levels", deep_json, "advise", ADVISE),
    Case("advise-workspace-missing", "no such folder", None, "advise", (*ADVISE, "--workspace", "/nonexistent-dbtier")),
    # -- predict's own options
    Case("predict-workspace-missing", "no such folder", None, "predict", ("--workspace", "/nonexistent-dbtier")),
    Case("predict-seventeen-devices", "the replay has room for 16 devices", None, "predict",
         tuple(a for i in range(16) for a in ("-d", f"n{i}=nvme-gen4"))),
    # -- cloud profiles of one's own
    Case("cloud-burst-below-baseline", "burst_iops = 2000 is not above iops = 3000", None, "devices",
         ("show", "{fx}/burst_below.toml")),
    Case("cloud-burst-without-credits", "burst_iops = 3000 without burst_credits", None, "devices",
         ("show", "{fx}/burst_no_credits.toml")),
    Case("cloud-credits-without-burst", "burst_credits = 100000 without burst_iops", None, "devices",
         ("show", "{fx}/credits_no_burst.toml")),
    Case("cloud-mb-burst-below-baseline", "burst_mb_s = 100 is not above mb_s = 150", None, "predict",
         ("-d", "x={fx}/mb_burst_below.toml")),
    Case("cloud-mb-credits-without-burst", "burst_mb = 1000 without burst_mb_s", None, "predict",
         ("-d", "d={fx}/mb_credits_no_burst.toml")),
]
assert len({c.id for c in CASES}) == len(CASES)


# -- running them -------------------------------------------------------------------------------------


@dataclass
class Outcome:
    proc: subprocess.CompletedProcess
    fresh: dict[str, Path]


def _args(case: Case, run: Path, fx: Path, fresh: dict[str, Path]) -> list[str]:
    own = [a.format(fx=fx) for a in case.args]
    if case.command == "devices":
        return ["devices", *own]
    if case.command == "advise":
        return ["advise", str(run), "--workspace", str(fresh["ws"]), "-o", str(fresh["out"] / "advice"),
                "--json", str(fresh["out"] / "a.json"), *own]  # a case's own value comes last, and wins
    return ["predict", str(run), "--workspace", str(fresh["ws"]), "--json", str(fresh["out"] / "p.json"), *own]


def _run_case(case: Case, run: Path, fx: Path, root: Path) -> Outcome:
    fresh = {}
    for name in ("ws", "out", "tmp"):
        fresh[name] = root / case.id / name
        fresh[name].mkdir(parents=True)
    proc = dbtier(*_args(case, run, fx, fresh), env={**os.environ, "TMPDIR": str(fresh["tmp"])}, timeout=120)
    return Outcome(proc, fresh)


def _shared_entries() -> set[Path]:
    return {e for folder in SHARED for e in folder.iterdir()
            if e.name.startswith("dbtier") and not e.name.startswith(FIXTURE_PREFIXES)}


def damaged_copy(recorded: Path, where: Path, damage) -> Path:
    run = where / "run"
    shutil.copytree(recorded, run)
    if damage is not None:
        damage(run)
    return run


@pytest.fixture(scope="module")
def scratch():
    path = Path(tempfile.mkdtemp(prefix="badrecording-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def outcomes(request, recorded, scratch):
    wanted = {item.callspec.params["case"].id for item in request.session.items
              if getattr(item, "callspec", None) and "case" in item.callspec.params and item.module is request.module}
    fx = scratch / "profiles"
    fx.mkdir()
    for name, text in CLOUD_PROFILES.items():
        (fx / name).write_text(text)
    runs = {c.id: damaged_copy(recorded, scratch / "runs" / c.id, c.damage) for c in CASES if c.id in wanted}
    before = _shared_entries()
    with ThreadPoolExecutor(max_workers=max(2, 2 * (os.cpu_count() or 1))) as pool:
        futures = {cid: pool.submit(_run_case, next(c for c in CASES if c.id == cid), run, fx, scratch / "cases")
                   for cid, run in runs.items()}
        results = {cid: f.result() for cid, f in futures.items()}
    return results, _shared_entries() - before


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_damaged_recording_is_one_line_status_2_and_nothing_made(case, outcomes):
    results, _ = outcomes
    out = results[case.id]
    assert_refused_in_one_line(out.proc, case.message, out.fresh)


def test_nothing_appeared_in_dev_shm_or_tmp(outcomes):
    _, appeared = outcomes
    assert not appeared, sorted(map(str, appeared))


def test_enough_cases():
    assert len(CASES) >= 45 and {"predict", "advise", "devices"} <= {c.command for c in CASES}


# -- dbtier.load -----------------------------------------------------------------------------------------

LOAD_CASES = [
    ("cache-negative", edit_result(setter("lab.cache_bytes", -1)), "cache_bytes: -1 is less than the minimum"),
    ("elapsed-negative", edit_result(setter("elapsed_s", -1)), "elapsed_s: -1 is less than the minimum"),
    ("elapsed-nan", raw_result('{"schema_version": 2, "kind": "run", "elapsed_s": NaN}'), "NaN is not a number"),
    ("elapsed-infinite", raw_result('{"schema_version": 2, "kind": "run", "elapsed_s": -1e999}'), "not a finite number"),
    ("devices-not-a-list", edit_result(setter("devices", {"d": 1})), "devices: {'d': 1} is not of type 'array'"),
    ("top-events-a-number", edit_result(setter("top_events", 7)), "top_events: 7 is not of type 'array'"),
    ("lab-devices-a-word", edit_result(setter("lab.devices", "d")), "lab/devices: 'd' is not of type 'array'"),
    ("kind-missing-workload", edit_result(remover("workload")), "'workload' is a required property"),
    ("deep", deep_json, "nested deeper than 64 levels"),
    ("huge", huge_json, "more than any document dbtier writes"),
    ("text-with-escapes", edit_result(setter("workload", "x\x1b[2J")), "is not one line"),
    ("a-pipe", fifo("result.json"), "is not a regular file"),
    ("result-a-link-out", link_out("result.json"), "outside the run directory"),
    ("trace-a-link-out", link_out("trace.parquet"), "outside the run directory"),
    ("trace-not-parquet", replace_file("trace.parquet", b"PAR1"), "it cannot be read"),
    ("record-offset-2-63", record("offset", 1 << 63), r"reaches beyond byte 2\^48"),
    ("record-end-zero", record("end_ns", 0), "ends before it was made"),
    ("record-op-unknown", record("op", "sleep"), "has an unknown operation"),
    ("record-file-unknown", record("file", 70_000), "names a file its file table does not list"),
    ("layout-chunk-bytes-zero", layout(lambda lay: lay.__setitem__("chunk_bytes", 0)), "chunks of 0 bytes"),
    ("timeline-reversed", timeline(t1_before_t0), "ends before it begins"),
    ("trace-column-missing", drop_column("pid"), "the trace has no column 'pid'"),
    ("trace-devices-not-the-runs", meta(lambda md: md["dbtier"]["devices"].append({"name": "x"})),
     "the trace's devices are not the run's"),
]


@pytest.mark.parametrize("damage, message", [(d, m) for _i, d, m in LOAD_CASES], ids=[i for i, _d, _m in LOAD_CASES])
def test_load_raises_user_error_for_a_damaged_run_directory(recorded, tmp_path, damage, message):
    run = damaged_copy(recorded, tmp_path, damage)
    with pytest.raises(dbtier_api.UserError, match=message) as info:
        dbtier_api.load(run)
    assert "\n" not in str(info.value) and str(run) in str(info.value)


def test_load_never_follows_a_path_inside_a_document(recorded, tmp_path):
    """A run_dir field, or a comparison's run_dirs, name other folders: load reads the one it was given
    (a comparison's layouts only by their names beside it)."""
    run = damaged_copy(recorded, tmp_path, run_dir_elsewhere)
    loaded = dbtier_api.load(run)
    assert loaded.path == run and loaded.trace.empty  # the other directory's trace was not read
    doc = json.loads((recorded / "result.json").read_text())
    summary = {k: doc[k] for k in ("elapsed_s", "server_cpu_s", "io_wait_s", "devices", "top_events", "rates")}
    compare = tmp_path / "compare"
    compare.mkdir()
    (compare / "result.json").write_text(json.dumps({
        "schema_version": 2, "kind": "compare", "workload": "random-index",
        "configurations": [{"name": "a", "devices": [{"name": "d", "profile": "ssd-sata-mlc"}],
                            "placement": doc["lab"]["placement"]}],
        "run_dirs": [str(recorded)], "speedups": [1.0], "headline": "elapsed", "results": [summary]}))
    loaded = dbtier_api.load(compare)  # the recorded run is not beside it: its summary stands in
    assert loaded.runs_docs[0][2] is None and loaded.trace.empty and loaded.runs.loc[0, "elapsed_s"] == doc["elapsed_s"]
    beside = tmp_path / recorded.name
    shutil.copytree(recorded, beside)  # beside it, under the recorded name: read, with its trace
    loaded = dbtier_api.load(compare)
    assert loaded.runs_docs[0][2] == beside.resolve() and len(loaded.trace) > 0


# -- valid recordings -----------------------------------------------------------------------------------


def test_a_valid_recording_predicts_itself_exactly(recorded, tmp_path):
    """Everything checked, nothing changed: the recorded layout replays to the recorded figures (1.00x),
    and a link inside the run directory is followed (it leads to its own file)."""
    run = tmp_path / "run"
    shutil.copytree(recorded, run)
    (run / "data").mkdir()
    shutil.move(run / "trace.parquet", run / "data" / "trace.parquet")
    (run / "trace.parquet").symlink_to(Path("data") / "trace.parquet")
    out = tmp_path / "p.json"
    proc = dbtier("predict", str(run), "--json", str(out), "--workspace", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (phase,) = json.loads(out.read_text())["phases"]
    ratio = phase["recorded"]["elapsed_s"] / phase["predicted"]["elapsed_s"]
    assert f"{ratio:.2f}x" == "1.00x", ratio
    assert phase["predicted"]["devices"][0]["iostat"]["r/s"] == pytest.approx(
        phase["recorded"]["devices"][0]["iostat"]["r/s"], rel=0.01)
    assert "1.00x" in proc.stdout
    assert not list((tmp_path / f"dbtier-{UID}").iterdir())  # the replay's claim went with it
    assert len(dbtier_api.load(run).trace) > 0


def test_the_recorded_lab_options_are_the_runs(recorded, tmp_path):
    """What advise --verify runs the workload again with: the recorded figures, each checked."""
    from dbtier.prediction import recording

    doc = json.loads((recorded / "result.json").read_text())
    options = recording.lab_options(recording.load(recorded), tmp_path)
    lab = doc["lab"]
    assert options.cache_bytes == lab["cache_bytes"] and options.io_mode == lab["io_mode"]
    assert options.page_cache_bytes == lab["page_cache"]["bytes"]
    assert options.sets == {} and options.cpu_scale == 1.0 and options.workspace == tmp_path
    run = tmp_path / "run"
    shutil.copytree(recorded, run)
    edit_result(setter("lab.user_settings", {"work_mem": "64MB", "port": "5433"}))(run)
    with pytest.raises(dbtier_api.UserError, match=r"carries a setting dbtier would refuse \(--set port"):
        recording.load(run)
    edit_result(setter("lab.user_settings", {"work_mem": "64MB"}))(run)
    assert recording.lab_options(recording.load(run)).sets == {"work_mem": "64MB"}


# -- interrupted and killed -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slow(recorded, tmp_path_factory):
    """A damaged but acceptable recording whose replay takes seconds: each call made a hundred times,
    each read a buffered one of 16 MiB (the most one read may ask), through the emulated page cache
    page by page."""
    run = damaged_copy(recorded, tmp_path_factory.mktemp("slow"), None)

    def change(cols: dict, _md: dict) -> None:
        reps = np.where(np.array([r == "call" for r in cols["record"]]), 100, 1)
        for name, values in list(cols.items()):
            cols[name] = ([v for v, r in zip(values, reps) for _ in range(r)] if isinstance(values, list)
                          else np.repeat(values, reps))
        calls = np.array([r == "call" for r in cols["record"]])
        reads = calls & (np.array(cols["op"]) == "read")
        cols["len"][reads] = 16 << 20
        cols["offset"][reads] = (np.arange(reads.sum()) % 64) * (16 << 20)
        cols["aux"][reads] = 0xFFFFFFFF  # the file's size unknown: read-ahead does not stop at it
        cols["flags"][calls] = 0  # buffered
    edit_trace(change)(run)
    return run


def _claims(ws: Path) -> list[Path]:
    root = ws / f"dbtier-{UID}"
    return sorted(root.glob("predict-*")) if root.is_dir() else []


def _start_predict(run: Path, ws: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "dbtier", "predict", str(run), "--workspace", str(ws)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    # replaying: its claim holds the replay's state, and the engine thread has started
    while not (_claims(ws) and list(_claims(ws)[0].glob("replay/iotap.state"))):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the prediction never started its replay"
        time.sleep(0.05)
    time.sleep(0.5)
    assert proc.poll() is None, "the replay ended before it could be interrupted: " + proc.communicate()[1]
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_replay_is_interrupted_and_leaves_nothing(slow, tmp_path, sig):
    proc = _start_predict(slow, tmp_path)
    proc.send_signal(sig)
    try:
        _out, err = proc.communicate(timeout=60)  # the engine stops within a few thousand events
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the prediction went on after the signal")
    assert proc.returncode == 130, err
    assert err.strip() == "dbtier: interrupted", err
    assert not _claims(tmp_path) and not list((tmp_path / f"dbtier-{UID}").iterdir())


def test_a_killed_prediction_is_reaped_by_the_next_command(slow, recorded, tmp_path):
    proc = _start_predict(slow, tmp_path)
    (claim,) = _claims(tmp_path)
    proc.kill()
    proc.wait()
    assert claim.is_dir()  # nothing of dbtier's ran after SIGKILL
    done = dbtier("predict", str(recorded), "--workspace", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"removed what an interrupted run left: {claim}" in done.stdout
    assert not claim.exists() and not _claims(tmp_path)
