"""What a crash state must keep: every transaction whose COMMIT the client saw acknowledged before the
cut, and the workload's own consistency conditions.

The client's side is its per-transaction log (when each client's transactions ended, on the trace's
clock); the server's side a ledger row each transaction writes in the same transaction. A client
runs its transactions one after another, so the ledger's row count per client is how many of its
transactions committed: fewer than it saw acknowledged is a lost commit.

pgbench: its tpcb-like transaction, unchanged but for pgbench_history's filler, which takes the
client's number (pgbench's :client_id), so that pgbench_history is the ledger. TPC-B's consistency
condition: the accounts', tellers' and branches' balances and the history's deltas sum alike.

oltp (TPC-C, pgbench's terminals or dbtier's own, on either engine): each transaction that writes
(New-Order, Payment, Delivery) also inserts its client's number into dbtier_ledger, in the same
transaction; the read-only ones (Order-Status, Stock-Level) are left as they are and not counted.
TPC-C's consistency conditions 1-4, 8 and 9.

A user's own pgbench scripts (-f) with --ledger TABLE: each transaction of every script inserts one
row into TABLE with its column client set to :client_id (dbtier makes TABLE (client int) unless the
setup did). That every script does is checked on the live database after the run: its rows per
client must equal what pgbench acknowledged, or the run is refused before any cut."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from psycopg import sql

from dbtier.errors import UserError
from dbtier.workloads.tpcc_driver import LEDGERED

#: pgbench's built-in tpcb-like (pgbench.c), its history row carrying the client
TPCB_LEDGER = """\\set aid random(1, 100000 * {scale})
\\set bid random(1, 1 * {scale})
\\set tid random(1, 10 * {scale})
\\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime, filler) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP, :client_id);
END;
"""


@dataclass
class Acknowledged:
    """Each client's acknowledged transactions, in order: when each began (its first statement sent) and
    when its acknowledgement was seen (trace clock, ns). Its commit fell between the two."""
    ends: dict[int, np.ndarray]
    starts: dict[int, np.ndarray]

    @classmethod
    def from_recording(cls, transactions: list[tuple], counted: tuple[str, ...] | None = None) -> "Acknowledged":
        """transactions: (script, client, end_ns, latency_us); counted: the scripts whose transactions
        write a ledger row (None: every one)."""
        by_client: dict[int, list[tuple[int, int]]] = {}
        for script, client, end_ns, lat_us in transactions:
            if counted is None or script in counted:
                by_client.setdefault(int(client), []).append((int(end_ns), int(end_ns) - int(lat_us) * 1000))
        ends, starts = {}, {}
        for c, v in by_client.items():
            v.sort()
            ends[c] = np.array([e for e, _ in v], dtype=np.int64)
            starts[c] = np.array([s for _, s in v], dtype=np.int64)
        return cls(ends, starts)

    def count_by(self, at_ns: int) -> dict[int, int]:
        return {c: int(np.searchsorted(e, at_ns, side="right")) for c, e in self.ends.items()}

    @property
    def total(self) -> int:
        return sum(len(e) for e in self.ends.values())


@dataclass
class Loss:
    lost: int                  # acknowledged before the cut, not in the state
    clients: int               # clients that lost any
    span_ms: float             # from the first lost acknowledgement to the cut
    suffix: bool               # no kept acknowledged commit certainly came after a lost one


def judge(acked: Acknowledged, kept: dict[int, int], at_ns: int) -> Loss:
    """The state's kept rows per client against what was acknowledged by the cut. A commit the state
    kept that its client saw only after the cut (its WAL flushed first) is not acknowledged, so it
    neither counts as kept nor stands in the order of what was.

    The order of two clients' commits is known only where their transactions did not overlap: a
    client sees its acknowledgement some time after the server committed (pgbench reads its
    connections in turn; a terminal thread waits for Python's lock, 5 ms at most when the host is
    idle, longer when it is not), so a kept commit proves the loss is not the last commits only when
    its transaction began after a lost one's acknowledgement was seen."""
    by_cut = acked.count_by(at_ns)
    lost, clients, first_lost, last_kept_began = 0, 0, None, None
    for c, n in by_cut.items():
        k = kept.get(c, 0)
        if min(k, n) > 0:
            t = int(acked.starts[c][min(k, n) - 1])
            last_kept_began = t if last_kept_began is None else max(last_kept_began, t)
        if k < n:
            lost += n - k
            clients += 1
            t = int(acked.ends[c][k])
            first_lost = t if first_lost is None else min(first_lost, t)
    span = (at_ns - first_lost) / 1e6 if first_lost is not None else 0.0
    suffix = first_lost is None or last_kept_began is None or last_kept_began <= first_lost
    return Loss(lost, clients, span, suffix)


#: the workloads that keep a ledger dbtier reads
WITH_LEDGER = ("pgbench", "oltp")


class PgbenchLedger:
    """pgbench's tpcb-like with its ledger (module docstring)."""
    name = "pgbench tpcb-like"
    counted = None  # every transaction writes its row

    def __init__(self, scale: int):
        self.scale = scale

    def script(self) -> str:
        return TPCB_LEDGER.format(scale=self.scale)

    def apply(self, workload, lab) -> None:
        """The workload made to keep the ledger (after its data is loaded, before the base image)."""
        path = lab.client_dir("crash") / "ledger.sql"
        path.write_text(self.script())
        workload.use_script("tpcb-like", path)

    def kept(self, conn) -> dict[int, int]:
        rows = conn.execute("SELECT trim(filler)::int, count(*) FROM pgbench_history WHERE filler IS NOT NULL "
                            "GROUP BY 1").fetchall()
        return {int(c): int(n) for c, n in rows}

    def inconsistency(self, conn) -> str | None:
        """TPC-B's condition, or what breaks it."""
        a, t, b, h = conn.execute(
            "SELECT (SELECT coalesce(sum(abalance), 0) FROM pgbench_accounts), "
            "(SELECT coalesce(sum(tbalance), 0) FROM pgbench_tellers), "
            "(SELECT coalesce(sum(bbalance), 0) FROM pgbench_branches), "
            "(SELECT coalesce(sum(delta), 0) FROM pgbench_history)").fetchone()
        if a == t == b == h:
            return None
        return f"balances do not add up: accounts {a}, tellers {t}, branches {b}, history {h}"


#: the TPC-C transactions that write, each with a ledger row; the read-only ones are not counted
TPCC_WRITING = LEDGERED


def _rows(conn, query: str) -> list[tuple]:
    """A query's rows on either engine's connection (psycopg's or PyMySQL's)."""
    with conn.cursor() as cur:
        cur.execute(query)
        return list(cur.fetchall())


#: oltp's ledger table
TPCC_LEDGER = "dbtier_ledger"


class TpccLedger:
    """oltp's TPC-C with its ledger (module docstring), on either engine: pgbench's terminals run each
    writing transaction's script wrapped with its row (wrap); dbtier's own insert it before they commit
    (tpcc_driver.LEDGERED)."""
    name = "TPC-C"
    counted = TPCC_WRITING

    def apply(self, workload, lab) -> None:
        with lab.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {TPCC_LEDGER} (client int NOT NULL)")
        if workload.driver == "pgbench":
            workload.transform = self.wrap
        else:
            workload.ledger_table = TPCC_LEDGER

    @staticmethod
    def wrap(kind: str, script: str) -> str:
        """A pgbench script of the transaction `kind`, its call and the ledger's row in one transaction."""
        if kind not in TPCC_WRITING:
            return script
        head, call = script.rstrip("\n").rsplit("\n", 1)
        return (f"{head}\nBEGIN;\n{call}\nINSERT INTO {TPCC_LEDGER} (client) VALUES (:client_id);\nEND;\n")

    def kept(self, conn) -> dict[int, int]:
        return {int(c): int(n) for c, n in _rows(conn, f"SELECT client, count(*) FROM {TPCC_LEDGER} GROUP BY 1")}

    def inconsistency(self, conn) -> str | None:
        """TPC-C's consistency conditions 1-4, 8 and 9, or those broken."""
        from dbtier.workloads.tpcc_schema import CONSISTENCY

        broken = {name: int(_rows(conn, query)[0][0]) for name, query in CONSISTENCY.items()}
        broken = {name: n for name, n in broken.items() if n}
        if not broken:
            return None
        return "TPC-C's consistency conditions broken: " + ", ".join(f"{k} ({v:,} rows)" for k, v in broken.items())


_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?$")


class UserLedger:
    """A table the user's own scripts write a row to in each transaction (module docstring)."""
    counted = None

    def __init__(self, table: str):
        if not _TABLE.match(table):
            raise UserError(f"--ledger {table!r}: give a table's name (or schema.table), as it was created")
        self.table = table
        self.name = f"the ledger table {table}"
        self.ident = sql.Identifier(*table.split("."))

    def apply(self, workload, lab) -> None:
        with lab.connect() as conn:
            conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (client int NOT NULL)").format(self.ident))
            has = conn.execute("SELECT count(*) FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'client' "
                               "AND NOT attisdropped", (self.table,)).fetchone()[0]
        if not has:
            raise UserError(f"--ledger {self.table}: the table has no column client; each transaction inserts a row "
                            "with client = :client_id")

    def kept(self, conn) -> dict[int, int]:
        rows = conn.execute(sql.SQL("SELECT client, count(*) FROM {} GROUP BY 1").format(self.ident)).fetchall()
        return {int(c): int(n) for c, n in rows if c is not None}

    def inconsistency(self, conn) -> str | None:
        return None

    def check_live(self, conn, acked: "Acknowledged") -> None:
        """After the run, before any cut: every acknowledged transaction wrote its row, and no other did."""
        kept, want = self.kept(conn), acked.count_by(np.iinfo(np.int64).max)
        wrong = sorted(c for c in set(kept) | set(want) if kept.get(c, 0) != want.get(c, 0))
        if wrong:
            c = wrong[0]
            raise UserError(f"--ledger {self.table}: client {c} has {kept.get(c, 0):,} rows after the run but pgbench "
                            f"acknowledged {want.get(c, 0):,} of its transactions; each transaction of every script "
                            "must insert exactly one row (client = :client_id)")


def for_workload(workload, ledger_table: str | None = None) -> PgbenchLedger | TpccLedger | UserLedger:
    """The ledger a workload keeps, or one line saying what it needs."""
    if ledger_table is not None:
        if workload.name != "pgbench" or not workload.p["file"] or workload.p["builtin"]:
            raise UserError("--ledger names the table your own pgbench scripts (-f) write a row to in each "
                            "transaction; give it with pgbench -f FILE only")
        return UserLedger(ledger_table)
    if workload.name == "oltp":
        return TpccLedger()
    if workload.name == "pgbench":
        scripts = [name for name, _args, _w in workload.scripts]
        if scripts == ["tpcb-like"] and workload.p["init"]:
            return PgbenchLedger(int(workload.p["scale"]))
        raise UserError("dbtier crash checks pgbench's built-in tpcb-like on its own tables (-i): its history "
                        "is the ledger of acknowledged commits; your own scripts (-f) can keep one: --ledger TABLE")
    raise UserError(f"dbtier crash cannot check {workload.name}: it keeps no ledger of acknowledged commits and "
                    "no consistency condition; run it with pgbench -i (tpcb-like), whose history is one, or oltp "
                    "(TPC-C)")
