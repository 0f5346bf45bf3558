"""TPC-C on InnoDB (tpcc_schema.py and tpcc_procs.py are PostgreSQL's): the same nine tables, rows and
transactions in MariaDB's words. Each table is clustered by its primary key (InnoDB keeps the rows in
it: PostgreSQL's *_pkey indexes are the tables here), with the two secondary indexes as their own
keys; the data is made by the server from its sequence tables and a seeded RAND(); the five
transactions are stored procedures, one CALL each, the driver's arrays passed as JSON. A New-Order
with the unknown item signals SQLSTATE 45000 and the driver rolls it back; a deadlock (1213) or a lock
wait timeout (1205) is rolled back and tried again. The sessions keep InnoDB's own isolation level
(REPEATABLE READ), as HammerDB and sysbench run it."""

from __future__ import annotations

import json

import pymysql

from dbtier.engines.mariadb import SEEDED_RAND
from dbtier.workloads import tpcc_driver, tpcc_schema
from dbtier.workloads.base import WorkloadError
from dbtier.workloads.tpcc_schema import Scale

TABLES = tpcc_schema.TABLES

#: each table's primary key: PostgreSQL's unique *_pkey index (history has none: InnoDB adds its own)
PRIMARY_KEYS = {table: cols for name, (table, cols, unique) in tpcc_schema.INDEXES.items() if name.endswith("_pkey")}
#: the secondary indexes, kept in their table's file
SECONDARY = {name: (table, cols) for name, (table, cols, _u) in tpcc_schema.INDEXES.items()
             if not name.endswith("_pkey")}


def table_columns(table: str, secondary: bool = True) -> str:
    """PostgreSQL's column list in MariaDB's types (numeric is DECIMAL, timestamp DATETIME), with the
    primary key and, unless told otherwise, the secondary indexes."""
    cols = tpcc_schema._DDL[table].replace("numeric(", "decimal(").replace(" timestamp", " datetime")
    keys = [f"PRIMARY KEY ({PRIMARY_KEYS[table]})"] if table in PRIMARY_KEYS else []
    keys += [f"KEY {name} ({cols})" for name, (t, cols) in SECONDARY.items() if t == table and secondary]
    return ", ".join([cols, *keys])


OPTIONS = "CHARACTER SET ascii"


def _str(lo: int, hi: int) -> str:
    """A random string of lo..hi characters (PostgreSQL's tpcc_str), inline: a stored function per
    column of every row would cost the load most of its time."""
    return f"substr(repeat(md5(rand()), 16), 1, {lo} + floor(rand() * {hi - lo + 1}))"


_ORIGINAL = f"IF(rand() < 0.1, concat('ORIGINAL', {_str(18, 42)}), {_str(26, 50)})"
_SYLLABLES = ", ".join(f"'{s}'" for s in tpcc_driver.SYLLABLES)

FUNCTIONS = (f"""
CREATE FUNCTION tpcc_last(n INT) RETURNS VARCHAR(16) DETERMINISTIC
    RETURN concat(elt(1 + n DIV 100, {_SYLLABLES}), elt(1 + (n DIV 10) % 10, {_SYLLABLES}), elt(1 + n % 10, {_SYLLABLES}))
""", """
CREATE FUNCTION tpcc_customer_by_name(w INT, d INT, wanted VARCHAR(16)) RETURNS INT READS SQL DATA
BEGIN
    DECLARE found INT DEFAULT NULL;
    SELECT c_id INTO found FROM (SELECT c_id, row_number() OVER (ORDER BY c_first) AS k, count(*) OVER () AS n
                                 FROM customer WHERE c_w_id = w AND c_d_id = d AND c_last = wanted) x
        WHERE k = (n + 1) DIV 2;
    RETURN found;
END
""")

# Per table, the rows of warehouses 1..{w}, as PostgreSQL's loader makes them. Orders: customers in a
# random permutation per district, the last ones undelivered; each order's lines are its o_ol_cnt.
_DATA = {
    "item": f"SELECT i.seq, 1 + floor(rand() * 10000), {_str(14, 24)}, round(1 + rand() * 99, 2), {_ORIGINAL} "
            "FROM seq_1_to_{items} i",
    "warehouse": f"SELECT w.seq, {_str(6, 10)}, {_str(10, 20)}, {_str(10, 20)}, {_str(10, 20)}, 'CA', '123411111', "
                 "round(rand() * 0.2, 4), 100 * {customers} FROM seq_1_to_{w} w",
    "district": f"SELECT d.seq, w.seq, {_str(6, 10)}, {_str(10, 20)}, {_str(10, 20)}, {_str(10, 20)}, 'CA', "
                "'123411111', round(rand() * 0.2, 4), 10 * {customers}, {customers} + 1 FROM seq_1_to_{w} w, seq_1_to_10 d",
    "customer": f"SELECT c.seq, d.seq, w.seq, {_str(8, 16)}, 'OE', "
                "tpcc_last(IF(c.seq <= 1000, c.seq - 1, (((floor(rand() * 256) | floor(rand() * 1000)) + 157) % 1000))), "
                f"{_str(10, 20)}, {_str(10, 20)}, {_str(10, 20)}, 'CA', '123411111', '1234567890123456', now(), "
                f"IF(rand() < 0.1, 'BC', 'GC'), 50000, round(rand() * 0.5, 4), -10, 10, 1, 0, {_str(300, 500)} "
                "FROM seq_1_to_{w} w, seq_1_to_10 d, seq_1_to_{customers} c",
    "history": f"SELECT c.seq, d.seq, w.seq, d.seq, w.seq, now(), 10, {_str(12, 24)} "
               "FROM seq_1_to_{w} w, seq_1_to_10 d, seq_1_to_{customers} c",
    "orders": "SELECT o, d, w, c, now(), IF(o <= {delivered}, 1 + floor(rand() * 10), NULL), 5 + floor(rand() * 11), 1 "
              "FROM (SELECT row_number() OVER (PARTITION BY w.seq, d.seq ORDER BY rand()) AS o, d.seq AS d, w.seq AS w, "
              "c.seq AS c FROM seq_1_to_{w} w, seq_1_to_10 d, seq_1_to_{customers} c) perm",
    "new_order": "SELECT o.seq, d.seq, w.seq FROM seq_1_to_{w} w, seq_1_to_10 d, seq_{first_new}_to_{customers} o",
    "order_line": "SELECT o_id, o_d_id, o_w_id, n.seq, 1 + floor(rand() * {items}), o_w_id, "
                  "IF(o_id <= {delivered}, now(), NULL), 5, "
                  f"IF(o_id <= {{delivered}}, 0, round(0.01 + rand() * 9999.98, 2)), {_str(24, 24)} "
                  "FROM orders JOIN seq_1_to_15 n ON n.seq <= o_ol_cnt",
    "stock": f"SELECT i.seq, w.seq, 10 + floor(rand() * 91), {', '.join([_str(24, 24)] * 10)}, 0, 0, 0, {_ORIGINAL} "
             "FROM seq_1_to_{w} w, seq_1_to_{items} i",
}
#: order_line is made from the orders' line counts: after them
LOAD_ORDER = ("item", "warehouse", "district", "customer", "history", "orders", "new_order", "order_line", "stock")


def data_query(table: str, scale: Scale) -> str:
    return _DATA[table].format(w=int(scale.warehouses), items=int(scale.items), customers=int(scale.customers),
                               delivered=int(scale.delivered), first_new=int(scale.delivered) + 1)


PROCEDURES = ("""
CREATE PROCEDURE tpcc_new_order(IN w INT, IN d INT, IN c INT, IN items_json TEXT, IN supply_json TEXT,
                                IN qty_json TEXT)
BEGIN
    DECLARE o INT;
    DECLARE tax_w, tax_d, disc DECIMAL(4,4);
    DECLARE price DECIMAL(5,2);
    DECLARE n INT DEFAULT JSON_LENGTH(items_json);
    DECLARE i INT DEFAULT 0;
    DECLARE it, su, qt INT;
    DECLARE all_local INT DEFAULT 1;
    DECLARE dist CHAR(24);
    WHILE i < n DO
        IF JSON_VALUE(supply_json, concat('$[', i, ']')) <> w THEN SET all_local = 0; END IF;
        SET i = i + 1;
    END WHILE;
    SELECT w_tax INTO tax_w FROM warehouse WHERE w_id = w;
    UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = w AND d_id = d;
    SELECT d_tax, d_next_o_id - 1 INTO tax_d, o FROM district WHERE d_w_id = w AND d_id = d;
    SELECT c_discount INTO disc FROM customer WHERE c_w_id = w AND c_d_id = d AND c_id = c;
    INSERT INTO orders VALUES (o, d, w, c, now(), NULL, n, all_local);
    INSERT INTO new_order VALUES (o, d, w);
    SET i = 0;
    WHILE i < n DO
        SET it = JSON_VALUE(items_json, concat('$[', i, ']')), su = JSON_VALUE(supply_json, concat('$[', i, ']')),
            qt = JSON_VALUE(qty_json, concat('$[', i, ']'));
        SET price = NULL;
        SELECT i_price INTO price FROM item WHERE i_id = it;
        IF price IS NULL THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'tpcc: an unknown item (the specified 1% rollback)';
        END IF;
        SELECT CASE d WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03 WHEN 4 THEN s_dist_04
                      WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07 WHEN 8 THEN s_dist_08
                      WHEN 9 THEN s_dist_09 ELSE s_dist_10 END INTO dist
            FROM stock WHERE s_i_id = it AND s_w_id = su FOR UPDATE;
        UPDATE stock SET s_quantity = IF(s_quantity - qt >= 10, s_quantity - qt, s_quantity - qt + 91),
                         s_ytd = s_ytd + qt, s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + (su <> w)
            WHERE s_i_id = it AND s_w_id = su;
        INSERT INTO order_line VALUES (o, d, w, i + 1, it, su, NULL, qt, qt * price, dist);
        SET i = i + 1;
    END WHILE;
END
""", """
CREATE PROCEDURE tpcc_payment(IN w INT, IN d INT, IN cw INT, IN cd INT, IN c_given INT, IN last_name VARCHAR(16),
                              IN amount DECIMAL(6,2))
BEGIN
    DECLARE c INT DEFAULT c_given;
    DECLARE wname, dname VARCHAR(10);
    DECLARE credit CHAR(2);
    UPDATE warehouse SET w_ytd = w_ytd + amount WHERE w_id = w;
    SELECT w_name INTO wname FROM warehouse WHERE w_id = w;
    UPDATE district SET d_ytd = d_ytd + amount WHERE d_w_id = w AND d_id = d;
    SELECT d_name INTO dname FROM district WHERE d_w_id = w AND d_id = d;
    IF last_name IS NOT NULL THEN
        SET c = coalesce(tpcc_customer_by_name(cw, cd, last_name), 1);  -- a name the small scales lack: the first
    END IF;
    UPDATE customer SET c_balance = c_balance - amount, c_ytd_payment = c_ytd_payment + amount,
                        c_payment_cnt = c_payment_cnt + 1
        WHERE c_w_id = cw AND c_d_id = cd AND c_id = c;
    SELECT c_credit INTO credit FROM customer WHERE c_w_id = cw AND c_d_id = cd AND c_id = c;
    IF credit = 'BC' THEN
        UPDATE customer SET c_data = substr(concat_ws(' ', c, cd, cw, d, w, amount, c_data), 1, 500)
            WHERE c_w_id = cw AND c_d_id = cd AND c_id = c;
    END IF;
    INSERT INTO history VALUES (c, cd, cw, d, w, now(), amount, substr(concat(wname, '    ', dname), 1, 24));
END
""", """
CREATE PROCEDURE tpcc_order_status(IN w INT, IN d INT, IN c_given INT, IN last_name VARCHAR(16))
BEGIN
    DECLARE c INT DEFAULT c_given;
    DECLARE o INT;
    DECLARE balance DECIMAL(12,2);
    DECLARE line_count INT;
    IF last_name IS NOT NULL THEN
        SET c = coalesce(tpcc_customer_by_name(w, d, last_name), 1);
    END IF;
    SELECT c_balance INTO balance FROM customer WHERE c_w_id = w AND c_d_id = d AND c_id = c;
    SELECT o_id INTO o FROM orders WHERE o_w_id = w AND o_d_id = d AND o_c_id = c ORDER BY o_id DESC LIMIT 1;
    SELECT count(*) INTO line_count FROM (SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d
                                     FROM order_line WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o) x;
END
""", """
CREATE PROCEDURE tpcc_delivery(IN w INT, IN carrier INT)
BEGIN
    DECLARE d INT DEFAULT 1;
    DECLARE o, c INT;
    DECLARE amount DECIMAL(12,2);
    -- the oldest new order locked and waited for, never skipped (tpcc_procs.py says why)
    WHILE d <= 10 DO
        SET o = NULL;
        SELECT no_o_id INTO o FROM new_order WHERE no_w_id = w AND no_d_id = d
            ORDER BY no_o_id LIMIT 1 FOR UPDATE;
        IF o IS NOT NULL THEN
            DELETE FROM new_order WHERE no_w_id = w AND no_d_id = d AND no_o_id = o;
            UPDATE orders SET o_carrier_id = carrier WHERE o_w_id = w AND o_d_id = d AND o_id = o;
            SELECT o_c_id INTO c FROM orders WHERE o_w_id = w AND o_d_id = d AND o_id = o;
            UPDATE order_line SET ol_delivery_d = now() WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o;
            SELECT sum(ol_amount) INTO amount FROM order_line WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o;
            UPDATE customer SET c_balance = c_balance + amount, c_delivery_cnt = c_delivery_cnt + 1
                WHERE c_w_id = w AND c_d_id = d AND c_id = c;
        END IF;
        SET d = d + 1;
    END WHILE;
END
""", """
CREATE PROCEDURE tpcc_stock_level(IN w INT, IN d INT, IN threshold INT)
BEGIN
    DECLARE next_o INT;
    DECLARE low INT;
    SELECT d_next_o_id INTO next_o FROM district WHERE d_w_id = w AND d_id = d;
    SELECT count(DISTINCT s_i_id) INTO low FROM order_line JOIN stock ON s_i_id = ol_i_id AND s_w_id = w
        WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id >= next_o - 20 AND ol_o_id < next_o AND s_quantity < threshold;
END
""")


def load(lab, scale: Scale, seed: int, progress) -> None:
    """The nine tables made on their placed devices and filled by the server, the functions and the
    transactions' procedures; analyzed."""
    for table in TABLES:
        lab.create_table(table, table_columns(table), OPTIONS)
    progress.phase(f"loading TPC-C on InnoDB, {scale.warehouses} warehouse(s)", total=len(LOAD_ORDER))
    with lab.connect() as conn, conn.cursor() as cur:
        for statement in FUNCTIONS + PROCEDURES:
            cur.execute(statement)
        cur.execute(SEEDED_RAND, (seed, seed + 1))
        for table in LOAD_ORDER:
            cur.execute(f"INSERT INTO {table} {data_query(table, scale)}")
            progress.advance()
    progress.phase("analyze")
    lab.analyze()


#: the MariaDB errors a transaction is tried again after: a deadlock, a lock wait that timed out
RETRY_ERRORS = (1213, 1205)
ER_SIGNAL_EXCEPTION = 1644  # the New-Order's SIGNAL of its unknown item


class Calls:
    """The five transactions on one MariaDB connection: a CALL each, committed by the driver."""

    def __init__(self, conn, ledger: str | None = None, client: int = 0):
        conn.autocommit(False)  # a CALL's statements are one transaction, committed below
        self.conn = conn
        self.cur = conn.cursor()
        self.ledger, self.client = ledger, client  # a crash test's ledger row (tpcc_driver.LEDGERED)

    def __call__(self, kind: str, args: tuple) -> None:
        if kind == "new_order":
            w, d, c, items, supply, qty = args
            args = (w, d, c, json.dumps(items), json.dumps(supply), json.dumps(qty))
        try:
            self.cur.execute(f"CALL tpcc_{kind}({', '.join(['%s'] * len(args))})", args)
            if self.ledger and kind in tpcc_driver.LEDGERED:
                self.cur.execute(tpcc_driver.LEDGER_ROW.format(self.ledger), (self.client,))
            self.conn.commit()
        except pymysql.err.MySQLError as exc:
            code = exc.args[0] if exc.args else None
            self.conn.rollback()
            if code == ER_SIGNAL_EXCEPTION:
                raise tpcc_driver.RolledBack from exc
            if code in RETRY_ERRORS:
                raise tpcc_driver.Retry from exc
            raise


def check_consistency(lab) -> dict[str, int]:
    """TPC-C's consistency conditions 1-4, 8 and 9 (PostgreSQL's queries: MariaDB reads them alike)."""
    return {name: int(lab.execute(query)[0][0]) for name, query in tpcc_schema.CONSISTENCY.items()}


def verify(lab) -> dict:
    """The consistency conditions 1-4, 8 and 9 and CHECK TABLE of every table (its pages, and each index
    against the rows)."""
    violations = check_consistency(lab)
    bad = {k: v for k, v in violations.items() if v}
    if bad:
        raise WorkloadError(f"TPC-C consistency conditions violated: {bad}")
    for table in TABLES:
        said = [(row[2], row[3]) for row in lab.execute(f"CHECK TABLE {table}")]
        wrong = [text for kind, text in said if kind in ("error", "warning") or (kind == "status" and text != "OK")]
        if wrong:
            raise WorkloadError(f"CHECK TABLE {table}: {wrong[0]}")
    return {"consistency": violations, "check_table": "OK"}


class InnoDBTpcc:
    """TPC-C in InnoDB's words, for oltp.py: its load, its terminals' CALLs (dbtier's own terminals
    only: pgbench is PostgreSQL's client), its checks."""

    drivers = ("python",)
    calls = Calls
    load = staticmethod(load)
    verify = staticmethod(verify)
