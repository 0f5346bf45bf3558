"""Seed 003's three update tests over a_perf, by primary key, with worsening locality:
    1. a = i           for i in 1..100,000      contiguous rows, few blocks
    2. a = 10*i        for i in 1..100,000      every tenth row: a block per few rows
    3. a = 100*i - j   for j in 1..10, i in 1..100,000: ten passes, rows far apart
each `UPDATE a_perf SET a = -a WHERE a = k`, one commit per test (RAM SAN against SCSI: 26.2 s
against 29.0 s, 34.4 against 40.7, 65.5 against 137.8: 1.1x, 1.18x, 2.1x). As in the seed, the
tests run in order on the same table, so keys an earlier test negated are not found by a later
one; every test's count of updated rows is checked against the same arithmetic done here."""

from __future__ import annotations

from dbtier.workloads import seed003, seed003_innodb
from dbtier.errors import UserError
from dbtier.workloads.base import Footprint, Param, Phase, Workload, WorkloadError

_UPDATE_FN = """
CREATE FUNCTION dbtier_update(test int, n bigint) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    updated bigint := 0;
    c bigint;
BEGIN
    IF test = 3 THEN
        FOR j IN 1..10 LOOP
            FOR i IN 1..n LOOP
                UPDATE a_perf SET a = a * (-1) WHERE a = 100 * i - j;
                GET DIAGNOSTICS c = ROW_COUNT; updated := updated + c;
            END LOOP;
        END LOOP;
    ELSE
        FOR i IN 1..n LOOP
            UPDATE a_perf SET a = a * (-1) WHERE a = CASE test WHEN 1 THEN i ELSE 10 * i END;
            GET DIAGNOSTICS c = ROW_COUNT; updated := updated + c;
        END LOOP;
    END IF;
    RETURN updated;
END $$
"""
_LOAD_BATCH = 200_000
TESTS = {1: "a=i", 2: "a=10*i", 3: "a=100*i-j"}


def expected_updates(rows: int, n: int) -> dict[int, int]:
    """Rows each test updates, in order, on keys 1..rows: a key is found while still positive."""
    negated: set[int] = set()
    out = {}
    for test in (1, 2, 3):
        keys = ([i for i in range(1, n + 1)] if test == 1 else [10 * i for i in range(1, n + 1)] if test == 2
                else [100 * i - j for j in range(1, 11) for i in range(1, n + 1)])
        hits = 0
        for k in keys:
            if 1 <= k <= rows and k not in negated:
                negated.add(k)
                hits += 1
        out[test] = hits
    return out


class UpdateLocality(Workload):
    name = "update-locality"
    seed = "003"
    summary = "updates by primary key with stride 1, 10 and 100 (seed 003's three tests)"
    description = (
        "Seed 003 updated a_perf (1,000,000 rows) by primary key: a=i, a=10*i and a=100*i-j (j 1..10), for "
        "i up to 100,000, each test one commit. The further apart the rows, the more blocks each update "
        "reads: SCSI against RAM SAN went from 1.1x to 2.1x. Here: ROWS rows (loaded unmeasured), UPDATES "
        "keys per test (the seed's tenth of the table), the three tests in order, each from a cold cache.")
    params = (
        Param("rows", int, 1_000_000, "rows in a_perf"),
        Param("updates", int, 0, "i runs 1..UPDATES in each test (0: ROWS / 10, as in the seed)",
              minimum=0),
    )
    objects = seed003.OBJECTS
    size_options = ("rows", "updates")
    engines = ("postgres", "mariadb")

    def __init__(self, **values):
        super().__init__(**values)
        if self.p["updates"] > self.p["rows"]:
            raise UserError(f"--updates {self.p['updates']} is more than --rows {self.p['rows']}: keys past the "
                            "table's are never found; give at most --rows (0: a tenth of it, as in the seed)")

    def footprint(self, cache_state: str = "cold") -> Footprint:
        """Each update that finds its row writes a new version of it and a new key (the key changes:
        no HOT update), at most one per row; VACUUM FREEZE and the updates' first touch of each page
        after a checkpoint log full pages. The expected counts are computed here in lists of keys."""
        rows, n = self.p["rows"], self.n
        hits = min(rows, 12 * n)
        objects = seed003.sizes(rows + hits)
        wal = seed003.WAL_PER_INSERT * rows + 2 * sum(objects.values()) + 250 * hits
        return Footprint(objects, wal=wal, client_memory=36 * 10 * n + 70 * hits)

    @property
    def n(self) -> int:
        return self.p["updates"] or max(1, self.p["rows"] // 10)

    @property
    def engine_updates(self):
        """The load, updates and checks in the engine's words: PostgreSQL's here, InnoDB's in seed003_innodb.py."""
        return seed003_innodb.InnoDBUpdates if self.engine == "mariadb" else PostgresUpdates

    def prepare(self, lab, progress) -> None:
        rows = self.p["rows"]
        self.expected = expected_updates(rows, self.n)
        self.engine_updates.load(lab, rows, progress)

    def _test(self, test: int):
        def run(lab, progress) -> dict:
            progress.phase(f"test {test}: {TESTS[test]}, {self.n * (10 if test == 3 else 1):,} updates, one commit")
            updated = self.engine_updates.update(lab, test, self.n)
            if updated != self.expected[test]:
                raise WorkloadError(f"test {test} ({TESTS[test]}) updated {updated} rows, {self.expected[test]} expected")
            return {"statements": self.n * (10 if test == 3 else 1), "rows_updated": updated}
        return run

    def phases(self, cache_state: str = "cold") -> list[Phase]:
        return [Phase(TESTS[t], self._test(t)) for t in (1, 2, 3)]

    def verify(self, lab) -> dict:
        checks, negative = self.engine_updates.check(lab, self.p["rows"])
        if negative != sum(self.expected.values()):
            raise WorkloadError(f"{negative} keys are negated, {sum(self.expected.values())} expected")
        return {**checks, "negated": negative}

    def rates(self, metrics: dict, elapsed_s: float, phase: str = "run", measured: dict | None = None) -> dict:
        return {"updates_per_s": metrics["statements"] / elapsed_s}


class PostgresUpdates:
    """Seed 003's updates in PostgreSQL: a_perf loaded in batches, each test one PL/pgSQL call."""

    @staticmethod
    def load(lab, rows: int, progress) -> None:
        with lab.connect() as conn:
            seed003.create_table(lab, conn)
            conn.execute(_UPDATE_FN)
            progress.phase(f"loading a_perf ({rows:,} rows)", total=rows)
            for lo in range(1, rows + 1, _LOAD_BATCH):
                hi = min(rows, lo + _LOAD_BATCH - 1)
                conn.execute("INSERT INTO a_perf SELECT i, 'Row#' || i FROM generate_series(%s::bigint, %s) i", (lo, hi))
                progress.advance(hi - lo + 1)
            progress.phase("vacuum, analyze, checkpoint")
            conn.execute("VACUUM (FREEZE, ANALYZE) a_perf")
            conn.execute("CHECKPOINT")

    @staticmethod
    def update(lab, test: int, n: int) -> int:
        with lab.connect() as conn:
            return conn.execute("SELECT dbtier_update(%s, %s)", (test, n)).fetchone()[0]

    @staticmethod
    def check(lab, rows: int) -> tuple[dict, int]:
        """The table's checks, and how many keys are negated."""
        with lab.connect() as conn:
            negative = conn.execute("SELECT count(*) FROM a_perf WHERE a < 0").fetchone()[0]
            return seed003.check_table(conn, rows), negative
