"""The TPC-C terminals: N client connections, each on its home warehouse, drawing transactions in
the 45/43/4/4/4 mix with the specification's inputs (NURand customers and items, 1% of New-Orders
rolled back by an unknown item, 15% of Payments for a remote customer, 60% by last name), with no
keying or think time, as HammerDB drives PostgreSQL. Each terminal times its own transactions."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import psycopg

from dbtier.measure.waits import block_signals
from dbtier.workloads import pgbench_log

MIX = (("new_order", 45), ("payment", 43), ("order_status", 4), ("delivery", 4), ("stock_level", 4))
TYPES = tuple(name for name, _ in MIX)
#: the transactions that write: with a ledger (a crash test's, crash/ledger.py), each also inserts its
#: terminal's number into the ledger table, in the same transaction
LEDGERED = ("new_order", "payment", "delivery")
LEDGER_ROW = "INSERT INTO {} (client) VALUES (%s)"  # the table's name, then the terminal's number
C_RUN = {"last": 223, "id": 259, "item": 7911}  # |223 - 157| = 66: inside the specification's 65..119
SYLLABLES = ("BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING")


class Retry(Exception):
    """A deadlock or a lock the transaction could not have: rolled back, tried again."""


class RolledBack(Exception):
    """The specified 1% of New-Orders, with an unknown item: rolled back, as specified."""


class PostgresCalls:
    """The five transactions on one PostgreSQL connection: a function call each (tpcc_procs.py), in
    autocommit, prepared (little client work)."""
    QUERIES = {
        "new_order": "SELECT tpcc_new_order(%s::int, %s::int, %s::int, %s::int[], %s::int[], %s::int[])",
        "payment": "SELECT tpcc_payment(%s::int, %s::int, %s::int, %s::int, %s::int, %s::text, %s::numeric)",
        "order_status": "SELECT tpcc_order_status(%s::int, %s::int, %s::int, %s::text)",
        "delivery": "SELECT tpcc_delivery(%s::int, %s::int)",
        "stock_level": "SELECT tpcc_stock_level(%s::int, %s::int, %s::int)",
    }
    RETRYABLE = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)

    def __init__(self, conn, ledger: str | None = None, client: int = 0):
        self.conn, self.cur = conn, conn.cursor()
        self.ledger, self.client = ledger, client

    def __call__(self, kind: str, args: tuple) -> None:
        try:
            if self.ledger and kind in LEDGERED:  # the call and its ledger row, one transaction
                with self.conn.transaction():
                    self.cur.execute(self.QUERIES[kind], args, prepare=True)
                    self.cur.execute(LEDGER_ROW.format(self.ledger), (self.client,))
            else:
                self.cur.execute(self.QUERIES[kind], args, prepare=True)
        except psycopg.errors.RaiseException as exc:
            raise RolledBack from exc
        except self.RETRYABLE as exc:
            raise Retry from exc


def last_name(n: int) -> str:
    return SYLLABLES[n // 100] + SYLLABLES[(n // 10) % 10] + SYLLABLES[n % 10]


def nurand(rng: random.Random, a: int, x: int, y: int, c: int) -> int:
    return (((rng.randint(0, a) | rng.randint(x, y)) + c) % (y - x + 1)) + x


@dataclass
class Tally:
    latencies_ms: dict[str, list[float]] = field(default_factory=lambda: {t: [] for t in TYPES})
    rolled_back: int = 0   # New-Orders with the unknown item: rolled back, as specified
    retried: int = 0       # deadlocks and serialization failures, tried again
    errors: list[str] = field(default_factory=list)
    # each committed transaction: (type, terminal, end on the epoch clock in us, latency ms)
    transactions: list[tuple[str, int, int, float]] = field(default_factory=list)

    def merge(self, other: "Tally") -> None:
        for t in TYPES:
            self.latencies_ms[t] += other.latencies_ms[t]
        self.transactions += other.transactions
        self.rolled_back += other.rolled_back
        self.retried += other.retried
        self.errors += other.errors


class Terminal:
    def __init__(self, connect, number: int, warehouses: int, items: int, customers: int, seed: int,
                 calls=PostgresCalls, ledger: str | None = None):
        self.connect = connect
        self.ledger = ledger
        self.calls = calls  # the engine's transactions on a connection (PostgresCalls, tpcc_innodb.Calls)
        self.number = number
        self.rng = random.Random(seed * 1000003 + number)
        self.w = number % warehouses + 1
        self.d = number // warehouses % 10 + 1  # the terminal's own district, for Stock-Level
        self.warehouses, self.items, self.customers = warehouses, items, customers
        self.tally = Tally()
        self.weights = [w for _, w in MIX]

    # Below the specification's scale the draws wrap around the smaller ranges, keeping their skew
    # spread out instead of piling onto the last row.
    def _customer(self) -> int:
        return (nurand(self.rng, 1023, 1, 3000, C_RUN["id"]) - 1) % self.customers + 1

    def _name(self) -> str:
        return last_name(nurand(self.rng, 255, 0, 999, C_RUN["last"]) % min(1000, self.customers))

    def inputs(self, kind: str) -> tuple:
        """The transaction's inputs, drawn as the specification draws them."""
        r, w = self.rng, self.w
        if kind == "new_order":
            n = r.randint(5, 15)
            items = sorted((nurand(r, 8191, 1, 100000, C_RUN["item"]) - 1) % self.items + 1 for _ in range(n))
            supply = [w if self.warehouses == 1 or r.random() >= 0.01 else r.choice(
                [x for x in range(1, self.warehouses + 1) if x != w]) for _ in range(n)]
            if r.random() < 0.01:
                items[-1] = self.items + 1  # unknown: the transaction rolls back
            qty = [r.randint(1, 10) for _ in range(n)]
            return (w, r.randint(1, 10), self._customer(), items, supply, qty)
        if kind == "payment":
            d = r.randint(1, 10)
            cw, cd = (w, d) if self.warehouses == 1 or r.random() < 0.85 else (
                r.choice([x for x in range(1, self.warehouses + 1) if x != w]), r.randint(1, 10))
            by_name = r.random() < 0.6
            return (w, d, cw, cd, None if by_name else self._customer(), self._name() if by_name else None,
                    round(r.uniform(1, 5000), 2))
        if kind == "order_status":
            by_name = r.random() < 0.6
            return (w, r.randint(1, 10), None if by_name else self._customer(), self._name() if by_name else None)
        if kind == "delivery":
            return (w, r.randint(1, 10))
        return (w, self.d, r.randint(10, 20))

    def run(self, stop: threading.Event) -> None:
        block_signals()
        try:
            with self.connect() as conn:
                call = self.calls(conn, self.ledger, self.number)
                while not stop.is_set():
                    kind = self.rng.choices(TYPES, self.weights)[0]
                    args = self.inputs(kind)
                    t0 = time.perf_counter()
                    while True:
                        try:
                            call(kind, args)
                            latency_ms = 1e3 * (time.perf_counter() - t0)
                            self.tally.latencies_ms[kind].append(latency_ms)
                            self.tally.transactions.append((kind, self.number, time.time_ns() // 1000, latency_ms))
                            break
                        except RolledBack:
                            self.tally.rolled_back += 1
                            break
                        except Retry:
                            self.tally.retried += 1
        except Exception as exc:  # reported by the caller: a terminal that died invalidates the run
            self.tally.errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")


def drive(connect, clients: int, seconds: float, warehouses: int, items: int, customers: int, seed: int,
          progress=None, calls=PostgresCalls, ledger: str | None = None) -> Tally:
    """Runs `clients` terminals for `seconds`, each calling the transactions by `calls` on a connection
    of its own; returns their merged tally. ledger: the table each writing transaction also inserts its
    terminal's number into (LEDGERED)."""
    terminals = [Terminal(connect, i, warehouses, items, customers, seed, calls, ledger) for i in range(clients)]
    stop = threading.Event()
    threads = [threading.Thread(target=t.run, args=(stop,), name=f"tpcc-terminal-{i}", daemon=True)
               for i, t in enumerate(terminals)]
    for th in threads:
        th.start()
    end = time.monotonic() + seconds
    try:
        while (left := end - time.monotonic()) > 0 and any(th.is_alive() for th in threads):
            time.sleep(min(1.0, left))
            if progress:
                progress.advance(1)
    finally:
        stop.set()
        for th in threads:
            th.join()
    total = Tally()
    for t in terminals:
        total.merge(t.tally)
    return total


def note_transactions(db, tally: Tally) -> None:
    """Hands each committed transaction to the lab, which keeps them beside a trace (as pgbench's are)."""
    for t in TYPES:
        mine = [(c, end, lat) for kind, c, end, lat in tally.transactions if kind == t]
        if mine:
            clients, ends, lats = zip(*mine)
            db.note_transactions(t, clients, ends, lats)


def summary(tally: Tally, elapsed_s: float) -> dict:
    """NOPM (New-Orders committed per minute), tpm (all committed transactions per minute), the mix
    as run, and latency percentiles per transaction type, in ms."""
    per_type = {}
    for t in TYPES:
        lat = np.asarray(tally.latencies_ms[t])
        per_type[t] = {"count": int(lat.size), **({f"p{q}_ms": float(np.percentile(lat, q)) for q in (50, 90, 95, 99)}
                                                 if lat.size else {}),
                       "mean_ms": float(lat.mean()) if lat.size else 0.0}
    committed = sum(v["count"] for v in per_type.values())
    minutes = elapsed_s / 60 if elapsed_s > 0 else float("nan")
    return {"driver": "python", "committed": committed, "rolled_back": tally.rolled_back, "retried": tally.retried,
            "new_orders": per_type["new_order"]["count"], "nopm": per_type["new_order"]["count"] / minutes,
            "tpm": committed / minutes,
            "mix_pct": {t: 100.0 * per_type[t]["count"] / committed if committed else 0.0 for t in TYPES},
            "latency": per_type,
            "transactions_per_s": pgbench_log.per_second([end for _, _, end, _ in tally.transactions])}
