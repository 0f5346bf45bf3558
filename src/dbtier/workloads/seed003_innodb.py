"""Seed 003's table a_perf on InnoDB (seed003.py is PostgreSQL's): the primary key is the table (InnoDB
keeps the rows in it), the PL/SQL loop a stored procedure that opens one transaction and commits at
its end, and the check InnoDB has (CHECK TABLE: its pages, and every index against the rows)."""

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


def create_table(lab) -> None:
    lab.create_table("a_perf", "a BIGINT NOT NULL, b VARCHAR(200), PRIMARY KEY (a)")
    lab.execute(INSERT_LOOP)


def insert_loop(lab, first: int, last: int) -> None:
    with lab.connect() as conn, conn.cursor() as cur:
        cur.execute("CALL dbtier_insert_loop(%s, %s)", (first, last))


def check_table(lab, rows: int) -> dict:
    """The row count and the keys' range, and CHECK TABLE."""
    (count, low, high), = lab.execute("SELECT count(*), min(a), max(a) FROM a_perf")
    if count != rows or (rows and (low, high) != (1, rows)):
        raise WorkloadError(f"a_perf holds {count} rows with keys {low} to {high}; {rows} expected, 1 to {rows}")
    said = [(row[2], row[3]) for row in lab.execute("CHECK TABLE a_perf")]
    bad = [text for kind, text in said if kind in ("error", "warning") or (kind == "status" and text != "OK")]
    if bad:
        raise WorkloadError(f"CHECK TABLE a_perf: {bad[0]}")
    return {"rows": count, "check_table": "OK"}
