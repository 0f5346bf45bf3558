"""A run directory as tables: `load(path)` reads the result.json a `run` or `compare` wrote (and
trace.parquet where the run recorded one) into pandas DataFrames, one row per run, phase, device,
object or wait event, each with the run and phase it belongs to as its first columns. It reads every
other document dbtier writes too: a prediction as two runs (recorded and predicted), an advice's
placements as a table of their own, any other kind as its document."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePath

import pandas as pd

from dbtier.errors import UserError
from dbtier.prediction import recording
from dbtier.report import jsonout

#: the figures of a phase that are numbers of their own (the rest are tables)
PHASE_FIGURES = ("elapsed_s", "server_cpu_s", "io_wait_s", "client_cpu_s", "host_steal_s", "emulation_spin_s")


#: a run directory's name as dbtier makes them (WORKLOAD-LAYOUT-<time>): a compare's layouts are read
#: only by such a name, beside the comparison's own directory
_RUN_DIR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,250}$")


#: every kind of document a command writes (the published schema's kinds)
KINDS = ("run", "compare", "reproduce", "demo", "advice", "prediction", "iobench", "exec", "devices-validate",
         "profile")


def _read_doc(folder: Path, name: str = "result.json", kinds=KINDS) -> dict | None:
    """folder/name, checked: JSON of this schema_version, of one of `kinds`, following the published
    schema (None: no such file)."""
    path = folder / name
    doc = recording.read_json(folder, name)
    if doc is None:
        return None
    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise UserError(f"{path} is not a dbtier result (no schema_version)")
    jsonout.check_version(doc, path)
    kind = doc.get("kind", "run")
    if kind not in kinds:
        raise UserError(f"{path} is a {str(kind)[:40]} result, not one of {', '.join(kinds)}")
    return recording.check_result(doc, path)


def _trace_table(folder: Path | None, doc: dict):
    """A run's trace.parquet, checked as a prediction checks it (None: the run recorded none)."""
    if folder is None:
        return None
    names = [d["name"] for d in (doc.get("lab") or {}).get("devices", [])]
    read = recording.read_trace(folder, names)
    return read[0] if read else None


def _phases(doc: dict) -> list[dict]:
    """A run's measured phases: its `phases`, or the one phase its top level holds."""
    if doc.get("phases"):
        return doc["phases"]
    return [{"phase": doc.get("phase", "run"), **doc}]


def _prefixed(prefix: str, mapping: dict | None) -> dict:
    """A nested table's figures as columns of their own: page_cache.hit_pct, rate.lookups_per_s."""
    return {f"{prefix}.{k}": v for k, v in (mapping or {}).items()}


def _run_name(doc: dict, fallback: str) -> str:
    return (doc.get("configuration") or {}).get("name") or fallback


@dataclass
class Result:
    """One run directory. `doc` is its result.json as written; the tables are built from it."""
    path: Path
    doc: dict
    runs_docs: list[tuple[str, dict, Path | None]] = field(default_factory=list)  # (name, run doc, its folder)
    traces: dict = field(default_factory=dict)  # run name -> its trace (a pyarrow Table), checked on loading

    @property
    def kind(self) -> str:
        return self.doc.get("kind", "run")

    @property
    def runs(self) -> pd.DataFrame:
        """One row per run: what ran, on what, and its elapsed, CPU and I/O wait (a comparison adds
        each layout's speed-up over the first)."""
        speedups = self.doc.get("speedups") or []
        rows = []
        for i, (name, doc, folder) in enumerate(self.runs_docs):
            lab = doc.get("lab") or {}
            row = {"run": name, "workload": doc.get("workload", self.doc.get("workload")),
                   "cache_state": doc.get("cache_state"), "io_mode": lab.get("io_mode"),
                   "cpu_scale": lab.get("cpu_scale"), "started": doc.get("started"),
                   "devices": ", ".join(f"{d['name']}={d['profile']}" for d in lab.get("devices", [])),
                   "run_dir": str(folder) if folder else None}
            row.update({k: doc.get(k) for k in PHASE_FIGURES})
            if speedups:
                row["speedup"] = speedups[i] if i < len(speedups) else None
            rows.append(row)
        return pd.DataFrame(rows)

    @property
    def phases(self) -> pd.DataFrame:
        """One row per run and phase: its figures, and the workload's metrics and rates."""
        return pd.DataFrame([{**where, **{k: ph.get(k) for k in PHASE_FIGURES},
                              **_prefixed("metric", ph.get("metrics")), **_prefixed("rate", ph.get("rates"))}
                             for where, ph in self._each_phase()])

    @property
    def devices(self) -> pd.DataFrame:
        """One row per run, phase and device: iostat's figures, the page cache's and the emulation's
        lateness."""
        return pd.DataFrame([{**where, "device": dev.get("device"), "profile": dev.get("profile"),
                              "kind": dev.get("kind"), **(dev.get("iostat") or {}),
                              **_prefixed("page_cache", dev.get("page_cache")),
                              **_prefixed("lateness", dev.get("lateness"))}
                             for where, ph in self._each_phase() for dev in ph.get("devices") or []])

    @property
    def objects(self) -> pd.DataFrame:
        """One row per run, phase and database object (table, index, WAL, temp files): its I/O."""
        return self._rows("object_io")

    @property
    def wait_events(self) -> pd.DataFrame:
        """One row per run, phase and wait event: the top timed events, as the seeds' Statspack and
        sp_sysmon reports list them."""
        return self._rows("top_events")

    @property
    def trace(self) -> pd.DataFrame:
        """Every I/O the runs recorded (run with --trace), one row per request or call; empty when
        none was recorded."""
        frames = []
        for name, _, _folder in self.runs_docs:
            table = self.traces.get(name)
            if table is not None:
                frame = table.to_pandas()
                frame.insert(0, "run", name)
                frames.append(frame)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def _each_phase(self):
        """(the run and phase a row belongs to, the phase's document), for every phase of every run"""
        for name, doc, _ in self.runs_docs:
            for ph in _phases(doc):
                yield {"run": name, "phase": ph.get("phase")}, ph

    def _rows(self, key: str) -> pd.DataFrame:
        return pd.DataFrame([{**where, **item} for where, ph in self._each_phase() for item in ph.get(key) or []])

    @property
    def comparison(self) -> pd.DataFrame:
        """A comparison's answer where it is: one row per phase (transaction empty) and per transaction
        type or script, and layout: elapsed (or tps), latency percentiles, and the speed-up against
        the first layout (a transaction's by its mean latency)."""
        if self.kind != "compare":
            return pd.DataFrame()
        rows = [{"phase": ph["phase"], "transaction": None, "layout": lay["name"], "figure": ph["figure"],
                 "value": lay["value"], "elapsed_s": lay["elapsed_s"], "speedup": lay["speedup"]}
                for ph in self.doc.get("phases") or [] for lay in ph["layouts"]]
        rows += [{"phase": sc["phase"], "transaction": sc["script"], "layout": lay["name"], "figure": "tps",
                  "value": lay["tps"], **{k: lay.get(k) for k in ("mean_ms", "p50_ms", "p95_ms", "p99_ms")},
                  "speedup": lay["speedup"]}
                 for sc in self.doc.get("scripts") or [] for lay in sc["layouts"]]
        return pd.DataFrame(rows)

    @property
    def placements(self) -> pd.DataFrame:
        """An advice's placements, one row each: the recommended one first, then the alternatives, with
        what was predicted and, for those verified live, what was measured."""
        if self.kind != "advice":
            return pd.DataFrame()
        verified = {v.get("place"): v for v in self.doc.get("verify") or []}
        rows = []
        for rank, option in enumerate([self.doc.get("recommended") or {}, *(self.doc.get("alternatives") or [])], 1):
            v = verified.get(option.get("place"), {})
            rows.append({"rank": rank, "place": option.get("place"), "fast": ", ".join(option.get("fast") or []),
                         "fast_bytes": option.get("fast_bytes"), "predicted": option.get("value"),
                         "speedup": option.get("speedup"), "cost": option.get("cost"),
                         "measured": v.get("measured"), "run_dir": v.get("run_dir")})
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        names = ", ".join(name for name, _, _ in self.runs_docs)
        return f"<dbtier {self.kind} {self.path} ({names})>"


def from_document(doc: dict, path: Path) -> Result:
    """A document dbtier made in this process (a prediction), as load would read it from a file."""
    result = Result(Path(path), doc)
    _fill(result, doc, Path(path).parent if Path(path).suffix else Path(path))
    return result


def load(path) -> Result:
    """The run directory at `path` (of `dbtier run` or `dbtier compare`), or its result.json. Every file
    is checked as it is read (see prediction/recording.py), and only files in that directory are read: a
    path written inside a document is never followed. A comparison's layouts are the run directories
    beside its own, found by their names."""
    path = Path(path)
    folder, name = (path, "result.json") if path.is_dir() else (path.parent, path.name)
    doc = _read_doc(folder, name)
    if doc is None:
        raise UserError(f"{path} holds no result.json: give a run directory that dbtier run or compare wrote")
    result = Result(folder, doc)
    _fill(result, doc, folder)
    return result


def _fill(result: Result, doc: dict, folder: Path) -> None:
    """The runs of a document: a comparison's layouts beside it, a prediction's two sides, a run."""
    if doc.get("kind") == "compare":
        configs = doc.get("configurations") or []
        summaries = doc.get("results") or []
        for i, recorded in enumerate(doc.get("run_dirs") or []):
            run_name = configs[i]["name"] if i < len(configs) else f"run{i}"
            own = _layout_dir(folder, recorded)
            run_doc = _read_doc(own, kinds=("run",)) if own else None
            if run_doc is not None:  # the layout's own, full document
                result.runs_docs.append((run_name, run_doc, own))
                result.traces[run_name] = _trace_table(own, run_doc)
            elif i < len(summaries):
                result.runs_docs.append((run_name, summaries[i], None))
    elif doc.get("kind") == "prediction":  # the recorded run and the predicted one, phase by phase
        for side in ("recorded", "predicted"):
            phases = [{"phase": ph.get("phase"), **(ph.get(side) or {})} for ph in doc.get("phases") or []]
            result.runs_docs.append((side, {"workload": doc.get("workload"), "phases": phases,
                                            **{k: sum(ph.get(k) or 0 for ph in phases) for k in PHASE_FIGURES}},
                                     None))
    elif doc.get("kind") in ("run",):
        run_name = _run_name(doc, doc.get("workload", "run"))
        result.runs_docs.append((run_name, doc, folder))
        result.traces[run_name] = _trace_table(folder, doc)
    # any other kind: its document (.doc), and an advice's placements


def _layout_dir(folder: Path, recorded: str) -> Path | None:
    """A compare's layout directory: the one named as recorded, beside the comparison's directory
    (compare writes them all into one output folder). Only its name is taken from the document."""
    leaf = PurePath(recorded).name
    if not _RUN_DIR_NAME.match(leaf) or leaf in (".", ".."):
        return None
    own = folder.resolve().parent / leaf
    return own if own.is_dir() and not own.is_symlink() else None
