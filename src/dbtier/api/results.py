"""A run directory as tables: `load(path)` reads the result.json a `run` or `compare` wrote (and
trace.parquet where the run recorded one) into pandas DataFrames, one row per run, phase, device,
object or wait event, each with the run and phase it belongs to as its first columns."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dbtier.errors import UserError
from dbtier.report import jsonout

#: the figures of a phase that are numbers of their own (the rest are tables)
PHASE_FIGURES = ("elapsed_s", "server_cpu_s", "io_wait_s", "client_cpu_s", "host_steal_s", "emulation_spin_s")


def _read_doc(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise UserError(f"{path} is not a dbtier result (no schema_version)")
    jsonout.check_version(doc, path)
    return doc


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
        for name, _, folder in self.runs_docs:
            parquet = folder / "trace.parquet" if folder else None
            if parquet and parquet.is_file():
                import pyarrow.parquet as pq

                frame = pq.read_table(parquet).to_pandas()
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

    def __repr__(self) -> str:
        names = ", ".join(name for name, _, _ in self.runs_docs)
        return f"<dbtier {self.kind} {self.path} ({names})>"


def load(path) -> Result:
    """The run directory at `path` (of `dbtier run` or `dbtier compare`), or its result.json."""
    path = Path(path)
    doc_path = path / "result.json" if path.is_dir() else path
    if not doc_path.is_file():
        raise UserError(f"{path} holds no result.json: give a run directory that dbtier run or compare wrote")
    doc = _read_doc(doc_path)
    # a --json copy names the run directory it belongs to (its trace is there)
    folder = Path(doc["run_dir"]) if doc.get("run_dir") and Path(doc["run_dir"]).is_dir() else doc_path.parent
    result = Result(folder, doc)
    if doc.get("kind") == "compare":
        configs = doc.get("configurations") or []
        summaries = doc.get("results") or []
        for i, run_dir in enumerate(doc.get("run_dirs") or []):
            name = configs[i]["name"] if i < len(configs) else f"run{i}"
            run_path = Path(run_dir)
            if (run_path / "result.json").is_file():  # the layout's own, full document
                result.runs_docs.append((name, _read_doc(run_path / "result.json"), run_path))
            elif i < len(summaries):
                result.runs_docs.append((name, summaries[i], None))
    elif doc.get("kind", "run") == "run":
        result.runs_docs.append((_run_name(doc, doc.get("workload", "run")), doc, folder))
    else:
        raise UserError(f"{doc_path} is a {doc.get('kind')} result; load reads those of run and compare")
    return result
