"""Database engines behind one interface (engines/base.py): what an experiment asks of the database
it runs on: PostgreSQL (engines/postgres/) and MariaDB (engines/mariadb/); the experiment layer
(dbtier.experiments) reaches an engine only through `get(name)`, so adding one is a folder here and a
line in this table.

    engine = engines.get("postgres")
    placement = engine.parse_placement(["data=hdd,wal=ssd"], ["hdd", "ssd"])
    with engine.lab(devices, placement, engine.lab_options(...), say) as lab: ..."""

from __future__ import annotations

import difflib
import importlib

from dbtier.errors import UserError

#: name -> (module, the engine object in it)
ENGINES = {"postgres": ("dbtier.engines.postgres.engine", "POSTGRES"),
           "mariadb": ("dbtier.engines.mariadb.engine", "MARIADB")}


def names() -> list[str]:
    return list(ENGINES)


def get(name: str):
    """The engine of that name (an engines.base.Engine)."""
    if name not in ENGINES:
        hint = difflib.get_close_matches(name, ENGINES, 1)
        raise UserError(f"--engine {name}: not an engine dbtier runs" + (f"; did you mean {hint[0]}?" if hint else "")
                        + f" (engines: {', '.join(ENGINES)})")
    module, attr = ENGINES[name]
    return getattr(importlib.import_module(module), attr)
