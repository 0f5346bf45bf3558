"""Load once, run many: a workload's data loaded in a seed lab (one device, the emulation paused) and
copied into the labs that measure it. A user's load (a dump, setup files, a client's prepare command)
is kept in the workspace under a key of what made it, so a later run, compare or verify of the same
load copies the kept cluster instead of loading again (the engine's kept clusters).

    with loaded_seed(workload, options, engine, progress_for, say) as (seed, info):
        run_workload(..., replace(options, seed=seed), ...)     # info: what the result records of it

The key: the workload's load identity (its files' sha256, its load's own parameters), the server's
version, and the settings given (--set, production's), which may shape what a load writes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from pathlib import Path
from typing import Callable, ContextManager

from dbtier import engines
from dbtier.workloads.base import Progress, Workload


def load_key(identity: dict, engine: str, version: str, settings: dict[str, str]) -> str:
    text = json.dumps({"load": identity, "engine": engine, "version": version, "settings": settings},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _made_by(workload: Workload, identity: dict) -> dict:
    """What a listing shows of a load: the workload, its files (paths and sha256), its own parameters."""
    return {"workload": workload.name, "files": [f for f in workload.files() if f["option"] in ("restore", "setup")],
            **{k: v for k, v in identity.items() if k not in ("restore", "setup")}}


def loads_a_seed(workload: Workload, options, engine: str, kept_only: bool = False) -> bool:
    """Whether loaded_seed() would load the workload into a new seed lab (not one kept earlier): the
    room that takes is checked before anything is made. kept_only: a seed lab is made only for a load
    that is kept (a single run's); otherwise any load without a kept one makes one (compare's)."""
    from dbtier.workspace import Workspace

    identity = workload.load_identity()
    if identity is None:
        return not kept_only
    db_engine = engines.get(engine)
    root = Workspace.locate(options.workspace)
    key = load_key(identity, engine, db_engine.version(options), dict(options.sets))
    return not any(k.key == key for k in db_engine.kept_clusters(root).entries())


@contextlib.contextmanager
def loaded_seed(workload: Workload, options, engine: str, progress_for: Callable[[], ContextManager[Progress]],
                say: Callable[[str], None], keep: bool = True, identity: dict | None = None):
    """Yields (a Seed holding the workload's data, what to record of it or None). With `keep` and a
    workload whose load has an identity, a kept cluster of the same key is used (no load at all), or
    the load is kept for the next run. progress_for(): a context giving the load's Progress."""
    from dbtier.workspace import Workspace

    db_engine = engines.get(engine)
    identity = (identity or workload.load_identity()) if keep and db_engine.keeps_loads else None
    store = key = None
    if identity is not None:
        store = db_engine.kept_clusters(Workspace.open(options.workspace).root)
        key = load_key(identity, engine, db_engine.version(options), dict(options.sets))
        with store.use(key) as kept:
            if kept is not None:
                say(f"reusing the loaded cluster from {kept.created} (key {key}; dbtier labs lists it)")
                workload.reuse(kept.record["load"])
                yield kept.seed, {"key": key, "reused": True, "kept_at": kept.created}
                return
    with db_engine.seed_lab(options, say) as seed_lab:
        with progress_for() as progress:
            workload.prepare(seed_lab.handle, progress)
        seed = seed_lab.seed()
        if store is None:
            yield seed, None
            return
        record = {"made_by": _made_by(workload, identity), "identity": identity,
                  "engine": {"name": engine, "version": db_engine.version(options)}, "settings": dict(options.sets),
                  "load": workload.load_record()}
        kept = store.keep(seed_lab, seed, key, record)
        if kept is None:
            say(f"the loaded cluster is not kept for later runs: larger than the {store.cap_bytes() >> 20} MB that "
                "kept clusters may take")
            yield seed, {"key": key, "reused": False, "kept_at": None}
            return
    try:
        with store.use(key) as kept:
            if kept is None:  # removed between keeping and use: not expected, but never a run on nothing
                raise RuntimeError(f"the kept cluster {key} went away before it was used")
            yield kept.seed, {"key": key, "reused": False, "kept_at": kept.created}
    except BaseException:  # a run that fails leaves nothing behind, the load it kept included
        with contextlib.suppress(Exception):
            store.remove(key)
        raise


def describe(kept) -> dict:
    """One kept cluster as `dbtier labs` lists it."""
    record = kept.record
    return {"key": kept.key, "made_by": record.get("made_by", {}), "engine": record.get("engine", {}),
            "settings": record.get("settings", {}), "bytes": int(record.get("bytes", 0)),
            "created": record.get("created"), "age_s": max(0.0, time.time() - float(record.get("created", 0))),
            "path": str(kept.path)}


def kept_list(workspace: Path | None = None) -> list[dict]:
    """Every engine's kept loads (one folder holds them all, each record naming its engine)."""
    from dbtier.engines.kept import KeptLoads
    from dbtier.workspace import Workspace
    return [describe(k) for k in KeptLoads(Workspace.locate(workspace)).entries()]


def remove(keys: list[str], workspace: Path | None = None) -> list[tuple[str, int]]:
    """Removes the kept loads named, of any engine; returns (key, bytes) of each."""
    from dbtier.engines.kept import KeptLoads
    from dbtier.workspace import Workspace
    store = KeptLoads(Workspace.locate(workspace))
    return [(key, store.remove(key)) for key in keys]
