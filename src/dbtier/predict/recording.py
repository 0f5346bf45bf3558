"""A recorded run, as a prediction reads it: its result, its trace (program calls, device requests,
waits between processes), the file layout on its devices and the course of the run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from dbtier.errors import UserError
from dbtier.report import jsonout
from dbtier.measure import trace


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

    @property
    def devices(self) -> list[dict]:
        return self.result["lab"]["devices"]

    @property
    def measured(self) -> list[dict]:
        return [t for t in self.meta["timeline"] if t["event"] == "measured"]

    @property
    def phases(self) -> list[dict]:
        """The recorded result of each measured phase, in order."""
        return self.result.get("phases") or [self.result]


def _fail(run_dir: Path, why: str) -> UserError:
    return UserError(f"{run_dir}: {why}")


def load(run_dir: Path) -> Recording:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir} is not a directory; give a run directory that 'dbtier run --trace' wrote")
    result_path = run_dir / "result.json"
    if not result_path.is_file():
        raise _fail(run_dir, "not a dbtier run directory (no result.json); give one that 'dbtier run --trace' wrote")
    try:
        result = json.loads(result_path.read_bytes())
    except (OSError, ValueError) as exc:
        raise _fail(run_dir, f"result.json cannot be read ({exc}); it is damaged") from None
    if isinstance(result, dict):
        jsonout.check_version(result, result_path)
    if not isinstance(result, dict) or result.get("kind") != "run":
        kind = result.get("kind") if isinstance(result, dict) else None
        raise _fail(run_dir, f"a {kind or 'non-run'} result, not one run's; give the run directory of one layout"
                    if kind else "result.json is not a dbtier run's result")
    path = run_dir / "trace.parquet"
    if not path.is_file():
        raise _fail(run_dir, "the run was recorded without --trace, and a prediction replays the trace; run it "
                    "again with --trace")
    try:
        parquet = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several kinds for a damaged file
        raise _fail(run_dir, f"trace.parquet cannot be read ({str(exc).splitlines()[0]}); it is damaged") from None
    md = parquet.schema.metadata or {}
    if b"dbtier" not in md:
        raise _fail(run_dir, "trace.parquet was not written by dbtier (no description in it)")
    meta = json.loads(md[b"dbtier"])
    trace.check_format(meta.get("trace_format", 1), path)
    if "timeline" not in meta or b"dbtier_layout" not in md:
        raise _fail(run_dir, "the trace has no record of the run's course or file layout; record it again with --trace")
    table = json.loads(md.get(b"dbtier_files", b"[]"))
    files = {int(i): p for i, _dev, p in table}
    file_devices = {int(i): int(dev) for i, dev, _p in table}
    names = {(int(db), int(node)): (name, kind) for db, node, name, kind in meta.get("names", [])}
    records = trace.from_table(parquet)
    txns = None
    if (run_dir / "transactions.parquet").is_file():
        t = pq.read_table(run_dir / "transactions.parquet")
        txns = {"script": np.asarray(t["script"].cast("string").to_pylist(), dtype=object),
                **{k: t[k].to_numpy() for k in ("client", "end_ns", "latency_us")}}
    return Recording(run_dir, result, meta, records, files, file_devices, json.loads(md[b"dbtier_layout"]), names,
                     txns)
