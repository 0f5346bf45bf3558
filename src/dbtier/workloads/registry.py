"""The workloads by name: a table of where each is defined, loaded when asked for. `dbtier run NAME`
finds a workload here; adding one is a line here and its module (no module registers itself, so
nothing here imports the workloads until one is wanted, and no workload imports this)."""

from __future__ import annotations

import difflib
import importlib

from dbtier.errors import UserError
from dbtier.workloads.base import Workload

#: name -> (module in dbtier.workloads, class), in the order `dbtier run --help` lists them (by module)
WORKLOADS: dict[str, tuple[str, str]] = {
    "build": ("build", "Build"),
    "index-range": ("index_range", "IndexRange"),
    "insert-loop": ("insert_loop", "InsertLoop"),
    "io-modes": ("io_modes", "IoModes"),
    "merge-join": ("merge_join", "MergeJoin"),
    "oltp": ("oltp", "Oltp"),
    "random-index": ("random_index", "RandomIndex"),
    "table-scan": ("table_scan", "TableScan"),
    "update-locality": ("update_locality", "UpdateLocality"),
    "pgbench": ("user_pgbench", "UserPgbench"),
    "sql": ("user_sql", "UserSql"),
    "replay": ("replay", "Replay"),
    "client": ("client", "Client"),
}


def names() -> list[str]:
    return list(WORKLOADS)


def get(name: str) -> type[Workload]:
    if name not in WORKLOADS:
        hint = difflib.get_close_matches(name, WORKLOADS, 1)
        raise UserError(f"unknown workload {name!r}" + (f"; did you mean {hint[0]}?" if hint else "")
                        + f" (workloads: {', '.join(WORKLOADS)})")
    module, cls = WORKLOADS[name]
    found = getattr(importlib.import_module(f"dbtier.workloads.{module}"), cls)
    if found.name != name:
        raise RuntimeError(f"dbtier.workloads.{module}.{cls} is named {found.name!r}, not {name!r}")
    return found
