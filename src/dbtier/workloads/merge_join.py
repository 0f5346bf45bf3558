"""Seed 003's merge join: 1000 departments with 500 employees each, the pairs department name /
employee name, merge join forced by a hint (RAM SAN 9.5 s, SCSI disk 29.2 s: 3.1x). Both inputs are
read by full scans and sorted; the employees' sort does not fit in memory and spills to the temp
tablespace (Oracle's "direct path read" of its temporary segments), so temp placement matters."""

from __future__ import annotations

from psycopg import sql

from dbtier.errors import UserError
from dbtier.units import kib, parse_option_size
from dbtier.workloads import merge_join_innodb
from dbtier.workloads.base import Footprint, Param, Workload, WorkloadError, heap_bytes

# PostgreSQL has no hints: the session turns the other join methods off, which forces the plan.
FORCE_MERGE = ("SET enable_hashjoin = off", "SET enable_nestloop = off")
# Every pair is produced and consumed in the server: the count and a checksum of the names, so the
# client does not turn a storage test into a network one, and a wrong join cannot pass.
QUERY = """
SELECT count(*), sum(hashtext(d.dname || '/' || e.ename)::bigint)
FROM department d JOIN employee e ON e.deptno = d.deptno
"""


class MergeJoin(Workload):
    name = "merge-join"
    seed = "003"
    summary = "departments x employees, merge join forced, sort spilling to temp (seed 003)"
    description = (
        "Seed 003 joined 1000 departments to their 500 employees each with a forced merge join: CPU was 12 s "
        "on both devices, the reads of tables and temp segments took the rest (RAM SAN 9.5 s, SCSI 29.2 s). "
        "Here: the same row counts (DEPARTMENTS x EMPLOYEES), employees in random department order, "
        "hash and nested-loop joins off, work_mem WORK_MEM so the sort spills to the temp tablespace.")
    params = (
        Param("departments", int, 1000, "rows in department"),
        Param("employees", int, 500, "employees per department"),
        Param("work-mem", str, "4MB", "sort memory per sort (work_mem; MariaDB: sort_buffer_size); smaller "
                                       "spills more"),
        Param("data-seed", int, 1, "seed of the generated data"),
    )
    cache_states = ("cold", "hot", "cross")
    objects = {"department": "table", "employee": "table"}
    size_options = ("departments", "employees")
    engines = ("postgres", "mariadb")

    def __init__(self, **values):
        super().__init__(**values)
        self.work_mem = parse_option_size(self.p["work_mem"], "--work-mem")
        if self.work_mem < 64 << 10:
            raise UserError(f"--work-mem {self.p['work_mem']}: PostgreSQL needs at least 64kB (and MariaDB's "
                            "sort_buffer_size 32kB)")

    def footprint(self, cache_state: str = "cold") -> Footprint:
        """department (about 90 bytes a row), employee (about 155), the employees' sort spilled to temp
        (about 64 bytes a row), the load's WAL and VACUUM FREEZE's full-page images; the server's two
        sorts may each take work_mem."""
        d, e = self.p["departments"], self.p["employees"]
        objects = {"department": heap_bytes(d, 84), "employee": heap_bytes(d * e, 152)}
        return Footprint(objects, wal=2 * sum(objects.values()), temp=64 * d * e, server_memory=2 * self.work_mem,
                         memory_option="work-mem")

    @property
    def engine_join(self):
        """The join in the engine's words: PostgreSQL's merge join here, InnoDB's in merge_join_innodb.py."""
        return merge_join_innodb.InnoDBJoin if self.engine == "mariadb" else PostgresJoin

    def prepare(self, lab, progress) -> None:
        d, e = self.p["departments"], self.p["employees"]
        progress.phase(f"loading {d:,} departments and {d * e:,} employees")
        self.table_bytes = self.engine_join.load(lab, d, e, self.p["data_seed"], self.work_mem)

    def run(self, lab, progress) -> dict:
        progress.phase(self.engine_join.WHAT)
        out = self.engine_join.join(lab, self.work_mem)
        want = self.p["departments"] * self.p["employees"]
        if out["pairs"] != want:
            raise WorkloadError(f"the join returned {out['pairs']} pairs, {want} expected")
        self.checksum = getattr(self, "checksum", out["checksum"])
        if out["checksum"] != self.checksum:
            raise WorkloadError("the join returned different pairs on a repeated run")
        out["table_bytes"] = self.table_bytes
        return out

    def warm_cross(self, lab, progress) -> None:
        """A different query over the same tables: the employees of one department by full scan."""
        progress.phase("a scan of employee (cross warm-up)")
        self.engine_join.scan_one_department(lab)

    def rates(self, metrics: dict, elapsed_s: float, phase: str = "run", measured: dict | None = None) -> dict:
        out = {"pairs_per_s": metrics["pairs"] / elapsed_s}
        if "temp_bytes" in metrics:  # PostgreSQL's own count (MariaDB's temp files are in the trace's)
            out["temp_mb"] = metrics["temp_bytes"] / 1048576
        return out


class PostgresJoin:
    """Seed 003's join in PostgreSQL: a merge join, forced, over two sorts."""
    WHAT = "the merge join"

    @staticmethod
    def load(lab, departments: int, employees: int, seed: int, sort_bytes: int) -> int:
        """Both tables on their placed devices, their rows in random order, frozen and analyzed, and the
        plan checked. Returns the tables' bytes."""
        with lab.connect() as conn:
            conn.execute(sql.SQL("CREATE TABLE department (deptno int, dname varchar(30), loc varchar(50)) {}")
                         .format(lab.tablespace("department", "table")))
            conn.execute(sql.SQL("CREATE TABLE employee (empno int, ename varchar(30), job varchar(20), mgr int, "
                                 "hiredate date, sal numeric(9,2), comm numeric(9,2), deptno int, "
                                 "address varchar(80)) {}").format(lab.tablespace("employee", "table")))
            conn.execute("SELECT setseed(%s)", (((seed % 2000) - 1000) / 1000.0,))
            conn.execute("INSERT INTO department SELECT g, 'DEPT_' || g, 'LOCATION ' || md5(g::text) "
                         "FROM generate_series(1, %s) g ORDER BY random()", (departments,))
            conn.execute(
                "INSERT INTO employee SELECT g, 'EMP_' || upper(substr(md5(g::text), 1, 12)), "
                "(ARRAY['CLERK','SALESMAN','MANAGER','ANALYST','PRESIDENT'])[1 + (g %% 5)], g / 7, "
                "date '1990-01-01' + (g %% 9000), 1000 + (g %% 4000), NULL, 1 + (g %% %s), "
                "repeat(md5(g::text), 2) || ' STREET' FROM generate_series(1, %s) g ORDER BY random()",
                (departments, departments * employees))
            conn.execute("VACUUM (FREEZE, ANALYZE) department, employee")
            conn.execute("CHECKPOINT")
            table_bytes = sum(conn.execute("SELECT pg_relation_size('department'), "
                                           "pg_relation_size('employee')").fetchone())
            PostgresJoin._session(conn, sort_bytes)
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + QUERY))
        if "Merge Join" not in plan or "Sort" not in plan:
            raise WorkloadError(f"expected a merge join over sorts, the plan is: {' / '.join(plan.splitlines())}")
        return table_bytes

    @staticmethod
    def scan_one_department(lab) -> None:
        with lab.connect() as conn:
            conn.execute("SELECT count(*) FROM employee WHERE deptno = 1").fetchone()

    @staticmethod
    def _session(conn, sort_bytes: int) -> None:
        for s in FORCE_MERGE:
            conn.execute(s)
        conn.execute("SELECT set_config('work_mem', %s, false)", (kib(sort_bytes),))

    @staticmethod
    def join(lab, sort_bytes: int) -> dict:
        """The pairs' count and checksum, and the temp files PostgreSQL counted for it."""
        with lab.connect() as conn:
            PostgresJoin._session(conn, sort_bytes)
            temp0 = conn.execute("SELECT temp_files, temp_bytes FROM pg_stat_database "
                                 "WHERE datname = current_database()").fetchone()
            pairs, checksum = conn.execute(QUERY).fetchone()
            conn.execute("SELECT pg_stat_force_next_flush()")
        with lab.connect() as conn:
            temp1 = conn.execute("SELECT temp_files, temp_bytes FROM pg_stat_database "
                                 "WHERE datname = current_database()").fetchone()
        return {"pairs": pairs, "checksum": int(checksum), "temp_files": temp1[0] - temp0[0],
                "temp_bytes": temp1[1] - temp0[1]}
