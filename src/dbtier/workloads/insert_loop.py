"""Seed 003's insert test: a million single-row INSERTs of (i, 'Row#' || i) in a PL/SQL loop with one
commit at the end (RAM SAN 119 s, SCSI disk 130 s: 1.09x). The loop is CPU-bound: rows go into the
database cache, and the only device work is the WAL (written as its buffers fill, synced at the
commit) and dirty pages the cache cannot keep."""

from __future__ import annotations

from dbtier.workloads import seed003, seed003_innodb
from dbtier.workloads.base import Footprint, Param, Workload


class InsertLoop(Workload):
    name = "insert-loop"
    seed = "003"
    summary = "single-row INSERTs in a PL/pgSQL loop, one commit (seed 003)"
    description = (
        "Seed 003 inserted 1,000,000 rows one by one into a_perf (a primary key, b varchar) in a PL/SQL "
        "loop with one commit: 119 s on a RAM SAN, 130 s on a SCSI disk. Here: ROWS inserts by a "
        "PL/pgSQL procedure (MariaDB: a stored procedure) into an empty a_perf, one transaction, measured from a "
        "cold cache.")
    params = (Param("rows", int, 1_000_000, "rows inserted, one INSERT each, one commit at the end"),)
    objects = seed003.OBJECTS
    size_options = ("rows",)
    engines = ("postgres", "mariadb")

    @property
    def engine_inserts(self):
        """The table, the loop and the checks in the engine's words: PostgreSQL's here, InnoDB's in
        seed003_innodb.py."""
        return seed003_innodb.InnoDBInserts if self.engine == "mariadb" else PostgresInserts

    def footprint(self, cache_state: str = "cold") -> Footprint:
        """Every insert logs its row and its key; each page gets a full-page image after a checkpoint."""
        objects = seed003.sizes(self.p["rows"])
        return Footprint(objects, wal=seed003.WAL_PER_INSERT * self.p["rows"] + sum(objects.values()))

    def prepare(self, lab, progress) -> None:
        progress.phase("creating a_perf")
        self.engine_inserts.create(lab)

    def run(self, lab, progress) -> dict:
        progress.phase(f"{self.p['rows']:,} single-row inserts, one commit")
        self.engine_inserts.insert(lab, self.p["rows"])
        return {"inserts": self.p["rows"]}

    def verify(self, lab) -> dict:
        return self.engine_inserts.check(lab, self.p["rows"])

    def rates(self, metrics: dict, elapsed_s: float, phase: str = "run", measured: dict | None = None) -> dict:
        return {"inserts_per_s": metrics["inserts"] / elapsed_s}


class PostgresInserts:
    """Seed 003's inserts in PostgreSQL: a_perf in its placed tablespace, a PL/pgSQL procedure's loop."""

    @staticmethod
    def create(lab) -> None:
        with lab.connect() as conn:
            seed003.create_table(lab, conn)
            conn.execute("CHECKPOINT")

    @staticmethod
    def insert(lab, rows: int) -> None:
        with lab.connect() as conn:
            conn.execute("CALL dbtier_insert_loop(1, %s)", (rows,))

    @staticmethod
    def check(lab, rows: int) -> dict:
        """The table's checks, and its keys running from 1 to rows."""
        with lab.connect() as conn:
            checks = seed003.check_table(conn, rows)
            low, high = conn.execute("SELECT min(a), max(a) FROM a_perf").fetchone()
        if (low, high) != (1, rows):
            raise seed003.WorkloadError(f"a_perf keys run from {low} to {high}, not 1 to {rows}")
        return checks
