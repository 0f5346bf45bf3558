"""Seed 003's table a_perf on InnoDB (seed003.py is PostgreSQL's): the primary key is the table (InnoDB
keeps the rows in it), the PL/SQL loop a stored procedure that opens one transaction and commits at
its end, seed 003's update tests a procedure of one transaction each, and the check InnoDB has (CHECK
TABLE: its pages, and every index against the rows)."""

from __future__ import annotations

from dbtier.workloads.base import WorkloadError

INSERT_LOOP = """
CREATE PROCEDURE dbtier_insert_loop(IN first BIGINT, IN last BIGINT)
BEGIN
    DECLARE i BIGINT DEFAULT first;
    START TRANSACTION;
    WHILE i <= last DO
        INSERT INTO a_perf VALUES (i, concat('Row#', i));
        SET i = i + 1;
    END WHILE;
    COMMIT;
END
"""


# Seed 003's update tests (update_locality.py): each test one transaction, as the seed's were.
UPDATE_PROCEDURE = """
CREATE PROCEDURE dbtier_update(IN test INT, IN n BIGINT, OUT updated BIGINT)
BEGIN
    DECLARE i BIGINT;
    DECLARE j INT DEFAULT 1;
    SET updated = 0;
    START TRANSACTION;
    IF test = 3 THEN
        WHILE j <= 10 DO
            SET i = 1;
            WHILE i <= n DO
                UPDATE a_perf SET a = -a WHERE a = 100 * i - j;
                SET updated = updated + ROW_COUNT();
                SET i = i + 1;
            END WHILE;
            SET j = j + 1;
        END WHILE;
    ELSE
        SET i = 1;
        WHILE i <= n DO
            UPDATE a_perf SET a = -a WHERE a = IF(test = 1, i, 10 * i);
            SET updated = updated + ROW_COUNT();
            SET i = i + 1;
        END WHILE;
    END IF;
    COMMIT;
END
"""
_LOAD_BATCH = 200_000


def create_table(lab) -> None:
    lab.create_table("a_perf", "a BIGINT NOT NULL, b VARCHAR(200), PRIMARY KEY (a)")
    lab.execute(INSERT_LOOP)


def load(lab, rows: int, progress) -> None:
    """a_perf made on its device and filled with keys 1..rows by the server, as PostgreSQL's is."""
    create_table(lab)
    lab.execute(UPDATE_PROCEDURE)
    progress.phase(f"loading a_perf ({rows:,} rows)", total=rows)
    for lo in range(1, rows + 1, _LOAD_BATCH):
        hi = min(rows, lo + _LOAD_BATCH - 1)
        lab.execute(f"INSERT INTO a_perf SELECT seq, concat('Row#', seq) FROM seq_{lo}_to_{hi}")
        progress.advance(hi - lo + 1)
    lab.analyze()


def update(lab, test: int, n: int) -> int:
    """One of seed 003's update tests; returns the rows it updated."""
    with lab.connect() as conn, conn.cursor() as cur:
        cur.execute("CALL dbtier_update(%s, %s, @updated)", (test, n))
        cur.execute("SELECT @updated")
        return int(cur.fetchone()[0])


def insert_loop(lab, first: int, last: int) -> None:
    with lab.connect() as conn, conn.cursor() as cur:
        cur.execute("CALL dbtier_insert_loop(%s, %s)", (first, last))


def check_table(lab, rows: int, keys_moved: bool = False) -> dict:
    """The row count and (unless updates negated some: keys_moved) the keys' range, and CHECK TABLE."""
    (count, low, high), = lab.execute("SELECT count(*), min(a), max(a) FROM a_perf")
    if count != rows or (rows and not keys_moved and (low, high) != (1, rows)):
        raise WorkloadError(f"a_perf holds {count} rows with keys {low} to {high}; {rows} expected, 1 to {rows}")
    said = [(row[2], row[3]) for row in lab.execute("CHECK TABLE a_perf")]
    bad = [text for kind, text in said if kind in ("error", "warning") or (kind == "status" and text != "OK")]
    if bad:
        raise WorkloadError(f"CHECK TABLE a_perf: {bad[0]}")
    return {"rows": count, "check_table": "OK"}


class InnoDBUpdates:
    """Seed 003's updates in MariaDB (update_locality.PostgresUpdates is PostgreSQL's)."""

    @staticmethod
    def load(lab, rows: int, progress) -> None:
        load(lab, rows, progress)

    @staticmethod
    def update(lab, test: int, n: int) -> int:
        return update(lab, test, n)

    @staticmethod
    def check(lab, rows: int) -> tuple[dict, int]:
        """The table's checks (its keys moved by the updates), and how many keys are negated."""
        return check_table(lab, rows, keys_moved=True), lab.execute("SELECT count(*) FROM a_perf WHERE a < 0")[0][0]


class InnoDBInserts:
    """Seed 003's inserts in MariaDB, for insert_loop.py: a_perf in its file, a stored procedure's loop."""

    create = staticmethod(create_table)

    @staticmethod
    def insert(lab, rows: int) -> None:
        insert_loop(lab, 1, rows)

    @staticmethod
    def check(lab, rows: int) -> dict:
        return check_table(lab, rows)
