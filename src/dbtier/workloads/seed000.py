"""Seed 000's table `t`: the columns of the article's ASE table, padded so that each row fills about
one 8 KiB page (PADDING1 varchar(4000) and PADDING2 varchar(3500), stored uncompressed and in line,
as on the seed's 8K server), with ATTRIBUTE a random GUID (NEWID() in the article: 32 hex digits here)."""

from __future__ import annotations

from psycopg import sql

from dbtier.workloads.base import Footprint, Progress, WorkloadError, btree_bytes

TABLE = "t"
INDEX = "t_attribute_idx"
PAGE = 8192
#: a lookup by a full scan (table-scan), in both engines' words (each driver takes %s)
SCAN = "SELECT * FROM t WHERE attribute = %s"

COLUMNS = """
    owner          varchar(30)   NOT NULL,
    object_name    varchar(30)   NOT NULL,
    subobject_name varchar(30),
    object_id      bigint        NOT NULL,
    data_object_id bigint,
    object_type    varchar(19)   NOT NULL,
    created        timestamp     NOT NULL,
    last_ddl_time  timestamp     NOT NULL,
    "timestamp"    varchar(19)   NOT NULL,
    status         varchar(7)    NOT NULL,
    temporary2     varchar(1)    NOT NULL,
    generated      varchar(1)    NOT NULL,
    secondary      varchar(1)    NOT NULL,
    namespace      bigint        NOT NULL,
    edition_name   varchar(30),
    padding1       varchar(4000),
    padding2       varchar(3500),
    attribute      varchar(32)
"""

# Rows shaped like Oracle's ALL_OBJECTS, which the seed's table was built from. setseed() makes the
# data the same on every run and every device.
_FILL = """
INSERT INTO t
SELECT (ARRAY['SYS','PUBLIC','SYSTEM','MDSYS','XDB','ORDSYS','CTXSYS','APEX'])[1 + (random() * 7)::int],
       'OBJ_' || upper(substr(md5(random()::text), 1, 20)),
       NULL,
       g,
       CASE WHEN random() < 0.4 THEN g END,
       (ARRAY['TABLE','INDEX','VIEW','SYNONYM','PACKAGE','TYPE','JAVA CLASS'])[1 + (random() * 6)::int],
       ts, ts + make_interval(days => (random() * 300)::int),
       to_char(ts, 'YYYY-MM-DD:HH24:MI:SS'),
       'VALID', 'N', 'N', 'N', 1, NULL,
       repeat('x', 4000), repeat('y', 3500),
       md5(random()::text || g)
FROM (SELECT g, timestamp '2011-01-01' + make_interval(secs => random() * 3e7) AS ts
      FROM generate_series(%s::bigint, %s::bigint) AS g) AS s
"""
_BATCH = 2000


def create_table(lab, conn, rows: int, seed: int, progress: Progress) -> None:
    """Creates and fills t (on its placed device), vacuumed and frozen, so that reading it later sets
    no hint bits and writes nothing."""
    conn.execute(sql.SQL("CREATE TABLE t (" + COLUMNS + ") {}").format(lab.tablespace(TABLE, "table")))
    conn.execute("ALTER TABLE t ALTER padding1 SET STORAGE PLAIN, ALTER padding2 SET STORAGE PLAIN")
    conn.execute("SELECT setseed(%s)", (((seed % 2000) - 1000) / 1000.0,))
    progress.phase(f"loading table t ({rows:,} rows of ~8 KiB)", total=rows)
    for lo in range(1, rows + 1, _BATCH):
        hi = min(rows, lo + _BATCH - 1)
        conn.execute(_FILL, (lo, hi))
        progress.advance(hi - lo + 1)


def finish(conn, rows: int, progress: Progress) -> int:
    """VACUUM (FREEZE, ANALYZE) and a checkpoint; checks one row per page. Returns the table's pages."""
    progress.phase("vacuum, analyze, checkpoint")
    conn.execute("VACUUM (FREEZE, ANALYZE) t")
    conn.execute("CHECKPOINT")
    pages, count = conn.execute("SELECT pg_relation_size('t') / %s, count(*) FROM t", (PAGE,)).fetchone()
    if count != rows:
        raise WorkloadError(f"table t holds {count} rows, {rows} were loaded")
    if pages < rows * 0.95:
        raise WorkloadError(f"table t is {pages} pages for {rows} rows: its rows are not one per page")
    return int(pages)


def footprint(rows: int, index: bool) -> Footprint:
    """t: a page per row (and its free space and visibility maps); its GUID index (32-character keys);
    the WAL of the load (every row logged whole), of VACUUM FREEZE (a full-page image of each page)
    and of the index build; the client holds every key (about 200 bytes each while fetched)."""
    table = rows * PAGE + (rows // 1000 + 2) * PAGE
    objects = {TABLE: table}
    if index:
        objects[INDEX] = btree_bytes(rows, 33)
    return Footprint(objects, wal=2 * table + objects.get(INDEX, 0), client_memory=200 * rows)


def keys(conn) -> list[str]:
    return [r[0] for r in conn.execute("SELECT attribute FROM t ORDER BY ctid")]
