"""Seed 000, scenario 2: the same table without its index, so that each lookup is a full table
scan; the article ran a cursor over the first 100 keys (in the table's physical order), each one a
scan of all 1.73 million rows (SSD 2,574 s, HDD 5,572 s: 2.17x). PostgreSQL 18 reads the scan through
read streams: up to 128 KiB per read (io_combine_limit), issued ahead by its I/O workers, as ASE's
asynchronous prefetch did with 64 KiB reads. InnoDB reads a scan a page at a time, and its linear
read-ahead asks for the next extent (64 pages, 1 MiB) with asynchronous reads once a scan has read
most of one."""

from __future__ import annotations

from dbtier.errors import UserError
from dbtier.workloads import seed000, seed000_innodb
from dbtier.workloads.base import Param, Workload, WorkloadError


class TableScan(Workload):
    name = "table-scan"
    seed = "000"
    summary = "full scans of the same table without an index (seed 000 scenario 2)"
    description = (
        "Seed 000 dropped the index and looked up 100 keys, each by a full scan of the table. Here: "
        "ROWS rows and SCANS lookups by full scan, from a cold cache; the table is several times the "
        "database cache, so every scan reads it from the device.")
    params = (
        Param("rows", int, 16000, "rows in t (one per 8 KiB page)"),
        Param("scans", int, 10, "lookups, each a full scan of t"),
        Param("data-seed", int, 1, "seed of the generated data"),
    )
    cache_states = ("cold", "hot", "cross")
    objects = {seed000.TABLE: "table"}
    size_options = ("rows",)
    engines = ("postgres", "mariadb")

    def __init__(self, **values):
        super().__init__(**values)
        if self.p["scans"] > self.p["rows"]:
            raise UserError(f"--scans {self.p['scans']} is more than --rows {self.p['rows']}: each scan looks for "
                            "another row; give at most as many scans as rows")

    def footprint(self, cache_state: str = "cold"):
        return seed000.footprint(self.p["rows"], index=False)

    @property
    def engine_scans(self):
        """The table and its scans in the engine's words: PostgreSQL's here, InnoDB's in seed000_innodb.py."""
        return seed000_innodb.InnoDBScans if self.engine == "mariadb" else PostgresScans

    def prepare(self, lab, progress) -> None:
        self.pages, all_keys = self.engine_scans.load(lab, self.p["rows"], self.p["data_seed"], progress)
        self.keys, self.other_key = all_keys[: self.p["scans"]], all_keys[-1]

    def warm_cross(self, lab, progress) -> None:
        """A scan for another key (the table's last row): it reads the same pages."""
        progress.phase("a scan for another key (cross warm-up)")
        with lab.connect() as conn:
            self.engine_scans.scan(conn, self.other_key)

    def run(self, lab, progress) -> dict:
        progress.phase(f"{len(self.keys)} full scans of t", total=len(self.keys))
        rows = 0
        with lab.connect() as conn:
            for key in self.keys:
                got = self.engine_scans.scan(conn, key)
                if len(got) != 1:
                    raise WorkloadError(f"a scan for key {key} returned {len(got)} rows, not 1")
                rows += len(got)
                progress.advance()
        return {"scans": len(self.keys), "rows_returned": rows, "table_pages": self.pages}

    def rates(self, metrics: dict, elapsed_s: float, phase: str = "run", measured: dict | None = None) -> dict:
        mb = metrics["scans"] * metrics["table_pages"] * self.engine_scans.PAGE / 1048576
        return {"s_per_scan": elapsed_s / metrics["scans"], "scan_mb_per_s": mb / elapsed_s}


class PostgresScans:
    """Seed 000's scans in PostgreSQL: t without an index, each lookup a sequential scan."""

    PAGE = seed000.PAGE

    @staticmethod
    def load(lab, rows: int, data_seed: int, progress) -> tuple[int, list[str]]:
        """The table made and loaded, and the plan checked; returns the table's pages and its keys."""
        with lab.connect() as conn:
            seed000.create_table(lab, conn, rows, data_seed, progress)
            pages = seed000.finish(conn, rows, progress)
            PostgresScans.check_plan(conn)
            return pages, seed000.keys(conn)

    @staticmethod
    def check_plan(conn) -> None:
        """The scenario is a full scan per lookup: no index may serve it."""
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN SELECT * FROM t WHERE attribute = 'x'"))
        if "Seq Scan" not in plan:
            raise WorkloadError(f"expected a sequential scan, the plan is: {' / '.join(plan.splitlines())}")

    @staticmethod
    def scan(conn, key: str) -> list:
        return conn.execute(seed000.SCAN, (key,)).fetchall()
