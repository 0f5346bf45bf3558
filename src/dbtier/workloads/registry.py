"""The workloads by name. Each module registers its class; `dbtier run NAME` finds it here."""

from __future__ import annotations

import difflib

from dbtier.errors import UserError
from dbtier.workloads.base import Workload

WORKLOADS: dict[str, type[Workload]] = {}


def register(cls: type[Workload]) -> type[Workload]:
    WORKLOADS[cls.name] = cls
    return cls


def _load_all() -> None:
    from dbtier.workloads import (  # noqa: F401  (they register themselves)
        build, index_range, insert_loop, io_modes, merge_join, oltp, random_index, table_scan, update_locality,
        user_pgbench, user_sql)


def names() -> list[str]:
    _load_all()
    return list(WORKLOADS)


def get(name: str) -> type[Workload]:
    _load_all()
    if name not in WORKLOADS:
        hint = difflib.get_close_matches(name, WORKLOADS, 1)
        raise UserError(f"unknown workload {name!r}" + (f"; did you mean {hint[0]}?" if hint else "")
                        + f" (workloads: {', '.join(WORKLOADS)})")
    return WORKLOADS[name]
