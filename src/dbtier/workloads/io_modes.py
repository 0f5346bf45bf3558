"""Seed 004: the commands ASE's direct I/O and dsync devices were compared with, on TPC-H's lineitem
(24 million rows there), each timed. Run the workload once per --io-mode (direct, dsync, buffered)
to compare: the seed found reads faster through the file system cache (dbcc tablealloc 96 s dsync
against 381 s direct) and writes far slower written through (create database 4.5 hours dsync
against 7 minutes direct).

PostgreSQL's equivalents, in the seed's order: create database (copy of the template), bulk load
(COPY, as bcp in), insert (rows by one INSERT ... SELECT), update (the first rows' comment, as
`set rowcount` did), create the clustered index (a unique index, then CLUSTER to order the table
by it), create the non-clustered index, update statistics (ANALYZE), alter table (a type change
that rewrites the table and its indexes, as `lock datarows` did), reorg rebuild (VACUUM FULL), and
the read-only allocation check (every page read through the database cache, which verifies each
page's header and checksum, as dbcc tablealloc read and checked every page's allocation without
looking at its rows; amcheck's row-level verify_heapam, dbcc checktable's peer, runs untimed after)."""

from __future__ import annotations

from pathlib import Path

from psycopg import sql

from dbtier.workloads import io_modes_innodb
from dbtier.workloads.base import Footprint, Param, Phase, Workload, WorkloadError, btree_bytes, heap_bytes

DB = "tpcd"
LINEITEM = """
CREATE TABLE lineitem (
    l_orderkey bigint, l_partkey int, l_suppkey int, l_linenumber int, l_quantity int,
    l_extendedprice numeric(15,2), l_discount numeric(15,2), l_tax numeric(15,2), l_returnflag char(1),
    l_linestatus char(1), l_shipdate date, l_commitdate date, l_receiptdate date, l_shipinstruct char(25),
    l_shipmode char(10), l_comment varchar(44)) {}
"""
# dbgen's shape: up to 7 lines per order, parts and suppliers spread, dates over seven years.
ROWS = """
SELECT o, (o * 7919 + n * 104729) %% 200000 + 1, (o * 31 + n) %% 10000 + 1, n, 1 + (o + n) %% 50,
       round((900 + (o * 13 + n) %% 100000 / 10.0)::numeric, 2), ((o + n) %% 11) / 100.0, ((o + 3 * n) %% 9) / 100.0,
       (ARRAY['R','A','N'])[1 + (o + n) %% 3], (ARRAY['O','F'])[1 + (o %% 2)],
       date '1992-01-01' + ((o * 17 + n) %% 2500)::int, date '1992-01-31' + ((o * 17 + n) %% 2500)::int,
       date '1992-01-10' + ((o * 17 + n) %% 2500)::int,
       (ARRAY['DELIVER IN PERSON','COLLECT COD','NONE','TAKE BACK RETURN'])[1 + (o + n) %% 4],
       (ARRAY['REG AIR','AIR','RAIL','SHIP','TRUCK','MAIL','FOB'])[1 + (o + n) %% 7],
       substr(md5((o * 8 + n)::text) || md5(n::text), 1, 10 + ((o + n) %% 34)::int)
FROM generate_series(%(first)s::bigint, %(last)s::bigint) o, generate_series(1, 1 + (o %% 7)::int) n
"""


class IoModes(Workload):
    name = "io-modes"
    seed = "004"
    summary = "seed 004's commands on lineitem (create, load, insert, update, indexes, analyze, rebuild, check)"
    description = (
        "Seed 004 timed ASE commands on a 24 million row lineitem with direct I/O, dsync and raw devices. Here: "
        "lineitem of about ORDERS x 4 rows; create database, COPY, INSERT of a sixtieth more, UPDATE of a "
        "sixtieth, CREATE UNIQUE INDEX + CLUSTER, CREATE INDEX, ANALYZE, an ALTER TABLE that rewrites, VACUUM "
        "FULL, and every page read and verified through shared buffers (pg_prewarm), as dbcc tablealloc. Run it "
        "under each --io-mode to compare.")
    params = (
        Param("orders", int, 150_000, "orders in lineitem, 1 to 7 lines each (about 4 per order)"),
    )
    objects = {"lineitem": "table", "cl": "index", "nl": "index"}
    size_options = ("orders",)
    engines = ("postgres", "mariadb")

    def inserted_orders(self) -> int:
        """The insert's orders: a sixtieth more (the seed: 100,000 rows on bcp's 6 million)."""
        return (self.p["orders"] + 59) // 60

    def loaded_bytes(self) -> dict[str, int]:
        """lineitem at about four lines an order (about 170 bytes a line), a sixtieth more inserted,
        a sixtieth updated, and its two indexes."""
        n = self.p["orders"]
        lines = 4 * (n + self.inserted_orders())
        return {"lineitem": heap_bytes(lines + 4 * (n // 60 + 1), 168), "cl": btree_bytes(lines, 12),
                "nl": btree_bytes(lines, 40)}

    def footprint(self, cache_state: str = "cold") -> Footprint:
        """The loaded sizes twice over: CLUSTER, the rewriting ALTER TABLE and VACUUM FULL each hold the
        old table and indexes beside the new ones until they commit, and log the new ones whole. The
        load file (text, about 130 bytes a line) is outside every device."""
        objects = {name: 2 * size for name, size in self.loaded_bytes().items()}
        return Footprint(objects, wal=3 * sum(objects.values()), scratch=130 * 4 * self.p["orders"], databases=1)

    @property
    def commands(self):
        """The commands in the engine's words: PostgreSQL's here, InnoDB's in io_modes_innodb.py."""
        return io_modes_innodb.InnoDBCommands if self.engine == "mariadb" else PostgresCommands

    def prepare(self, lab, progress) -> None:
        self.extra = self.inserted_orders()
        progress.phase("writing the load file")
        self.staging = self.commands.prepare(lab, self.p["orders"])

    def _create_database(self, lab, progress) -> dict:
        progress.phase("create database")
        self.commands.create_database(lab)
        return {}

    def _load(self, lab, progress) -> dict:
        progress.phase(f"bulk load ({self.commands.LOAD}, as bcp in)")
        self.rows = self.commands.load(lab, self.staging / "lineitem.tbl")
        return {"rows": self.rows}

    def _insert(self, lab, progress) -> dict:
        progress.phase("insert")
        n = self.p["orders"]
        rows = self.commands.insert(lab, n + 1, n + self.extra)
        self.rows += rows
        return {"rows": rows}

    def _update(self, lab, progress) -> dict:
        progress.phase("update")
        return {"rows": self.commands.update(lab, max(1, self.p["orders"] // 60))}

    def _statements(self, name: str, what: str, statements: tuple[str, ...]):
        def run(lab, progress) -> dict:
            progress.phase(f"{name} ({what})")
            self.commands.statements(lab, statements)
            return {"rows": self.rows}
        return run

    def _check(self, lab, progress) -> dict:
        progress.phase("allocation check (every page read and verified)")
        return {"rows": self.rows, **self.commands.check(lab)}

    def phases(self, cache_state: str = "cold") -> list[Phase]:
        steps = [("create database", self._create_database), ("bulk load", self._load), ("insert", self._insert),
                 ("update", self._update)]
        steps += [(name, self._statements(name, what, stmts)) for name, what, stmts in self.commands.STATEMENTS]
        out = [Phase(name, fn, cold=i == 0) for i, (name, fn) in enumerate(steps)]
        # The read-only check last and straight after, as in the seed: what the caches kept is what it finds.
        return out + [Phase("tablealloc check", self._check, cold=False)]

    def verify(self, lab) -> dict:
        checked = self.commands.verify(lab)
        if checked["rows"] != self.rows:
            raise WorkloadError(f"lineitem holds {checked['rows']} rows, {self.rows} were loaded and inserted")
        return checked

    def rates(self, metrics: dict, elapsed_s: float, phase: str = "run", measured: dict | None = None) -> dict:
        return {"rows_per_s": metrics["rows"] / elapsed_s} if metrics.get("rows") else {}


class PostgresCommands:
    """Seed 004's commands in PostgreSQL's words (the module's docstring says which is which)."""
    LOAD = "COPY"
    #: the commands that are one or two statements: phase, progress text, statements ({ts}: the index's place)
    STATEMENTS = (
        ("create clustered index", "unique index, then CLUSTER",
         ("CREATE UNIQUE INDEX cl ON lineitem (l_orderkey, l_linenumber) {ts_cl}", "CLUSTER lineitem USING cl")),
        ("create non-clustered index", "CREATE INDEX",
         ("CREATE INDEX nl ON lineitem (l_suppkey, l_orderkey, l_extendedprice, l_discount, l_shipdate) {ts_nl}",)),
        ("update statistics", "ANALYZE", ("ANALYZE lineitem",)),
        ("alter table", "a type change: the table and its indexes rewritten",
         ("ALTER TABLE lineitem ALTER COLUMN l_quantity TYPE bigint",)),
        ("reorg rebuild", "VACUUM FULL", ("VACUUM FULL lineitem",)),
    )

    @staticmethod
    def prepare(lab, orders: int) -> Path:
        """The load file, written by the server (COPY TO) in its scratch folder: its folder."""
        staging = lab.scratch_dir()
        # The extensions the check and verify() call, in the template the database is copied from:
        # creating them is set-up, not part of any command the seed timed.
        with lab.connect("template1") as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        with lab.connect() as conn:
            conn.execute(sql.SQL("COPY ({}) TO {}").format(sql.SQL(ROWS % {"first": 1, "last": orders}),
                                                           sql.Literal(str(staging / "lineitem.tbl"))))
        return staging

    @staticmethod
    def create_database(lab) -> None:
        lab.create_database(DB)
        with lab.connect(DB) as conn:
            conn.execute(sql.SQL(LINEITEM).format(lab.tablespace("lineitem", "table")))

    @staticmethod
    def load(lab, path: Path) -> int:
        # Frozen as loaded (COPY FREEZE, which needs the table emptied in the same transaction): bcp's
        # pages are final as written, where PostgreSQL's next reader would set every row's hint bits and
        # write every page again, a cost ASE never had (the update below would pay it).
        with lab.connect(DB) as conn, conn.transaction():
            conn.execute("TRUNCATE lineitem")
            return conn.execute(sql.SQL("COPY lineitem FROM {} WITH (FREEZE)").format(sql.Literal(str(path)))).rowcount

    @staticmethod
    def insert(lab, first: int, last: int) -> int:
        with lab.connect(DB) as conn:
            return conn.execute(sql.SQL("INSERT INTO lineitem " + ROWS % {"first": first, "last": last})).rowcount

    @staticmethod
    def update(lab, up_to_order: int) -> int:
        with lab.connect(DB) as conn:
            return conn.execute("UPDATE lineitem SET l_comment = repeat('x', 30) WHERE l_orderkey <= %s",
                                (up_to_order,)).rowcount

    @staticmethod
    def statements(lab, texts: tuple[str, ...]) -> None:
        with lab.connect(DB) as conn:
            for text in texts:
                conn.execute(sql.SQL(text).format(ts_cl=lab.tablespace("cl", "index"),
                                                  ts_nl=lab.tablespace("nl", "index")))

    @staticmethod
    def check(lab) -> dict:
        # dbcc tablealloc checks pages, not rows: reading each page into shared buffers verifies its
        # header and checksum (PageIsVerified), and a damaged page fails the statement.
        with lab.connect(DB) as conn:
            return {"pages": conn.execute("SELECT pg_prewarm('lineitem', 'buffer')").fetchone()[0]}

    @staticmethod
    def verify(lab) -> dict:
        with lab.connect(DB) as conn:
            count = conn.execute("SELECT count(*) FROM lineitem").fetchone()[0]
            problems = conn.execute("SELECT count(*) FROM verify_heapam('lineitem')").fetchone()[0]
            conn.execute("SELECT bt_index_parent_check('cl', true, true)")
            conn.execute("SELECT bt_index_parent_check('nl', true, true)")
        if problems:
            raise WorkloadError(f"verify_heapam found {problems} problems in lineitem")
        return {"rows": count, "amcheck": "clean"}
