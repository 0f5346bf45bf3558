"""MariaDB's loaded servers kept in the workspace (engines/kept.py keeps, lists and removes them): a
seed is a stopped server's data directory, redo log and undo tablespaces. The server is started with
--no-defaults and every setting on its command line, so nothing in the folders configures it; on use,
nothing in them may lead out of them (a link, or a table's file kept elsewhere by DATA DIRECTORY),
which a server started on a copy would follow."""

from __future__ import annotations

import os
from pathlib import Path

from dbtier.engines.kept import Kept, KeptLoads
from dbtier.engines.mariadb.lab import Seed
from dbtier.errors import UserError


class KeptServers(KeptLoads):
    def parts(self, seed: Seed) -> list[tuple[Path, str]]:
        return [(seed.data, "data"), (seed.log, "log"), (seed.undo, "undo")]

    def seed_of(self, path: Path, record: dict) -> Seed:
        return Seed(path / "data", path / "log", path / "undo")

    def check(self, kept: Kept) -> None:
        for root, dirs, files in os.walk(kept.path):
            for name in dirs + files:
                path = os.path.join(root, name)
                if os.path.islink(path) or name.endswith(".isl"):
                    raise UserError(f"the kept cluster {kept.path}: {path} leads out of it; remove it (dbtier labs "
                                    f"remove {kept.key}) and run again")
