"""PostgreSQL's loaded clusters kept in the workspace (engines/kept.py keeps, lists and removes them):
a seed is its data directory, its WAL and its one tablespace, linked to each other; on use, its
configuration must still be what dbtier checked when it kept it, and ALTER SYSTEM's file must hold no
setting (as Cluster.check_config requires before any start)."""

from __future__ import annotations

import os
from pathlib import Path

from dbtier.engines.kept import Kept, KeptLoads
from dbtier.engines.postgres.cluster import AUTO_CONF, Seed, _digest
from dbtier.errors import UserError


class KeptClusters(KeptLoads):
    def parts(self, seed: Seed) -> list[tuple[Path, str]]:
        return [(seed.pgdata, "pgdata"), (seed.waldir, "pg_wal"), (seed.tablespace_dir, "ts")]

    def settle(self, pending: Path, final: Path, seed: Seed) -> dict:
        """The data directory's links to its WAL and tablespace pointed at their kept places."""
        for link, target in ((pending / "pgdata" / "pg_wal", final / "pg_wal"),
                             (pending / "pgdata" / "pg_tblspc" / str(seed.tablespace_oid), final / "ts")):
            link.unlink()
            link.symlink_to(target)
        return {"conf_sha256": _digest(pending / "pgdata" / "postgresql.conf"),
                "seed": {"tablespace": seed.tablespace, "tablespace_oid": seed.tablespace_oid}}

    def seed_of(self, path: Path, record: dict) -> Seed:
        s = record["seed"]
        return Seed(path / "pgdata", path / "pg_wal", s["tablespace"], int(s["tablespace_oid"]), path / "ts")

    def check(self, kept: Kept) -> None:
        """Its configuration as dbtier kept it, and nothing in ALTER SYSTEM's file (a server started on a
        copy would read both)."""
        pgdata = kept.path / "pgdata"
        if _digest(pgdata / "postgresql.conf") != kept.record.get("conf_sha256"):
            raise UserError(f"the kept cluster {kept.path}: its postgresql.conf is not what dbtier kept; remove it "
                            f"(dbtier labs remove {kept.key}) and run again")
        auto = pgdata / AUTO_CONF
        if os.path.lexists(auto):
            text = auto.read_bytes()[:1 << 20].decode("utf-8", "replace") if not auto.is_symlink() else "link"
            if any(ln.strip() and not ln.lstrip().startswith("#") for ln in text.splitlines()):
                raise UserError(f"the kept cluster {kept.path}: {AUTO_CONF} holds settings; remove it (dbtier labs "
                                f"remove {kept.key})")
