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

    def _mariadb(self) -> bool:
        return self.engine == "mariadb"

    def prepare(self, lab, progress) -> None:
        if self._mariadb():
            seed000_innodb.create_table(lab, self.p["rows"], self.p["data_seed"], progress)
            self.pages = seed000_innodb.finish(lab, self.p["rows"], progress)
            all_keys = seed000_innodb.keys(lab)
            self.keys, self.other_key = all_keys[: self.p["scans"]], all_keys[-1]
            if seed000_innodb.plan_type(lab) != "ALL":
                raise WorkloadError(f"expected a full scan, the plan's access is {seed000_innodb.plan_type(lab)}")
            return
        with lab.connect() as conn:
            seed000.create_table(lab, conn, self.p["rows"], self.p["data_seed"], progress)
            self.pages = seed000.finish(conn, self.p["rows"], progress)
            all_keys = seed000.keys(conn)
            self.keys = all_keys[: self.p["scans"]]
            self.other_key = all_keys[-1]
            self.check_plan(conn)

    def warm_cross(self, lab, progress) -> None:
        """A scan for another key (the table's last row): it reads the same pages."""
        progress.phase("a scan for another key (cross warm-up)")
        if self._mariadb():
            lab.execute("SELECT * FROM t WHERE attribute = %s", (self.other_key,))
            return
        with lab.connect() as conn:
            conn.execute("SELECT * FROM t WHERE attribute = %s", (self.other_key,)).fetchall()

    @staticmethod
    def check_plan(conn) -> None:
        """The scenario is a full scan per lookup: no index may serve it."""
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN SELECT * FROM t WHERE attribute = 'x'"))
        if "Seq Scan" not in plan:
            raise WorkloadError(f"expected a sequential scan, the plan is: {' / '.join(plan.splitlines())}")

    def run(self, lab, progress) -> dict:
        progress.phase(f"{len(self.keys)} full scans of t", total=len(self.keys))
        rows = 0
        with lab.connect() as conn:
            for key in self.keys:
                if self._mariadb():
                    with conn.cursor() as cur:
                        cur.execute("SELECT * FROM t WHERE attribute = %s", (key,))
                        got = cur.fetchall()
                else:
                    got = conn.execute("SELECT * FROM t WHERE attribute = %s", (key,)).fetchall()
                if len(got) != 1:
                    raise WorkloadError(f"a scan for key {key} returned {len(got)} rows, not 1")
                rows += len(got)
                progress.advance()
        return {"scans": len(self.keys), "rows_returned": rows, "table_pages": self.pages}

    def rates(self, metrics: dict, elapsed_s: float, phase: str = "run", measured: dict | None = None) -> dict:
        page = seed000_innodb.PAGE if self._mariadb() else seed000.PAGE
        mb = metrics["scans"] * metrics["table_pages"] * page / 1048576
        return {"s_per_scan": elapsed_s / metrics["scans"], "scan_mb_per_s": mb / elapsed_s}
