"""Seed 001: count(*) of the census rows born in Florida, Puerto Rico and Nevada, through an index on
place of birth that alone sits on another device (the article moved it between a six-disk RAID and
an SSD), each query from a cold cache, then again hot, then "cross": after another state's query
ran cold and hot, so some of the index is cached and some is not. The article: the SSD index took
3-10% of the disk index's time cold, under 20% cross, 70-85% hot."""

from __future__ import annotations

from psycopg import sql

from dbtier.workloads import census
from dbtier.workloads.base import Footprint, Param, Phase, Workload, WorkloadError

ORDER = (12, 72, 32)                      # Florida, Puerto Rico, Nevada: the article's order
CROSS = ((12, 72), (72, 32), (32, 12))    # warm with the first, measure the second
PLANS = {
    # The article's plan: an Index Scan fetching each row from the table as the index yields it.
    # PostgreSQL 18 would otherwise answer count(*) from the index alone (index-only scan) or
    # through a bitmap; both change what is read, so they are off unless --plan planner.
    "index": ("SET enable_bitmapscan = off", "SET enable_indexonlyscan = off", "SET enable_seqscan = off"),
    "bitmap": ("SET enable_indexscan = off", "SET enable_indexonlyscan = off", "SET enable_seqscan = off"),
    "planner": (),
}
_PLAN_NODE = {"index": "Index Scan using pob_idx", "bitmap": "Bitmap Index Scan on pob_idx", "planner": "pob_idx"}


class IndexRange(Workload):
    name = "index-range"
    seed = "001"
    summary = "count(*) by place of birth through an index on its own device; cold, hot, cross (seed 001)"
    description = (
        "Seed 001 loaded the 1990 census sample (2.46 million rows of 125 columns, 1 GB, PostgreSQL 8.3) and "
        "ran count(*) WHERE pob = 12 / 72 / 32 (Florida 54,445 rows, Puerto Rico 10,134, Nevada 4,722) "
        "through an index on pob on a six-disk RAID or on an SSD. Here: ROWS generated rows with the same "
        "columns and the same shares for those states; place pob_idx with --place pob_idx=DEVICE. Phases: "
        "each state cold then hot, then cross (Florida warm, Puerto Rico measured; PR then Nevada; NV then FL).")
    params = (
        Param("rows", int, 200_000, "rows in census (about 20 per 8 KiB page)"),
        Param("plan", str, "index", "index: the article's Index Scan; bitmap: a Bitmap Heap Scan; planner: "
                                    "PostgreSQL's own choice", choices=tuple(PLANS)),
        Param("data-seed", int, 1, "seed of the generated data"),
    )
    objects = {census.TABLE: "table", census.PKEY: "index", census.INDEX: "index"}
    size_options = ("rows",)

    def footprint(self, cache_state: str = "cold") -> Footprint:
        """The load logs every row and primary-key entry, the index build its pages, VACUUM FREEZE a
        full-page image of each table page."""
        objects = census.sizes(self.p["rows"])
        return Footprint(objects, wal=2 * sum(objects.values()) + 64 * self.p["rows"])

    def prepare(self, lab, progress) -> None:
        with lab.connect() as conn:
            census.create(lab, conn, self.p["rows"], self.p["data_seed"], progress)
            progress.phase("creating the index on pob, vacuum, analyze, checkpoint")
            conn.execute(sql.SQL("CREATE INDEX pob_idx ON census (pob) {}").format(lab.tablespace(census.INDEX, "index")))
            conn.execute("VACUUM (FREEZE, ANALYZE) census")
            conn.execute("CHECKPOINT")
            self.expected = dict(conn.execute("SELECT pob, count(*) FROM census WHERE pob = ANY(%s) GROUP BY pob",
                                              (list(ORDER),)).fetchall())
            self.table_pages = conn.execute("SELECT pg_relation_size('census') / 8192").fetchone()[0]
            for s in PLANS[self.p["plan"]]:
                conn.execute(s)
            for pob in ORDER:
                plan = " / ".join(r[0] for r in conn.execute("EXPLAIN SELECT count(*) FROM census WHERE pob = %s",
                                                             (pob,)))
                if _PLAN_NODE[self.p["plan"]] not in plan:
                    raise WorkloadError(f"pob = {pob}: expected {_PLAN_NODE[self.p['plan']]}, the plan is: {plan}")

    def _query(self, pob: int):
        state = census.QUERIED[pob][0]

        def run(lab, progress) -> dict:
            progress.phase(f"count(*) of the rows born in {state}")
            with lab.connect() as conn:
                for s in PLANS[self.p["plan"]]:
                    conn.execute(s)
                got = conn.execute("SELECT count(*) FROM census WHERE pob = %s", (pob,)).fetchone()[0]
            if got != self.expected.get(pob, 0):
                raise WorkloadError(f"pob = {pob} counted {got} rows, {self.expected.get(pob, 0)} expected")
            return {"pob": pob, "state": state, "rows": got, "table_pages": self.table_pages}
        return run

    def _warm(self, pob: int):
        query = self._query(pob)

        def warm(lab, progress) -> None:  # the article's cold and hot run of the other state
            query(lab, progress)
            query(lab, progress)
        return warm

    def phases(self, cache_state: str = "cold") -> list[Phase]:
        name = {pob: census.QUERIED[pob][0] for pob in ORDER}
        out = []
        for pob in ORDER:
            out.append(Phase(f"cold {name[pob]}", self._query(pob)))
            out.append(Phase(f"hot {name[pob]}", self._query(pob), cold=False))
        for first, then in CROSS:
            out.append(Phase(f"cross {name[first]} then {name[then]}", self._query(then), warm=self._warm(first)))
        return out

    def verify(self, lab) -> dict:
        with lab.connect() as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
            conn.execute("SELECT bt_index_parent_check('pob_idx', true, true)")
            problems = conn.execute("SELECT count(*) FROM verify_heapam('census')").fetchone()[0]
        if problems:
            raise WorkloadError(f"verify_heapam found {problems} problems in census")
        return {"amcheck": "clean", "rows_per_state": {census.QUERIED[p][0]: n for p, n in self.expected.items()}}

    def rates(self, metrics: dict, elapsed_s: float, phase: str = "run", measured: dict | None = None) -> dict:
        return {"rows_per_s": metrics["rows"] / elapsed_s, "ms": 1e3 * elapsed_s}
