"""Seed 000, scenario 1: every row of t read once through its unique GUID index, in random order,
one statement per key, as the article's stored procedure did with a cursor over a shuffled copy of
the keys. A cold database cache and a table several times its size make each lookup go to the
device: the index's leaf page (until the index is cached), then the row's own page."""

from __future__ import annotations

import random

from psycopg import sql

from dbtier.workloads import seed000, seed000_innodb
from dbtier.workloads.base import Param, Workload, WorkloadError

_LOOKUP_FN = """
CREATE FUNCTION dbtier_lookup(keys text[]) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    k text;
    r t%ROWTYPE;
    found_rows bigint := 0;
BEGIN
    FOREACH k IN ARRAY keys LOOP
        SELECT * INTO r FROM t WHERE attribute = k;   -- one statement per key: the seed's cursor loop
        IF FOUND THEN found_rows := found_rows + 1; END IF;
    END LOOP;
    RETURN found_rows;
END $$
"""
_BATCH = 100  # keys per call: progress several times a second on a disk, negligible client traffic


class RandomIndex(Workload):
    name = "random-index"
    seed = "000"
    summary = "every row read once by its unique GUID index, in random order (seed 000 scenario 1)"
    description = (
        "Seed 000 read all 1.73 million rows of an 8 KiB-per-row table through a unique index on a GUID, "
        "in random order, one statement per key (SSD 228 s, HDD 4,800 s: 21x). Here: ROWS rows, the same "
        "columns and row size, a PL/pgSQL loop doing one SELECT per key (MariaDB: a stored procedure; two rows "
        "to each 16 KiB page), from a cold cache.")
    params = (
        Param("rows", int, 16000, "rows in t (one per 8 KiB page); every one is looked up once"),
        Param("data-seed", int, 1, "seed of the generated data and of the lookup order"),
    )
    cache_states = ("cold", "hot", "cross")
    objects = {seed000.TABLE: "table", seed000.INDEX: "index"}
    size_options = ("rows",)
    engines = ("postgres", "mariadb")

    def footprint(self, cache_state: str = "cold"):
        return seed000.footprint(self.p["rows"], index=True)

    @property
    def engine_lookups(self):
        """The table, its index and the lookups in the engine's words: PostgreSQL's here, InnoDB's in
        seed000_innodb.py."""
        return seed000_innodb.InnoDBLookups if self.engine == "mariadb" else PostgresLookups

    def prepare(self, lab, progress) -> None:
        self.pages, self.keys = self.engine_lookups.load(lab, self.p["rows"], self.p["data_seed"], progress)
        random.Random(self.p["data_seed"]).shuffle(self.keys)

    def _lookup(self, lab, keys: list[str], progress, what: str) -> int:
        progress.phase(f"{len(keys):,} {what}", total=len(keys))
        found = 0
        with lab.connect() as conn:
            for lo in range(0, len(keys), _BATCH):
                batch = keys[lo:lo + _BATCH]
                found += self.engine_lookups.lookup(conn, batch)
                progress.advance(len(batch))
        if found != len(keys):
            raise WorkloadError(f"{found} of {len(keys)} keys were found")
        return found

    def run(self, lab, progress) -> dict:
        found = self._lookup(lab, self.keys, progress, "lookups in random order")
        return {"lookups": len(self.keys), "found": found, "table_pages": self.pages}

    def warm_cross(self, lab, progress) -> None:
        """Another random half of the keys, in another order: the index and about half of the rows
        the measured run needs are then cached (where the caches hold them)."""
        other = random.Random(self.p["data_seed"] + 1).sample(self.keys, len(self.keys) // 2)
        self._lookup(lab, other, progress, "lookups of another half of the keys (cross warm-up)")

    def rates(self, metrics: dict, elapsed_s: float, phase: str = "run", measured: dict | None = None) -> dict:
        return {"lookups_per_s": metrics["lookups"] / elapsed_s, "ms_per_lookup": 1e3 * elapsed_s / metrics["lookups"]}


class PostgresLookups:
    """Seed 000's lookups in PostgreSQL: t and its unique index each in its placed tablespace, a
    PL/pgSQL loop of one SELECT per key."""

    @staticmethod
    def load(lab, rows: int, data_seed: int, progress) -> tuple[int, list[str]]:
        """The table and its index made and loaded; returns the table's pages and its keys."""
        with lab.connect() as conn:
            seed000.create_table(lab, conn, rows, data_seed, progress)
            progress.phase("creating the unique index on attribute")
            conn.execute(sql.SQL("CREATE UNIQUE INDEX t_attribute_idx ON t (attribute) {}").format(
                lab.tablespace(seed000.INDEX, "index")))
            conn.execute(_LOOKUP_FN)
            return seed000.finish(conn, rows, progress), seed000.keys(conn)

    @staticmethod
    def lookup(conn, keys: list[str]) -> int:
        """The rows found for keys, one statement each."""
        return conn.execute("SELECT dbtier_lookup(%s)", (keys,)).fetchone()[0]
