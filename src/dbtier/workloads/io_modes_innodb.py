"""Seed 004's commands on InnoDB (io_modes.py holds the workload and PostgreSQL's commands): lineitem in
MariaDB's words and each command as InnoDB does it. The table is made without a primary key (InnoDB
clusters it by a hidden row id) and loaded from a file by LOAD DATA, as bcp in loaded ASE's; the
clustered index is the primary key added, which rebuilds the table in its order, as CLUSTER and ASE's
clustered index did; update statistics reads every row (ANALYZE TABLE ... PERSISTENT FOR ALL, as ASE's
did, where InnoDB's own statistics sample a few pages); the type change and the reorg rebuild the table
(ALTER TABLE, OPTIMIZE TABLE); the allocation check is CHECK TABLE, which reads every page of the table
and its indexes. --io-mode is innodb_flush_method: direct (O_DIRECT), dsync (O_DSYNC: the redo log
written through, the data files through the OS page cache and fsync), buffered (fsync)."""

from __future__ import annotations

import datetime
import hashlib
from pathlib import Path

from dbtier.workloads.base import WorkloadError

COLUMNS = ("l_orderkey BIGINT, l_partkey INT, l_suppkey INT, l_linenumber INT, l_quantity INT, "
           "l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), l_tax DECIMAL(15,2), l_returnflag CHAR(1), "
           "l_linestatus CHAR(1), l_shipdate DATE, l_commitdate DATE, l_receiptdate DATE, l_shipinstruct CHAR(25), "
           "l_shipmode CHAR(10), l_comment VARCHAR(44)")
OPTIONS = "CHARACTER SET ascii"
_FLAGS, _STATUS = ("R", "A", "N"), ("O", "F")
_INSTRUCT = ("DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN")
_MODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")
_EPOCH = datetime.date(1992, 1, 1)


def _md5(n: int) -> str:
    return hashlib.md5(str(n).encode()).hexdigest()


def write_load_file(path: Path, first: int, last: int) -> int:
    """Orders first..last as bcp's file would hold them, one line per row, '|' between fields: the same
    rows as PostgreSQL's generator makes (io_modes.ROWS). Returns the rows written."""
    rows = 0
    with open(path, "w", encoding="ascii") as f:
        for o in range(first, last + 1):
            for n in range(1, 2 + o % 7):
                day = (o * 17 + n) % 2500
                f.write("|".join(map(str, (
                    o, (o * 7919 + n * 104729) % 200000 + 1, (o * 31 + n) % 10000 + 1, n, 1 + (o + n) % 50,
                    f"{900 + (o * 13 + n) % 100000 / 10.0:.2f}", f"{((o + n) % 11) / 100:.2f}",
                    f"{((o + 3 * n) % 9) / 100:.2f}", _FLAGS[(o + n) % 3], _STATUS[o % 2],
                    _EPOCH + datetime.timedelta(days=day), _EPOCH + datetime.timedelta(days=day + 30),
                    _EPOCH + datetime.timedelta(days=day + 9), _INSTRUCT[(o + n) % 4], _MODES[(o + n) % 7],
                    (_md5(o * 8 + n) + _md5(n))[:10 + (o + n) % 34]))) + "\n")
                rows += 1
    return rows


def insert_sql(first: int, last: int) -> str:
    """INSERT ... SELECT of orders first..last, the same rows made by the server."""
    return (
        "INSERT INTO lineitem SELECT o.seq, (o.seq * 7919 + n.seq * 104729) % 200000 + 1, (o.seq * 31 + n.seq) % 10000 + 1, "
        "n.seq, 1 + (o.seq + n.seq) % 50, round(900 + (o.seq * 13 + n.seq) % 100000 / 10.0, 2), "
        "((o.seq + n.seq) % 11) / 100, ((o.seq + 3 * n.seq) % 9) / 100, elt(1 + (o.seq + n.seq) % 3, 'R', 'A', 'N'), "
        "elt(1 + o.seq % 2, 'O', 'F'), DATE '1992-01-01' + INTERVAL (o.seq * 17 + n.seq) % 2500 DAY, "
        "DATE '1992-01-31' + INTERVAL (o.seq * 17 + n.seq) % 2500 DAY, "
        "DATE '1992-01-10' + INTERVAL (o.seq * 17 + n.seq) % 2500 DAY, "
        "elt(1 + (o.seq + n.seq) % 4, 'DELIVER IN PERSON', 'COLLECT COD', 'NONE', 'TAKE BACK RETURN'), "
        "elt(1 + (o.seq + n.seq) % 7, 'REG AIR', 'AIR', 'RAIL', 'SHIP', 'TRUCK', 'MAIL', 'FOB'), "
        "substr(concat(md5(o.seq * 8 + n.seq), md5(n.seq)), 1, 10 + (o.seq + n.seq) % 34) "
        f"FROM seq_{int(first)}_to_{int(last)} o JOIN seq_1_to_7 n ON n.seq <= 1 + o.seq % 7")


def _check_said(text: str, said) -> None:
    """ANALYZE, OPTIMIZE and CHECK TABLE answer with rows; an error among them fails the command."""
    bad = [row[3] for row in said if len(row) >= 4 and row[2] == "error"]
    if bad:
        raise WorkloadError(f"{text.split()[0]} {text.split()[1]}: {bad[0]}")


class InnoDBCommands:
    """Seed 004's commands in MariaDB's words (io_modes.PostgresCommands is PostgreSQL's)."""
    LOAD = "LOAD DATA"
    #: the commands that are one statement or two: phase, progress text, statements
    STATEMENTS = (
        ("create clustered index", "the primary key added: the table rebuilt in its order",
         ("ALTER TABLE lineitem ADD PRIMARY KEY (l_orderkey, l_linenumber)",)),
        ("create non-clustered index", "CREATE INDEX",
         ("CREATE INDEX nl ON lineitem (l_suppkey, l_orderkey, l_extendedprice, l_discount, l_shipdate)",)),
        ("update statistics", "ANALYZE TABLE, every row read", ("ANALYZE TABLE lineitem PERSISTENT FOR ALL",)),
        ("alter table", "a type change: the table and its indexes rewritten",
         ("ALTER TABLE lineitem MODIFY l_quantity BIGINT",)),
        ("reorg rebuild", "OPTIMIZE TABLE: the table rebuilt", ("OPTIMIZE TABLE lineitem",)),
    )

    @staticmethod
    def prepare(lab, orders: int) -> Path:
        """The load file, written by dbtier in the client's folder (its LOAD DATA LOCAL sends it): its folder."""
        staging = lab.client_dir("io-modes")
        write_load_file(staging / "lineitem.tbl", 1, orders)
        return staging

    @staticmethod
    def create_database(lab) -> None:
        """A database is a folder; its table's file grows as rows arrive."""
        lab.create_table("lineitem", COLUMNS, OPTIONS)

    @staticmethod
    def load(lab, path: Path) -> int:
        """LOAD DATA of the file by the client (LOCAL): dbtier reads it, as bcp read its file."""
        with lab.connect(local_infile=True) as conn, conn.cursor() as cur:
            return cur.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE lineitem FIELDS TERMINATED BY '|'")

    @staticmethod
    def insert(lab, first: int, last: int) -> int:
        with lab.connect() as conn, conn.cursor() as cur:
            return cur.execute(insert_sql(first, last))

    @staticmethod
    def update(lab, up_to_order: int) -> int:
        with lab.connect() as conn, conn.cursor() as cur:
            return cur.execute("UPDATE lineitem SET l_comment = repeat('x', 30) WHERE l_orderkey <= %s",
                               (up_to_order,))

    @staticmethod
    def statements(lab, texts: tuple[str, ...]) -> None:
        with lab.connect() as conn, conn.cursor() as cur:
            for text in texts:
                cur.execute(text)
                said = cur.fetchall() if cur.description else ()
                _check_said(text, said)

    @staticmethod
    def check(lab) -> dict:
        """CHECK TABLE reads and checks every page of the table and its indexes (the rows: the caller's)."""
        _check_table(lab)
        return {}

    @staticmethod
    def verify(lab) -> dict:
        return {"rows": _check_table(lab), "check_table": "OK"}


def _check_table(lab) -> int:
    """CHECK TABLE: every page of the table and its indexes read and checked. Returns the rows."""
    with lab.connect() as conn, conn.cursor() as cur:
        cur.execute("CHECK TABLE lineitem")
        said = cur.fetchall()
        wrong = [row[3] for row in said if row[2] in ("error", "warning") or (row[2] == "status" and row[3] != "OK")]
        if wrong:
            raise WorkloadError(f"CHECK TABLE lineitem: {wrong[0]}")
        cur.execute("SELECT count(*) FROM lineitem")
        return int(cur.fetchone()[0])
