"""Seed 003's merge join on InnoDB (merge_join.py holds the workload and PostgreSQL's join). MariaDB has no
merge join: its joins are nested loops and hash joins. What the seed timed, both tables read by full
scans and the employees' sort spilling to the temp tablespace, is asked of it so: the join by hash
(join_cache_level 4: department's rows in a join buffer, each employee looked up there), and every pair
put in the employees' order (a window's ORDER BY, which filesort does in sort_buffer_size, the rest in
merge runs written to tmpdir: the temp role's device). The same count and checksum of the pairs is
checked."""

from __future__ import annotations

from dbtier.engines.mariadb import SEEDED_RAND
from dbtier.workloads.base import WorkloadError

DEPARTMENT = "deptno INT, dname VARCHAR(30), loc VARCHAR(50)"
EMPLOYEE = ("empno INT, ename VARCHAR(30), job VARCHAR(20), mgr INT, hiredate DATE, sal DECIMAL(9,2), "
            "comm DECIMAL(9,2), deptno INT, address VARCHAR(80)")
OPTIONS = "CHARACTER SET ascii"

# The sort is over every pair: the employees' order (their department, then number), as the seed's
# merge join sorted its inputs; count and checksum in the server, as PostgreSQL's query does.
QUERY = """
SELECT count(*), sum(crc32(concat(dname, '/', ename)))
FROM (SELECT d.dname, e.ename, row_number() OVER (ORDER BY e.deptno, e.empno) AS k
      FROM employee e JOIN department d ON e.deptno = d.deptno) pairs
"""


def load(lab, departments: int, employees: int, seed: int) -> None:
    """Both tables on their placed devices, their rows in random order, analyzed."""
    lab.create_table("department", DEPARTMENT, OPTIONS)
    lab.create_table("employee", EMPLOYEE, OPTIONS)
    with lab.connect() as conn, conn.cursor() as cur:
        cur.execute(SEEDED_RAND, (seed, seed + 1))
        cur.execute(f"INSERT INTO department SELECT seq, concat('DEPT_', seq), concat('LOCATION ', md5(seq)) "
                    f"FROM seq_1_to_{int(departments)} ORDER BY rand()")
        cur.execute(
            "INSERT INTO employee SELECT seq, concat('EMP_', upper(substr(md5(seq), 1, 12))), "
            "elt(1 + seq % 5, 'CLERK', 'SALESMAN', 'MANAGER', 'ANALYST', 'PRESIDENT'), seq DIV 7, "
            "DATE '1990-01-01' + INTERVAL seq % 9000 DAY, 1000 + seq % 4000, NULL, "
            f"1 + seq % {int(departments)}, concat(repeat(md5(seq), 2), ' STREET') "
            f"FROM seq_1_to_{int(departments) * int(employees)} ORDER BY rand()")
    lab.analyze()


def _session(cur, sort_bytes: int) -> None:
    cur.execute("SET SESSION join_cache_level = 4")  # a hash join over the join buffer
    cur.execute("SET SESSION sort_buffer_size = %s", (int(sort_bytes),))


def check_plan(lab, sort_bytes: int) -> str | None:
    """None, or what the plan does that it should not (a join that is not by hash)."""
    with lab.connect() as conn, conn.cursor() as cur:
        _session(cur, sort_bytes)
        cur.execute("EXPLAIN " + QUERY)
        extras = " / ".join(str(row[-1]) for row in cur.fetchall())
    return None if "BNLH" in extras or "hash" in extras.lower() else extras  # "(flat, BNLH join)"


def join(lab, sort_bytes: int) -> dict:
    """The pairs' count and checksum, and the sort's merge passes (its runs written to tmpdir)."""
    with lab.connect() as conn, conn.cursor() as cur:
        _session(cur, sort_bytes)
        cur.execute("SHOW SESSION STATUS LIKE 'Sort_merge_passes'")
        before = int(cur.fetchone()[1])
        cur.execute(QUERY)
        pairs, checksum = cur.fetchone()
        cur.execute("SHOW SESSION STATUS LIKE 'Sort_merge_passes'")
        passes = int(cur.fetchone()[1]) - before
    return {"pairs": int(pairs), "checksum": int(checksum or 0), "sort_merge_passes": passes}


def table_bytes(lab) -> int:
    """department's and employee's files' data, as InnoDB counts it."""
    return sum(t.bytes for t in lab.objects() if t.qualified in ("department", "employee"))


class InnoDBJoin:
    """Seed 003's join in MariaDB: by hash, every pair sorted in the employees' order."""
    WHAT = "the join and its sort"

    @staticmethod
    def load(lab, departments: int, employees: int, seed: int, sort_bytes: int) -> int:
        """Both tables loaded and the plan checked. Returns the tables' bytes."""
        load(lab, departments, employees, seed)
        wrong = check_plan(lab, sort_bytes)
        if wrong:
            raise WorkloadError(f"expected a hash join, the plan says: {wrong}")
        return table_bytes(lab)

    @staticmethod
    def join(lab, sort_bytes: int) -> dict:
        return join(lab, sort_bytes)

    @staticmethod
    def scan_one_department(lab) -> None:
        lab.execute("SELECT count(*) FROM employee WHERE deptno = 1")
