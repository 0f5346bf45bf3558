"""Seed 003's table a_perf (a number primary key, b varchar2(200)), its PL/SQL loops as PL/pgSQL,
and the checks every seed 003 workload ends with (row counts, amcheck)."""

from __future__ import annotations

from psycopg import sql

from dbtier.workloads.base import WorkloadError, btree_bytes, heap_bytes

TABLE = "a_perf"
INDEX = "a_perf_pkey"
OBJECTS = {TABLE: "table", INDEX: "index"}

# The seed's anonymous block, one INSERT per row and one commit at the end; a procedure so that it
# runs as one statement from the client, as the block did in SQL*Plus.
INSERT_LOOP = """
CREATE PROCEDURE dbtier_insert_loop(first bigint, last bigint) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN first..last LOOP
        INSERT INTO a_perf VALUES (i, 'Row#' || i);
    END LOOP;
END $$
"""


def sizes(rows: int) -> dict[str, int]:
    """a_perf with `rows` row versions (44 bytes each with its header: a bigint and 'Row#' || i) and its
    primary key (bigint keys)."""
    return {TABLE: heap_bytes(rows, 44), INDEX: btree_bytes(rows, 8)}


#: WAL per row inserted one by one: the heap record and the index record (full-page images aside)
WAL_PER_INSERT = 160


def create_table(lab, conn) -> None:
    conn.execute(sql.SQL("CREATE TABLE a_perf (a bigint, b varchar(200), CONSTRAINT a_perf_pkey PRIMARY KEY (a) "
                         "USING INDEX {}) {}").format(lab.tablespace(INDEX, "index"), lab.tablespace(TABLE, "table")))
    conn.execute(INSERT_LOOP)


def check_table(conn, rows: int) -> dict:
    """The row count, and amcheck over the primary key (parent links, every heap tuple indexed)
    and the heap."""
    count = conn.execute("SELECT count(*) FROM a_perf").fetchone()[0]
    if count != rows:
        raise WorkloadError(f"a_perf holds {count} rows, {rows} expected")
    conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
    conn.execute("SELECT bt_index_parent_check('a_perf_pkey', true, true)")
    problems = conn.execute("SELECT count(*) FROM verify_heapam('a_perf')").fetchone()[0]
    if problems:
        raise WorkloadError(f"verify_heapam found {problems} problems in a_perf")
    return {"rows": count, "amcheck": "clean"}
