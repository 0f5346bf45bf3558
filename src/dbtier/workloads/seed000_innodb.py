"""Seed 000's table `t` on InnoDB (seed000.py is PostgreSQL's): the same columns, padding and GUIDs,
made by the server from a seeded RAND() over MariaDB's sequence tables. InnoDB's page is 16 KiB and a
row may take at most about half of one in line, so two ~8 KiB rows share a page: the table has the
same bytes as PostgreSQL's, in half as many pages of twice the size, clustered by object_id (the
primary key: InnoDB keeps the rows in it) and read by the GUID's secondary index, which leads to the
key and then to the row. The lookups run in a stored procedure, one SELECT per key, as the seed's
cursor loop did (PostgreSQL's: a PL/pgSQL function)."""

from __future__ import annotations

import json

from dbtier.engines.mariadb import PAGE_BYTES, SEEDED_RAND
from dbtier.workloads import seed000
from dbtier.workloads.base import Progress, WorkloadError

PAGE = PAGE_BYTES  # InnoDB's page
ROWS_PER_PAGE = 2

# PostgreSQL's columns in MariaDB's words: the timestamps are DATETIME, an identifier is quoted with
# backticks, and object_id is the primary key (InnoDB keeps the rows in it)
_COLUMNS = (seed000.COLUMNS.replace('"timestamp"', "`timestamp`")
            .replace("timestamp     NOT NULL", "datetime      NOT NULL")
            .replace("object_id      bigint        NOT NULL", "object_id      bigint        NOT NULL PRIMARY KEY"))
# ROW_FORMAT=DYNAMIC keeps a row in line while it fits half a page: these do (about 7,800 bytes)
_OPTIONS = "CHARACTER SET ascii ROW_FORMAT = DYNAMIC"

# Rows shaped like Oracle's ALL_OBJECTS, as PostgreSQL's; the session's RAND() seeded (rand_seed1,
# rand_seed2) makes the draws the same on every run and every device.
_FILL = """
INSERT INTO t
SELECT elt(1 + floor(r1 * 8), 'SYS','PUBLIC','SYSTEM','MDSYS','XDB','ORDSYS','CTXSYS','APEX'),
       concat('OBJ_', upper(substr(md5(r2), 1, 20))),
       NULL, g, IF(r3 < 0.4, g, NULL),
       elt(1 + floor(r4 * 7), 'TABLE','INDEX','VIEW','SYNONYM','PACKAGE','TYPE','JAVA CLASS'),
       ts, ts + INTERVAL floor(r5 * 300) DAY, date_format(ts, '%Y-%m-%d:%H:%i:%s'),
       'VALID', 'N', 'N', 'N', 1, NULL, repeat('x', 4000), repeat('y', 3500), md5(concat(r6, g))
FROM (SELECT seq AS g, rand() AS r1, rand() AS r2, rand() AS r3, rand() AS r4, rand() AS r5, rand() AS r6,
             TIMESTAMP '2011-01-01 00:00:00' + INTERVAL floor(rand() * 30000000) SECOND AS ts
      FROM seq_{lo}_to_{hi}) AS s
"""
_BATCH = 2000

LOOKUP_PROCEDURE = """
CREATE PROCEDURE dbtier_lookup(IN keys_json LONGTEXT, OUT found BIGINT)
BEGIN
    DECLARE i INT DEFAULT 0;
    DECLARE n INT DEFAULT JSON_LENGTH(keys_json);
    DECLARE k VARCHAR(32) CHARACTER SET ascii;  -- the column's: another character set would not use its index
    DECLARE width INT;
    SET found = 0;
    WHILE i < n DO
        SET k = JSON_VALUE(keys_json, concat('$[', i, ']'));
        SET width = NULL;
        SELECT length(padding2) INTO width FROM t WHERE attribute = k;  -- the row itself, by the index
        IF width IS NOT NULL THEN SET found = found + 1; END IF;
        SET i = i + 1;
    END WHILE;
END
"""


def create_table(lab, rows: int, seed: int, progress: Progress) -> None:
    """Creates t on its placed device and fills it, in order of its key."""
    lab.create_table("t", _COLUMNS, _OPTIONS)
    progress.phase(f"loading table t ({rows:,} rows of ~8 KiB)", total=rows)
    with lab.connect() as conn, conn.cursor() as cur:
        cur.execute(SEEDED_RAND, (seed, seed + 1))
        for lo in range(1, rows + 1, _BATCH):
            hi = min(rows, lo + _BATCH - 1)
            cur.execute(_FILL.format(lo=lo, hi=hi))
            progress.advance(hi - lo + 1)


def finish(lab, rows: int, progress: Progress) -> int:
    """ANALYZE, and a check of the rows and their pages. Returns the pages holding the rows (the
    clustered index's leaves; its file is larger, grown by whole extents). Its dirty pages are written
    as the server shuts down for the cold restart, with the emulation paused."""
    progress.phase("analyze")
    with lab.connect() as conn, conn.cursor() as cur:
        cur.execute("ANALYZE TABLE t")
        cur.fetchall()
        cur.execute("SELECT count(*) FROM t")
        count = cur.fetchone()[0]
        cur.execute("SELECT stat_value FROM mysql.innodb_index_stats WHERE database_name = database() AND "
                    "table_name = 't' AND index_name = 'PRIMARY' AND stat_name = 'n_leaf_pages'")
        pages = int(cur.fetchone()[0])
    if count != rows:
        raise WorkloadError(f"table t holds {count} rows, {rows} were loaded")
    if pages < rows / ROWS_PER_PAGE * 0.95:
        raise WorkloadError(f"table t is {pages} pages of 16 KiB for {rows} rows: its rows are not two per page")
    return pages


def keys(lab) -> list[str]:
    """The GUIDs in the table's physical order (InnoDB's: its primary key's)."""
    return [r[0] for r in lab.execute("SELECT attribute FROM t ORDER BY object_id")]


def lookup(conn, batch: list[str]) -> int:
    """One call of the lookup procedure: the rows found of `batch`."""
    with conn.cursor() as cur:
        cur.execute("CALL dbtier_lookup(%s, @found)", (json.dumps(batch),))
        cur.execute("SELECT @found")
        return int(cur.fetchone()[0])


def plan_type(lab) -> str:
    """How InnoDB would find a key: EXPLAIN's access type (ALL: a full scan; ref: by an index)."""
    with lab.connect() as conn, conn.cursor() as cur:
        cur.execute("EXPLAIN SELECT * FROM t WHERE attribute = 'x'")
        names = [d[0] for d in cur.description]
        return str(dict(zip(names, cur.fetchone()))["type"])


class InnoDBLookups:
    """Seed 000's lookups in MariaDB, for random_index.py: t and its unique index in its file, a stored
    procedure of one SELECT per key."""

    @staticmethod
    def load(lab, rows: int, data_seed: int, progress: Progress) -> tuple[int, list[str]]:
        """The table and its index made and loaded; returns the table's pages and its keys."""
        create_table(lab, rows, data_seed, progress)
        progress.phase("creating the unique index on attribute")
        lab.execute("CREATE UNIQUE INDEX t_attribute_idx ON t (attribute)")
        lab.execute(LOOKUP_PROCEDURE)
        return finish(lab, rows, progress), keys(lab)

    lookup = staticmethod(lookup)


class InnoDBScans:
    """Seed 000's scans in MariaDB, for table_scan.py: t without an index, each lookup a full scan."""

    PAGE = PAGE

    @staticmethod
    def load(lab, rows: int, data_seed: int, progress: Progress) -> tuple[int, list[str]]:
        """The table made and loaded, and the plan checked; returns the table's pages and its keys."""
        create_table(lab, rows, data_seed, progress)
        pages = finish(lab, rows, progress)
        access = plan_type(lab)
        if access != "ALL":
            raise WorkloadError(f"expected a full scan, the plan's access is {access}")
        return pages, keys(lab)

    @staticmethod
    def scan(conn, key: str) -> list:
        with conn.cursor() as cur:
            cur.execute(seed000.SCAN, (key,))
            return cur.fetchall()
