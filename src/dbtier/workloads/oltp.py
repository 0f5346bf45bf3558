"""Seed 002's order-entry OLTP benchmark: TPC-C's nine tables, W warehouses, N client connections
running New-Order, Payment, Order-Status, Delivery and Stock-Level in the 45/43/4/4/4 mix for a fixed
time after a warm-up; NOPM, transactions per minute, and latency percentiles per transaction type.
The seed ran it all-HDD (data striped over twelve 15K SAS disks, the log on a thirteenth), with the
log alone on PCIe flash (1.65x), and all on flash (1.81x); and with caches too small for the data
(13x all-flash). Here the layouts are --place (data=hdd,wal=ssd) and the cache is --cache."""

from __future__ import annotations

import os

from dbtier.errors import UserError
from dbtier.workloads import tpcc_driver, tpcc_innodb, tpcc_pgbench, tpcc_procs, tpcc_schema
from dbtier.workloads.base import Footprint, Param, Phase, Workload, WorkloadError
from dbtier.workloads.tpcc_schema import Scale


#: Transactions a second one CPU may run at most: the ceiling the growth of the data is estimated with
#: (measured: about 1,500 a second per CPU on an emulated RAM SAN, 0.35 ms of server and client CPU
#: each; slower devices make it far fewer).
TXN_PER_CPU_S = 3000
#: What a transaction of the mix adds, on average, by table or index (bytes; measured over 14,809
#: transactions at 20,000 items and 300 customers, with half again for margin): New-Order's order, its
#: ten lines and their keys; Payment's history row; the new versions of stock and customer rows that
#: do not fit their page (most are HOT updates in place).
GROWTH_PER_TXN = {"order_line": 800, "order_line_pkey": 260, "orders": 50, "orders_pkey": 40,
                  "orders_customer_idx": 30, "new_order": 30, "new_order_pkey": 10, "history": 60,
                  "customer": 100, "stock": 100}
WAL_PER_TXN = 6000  # measured: 4,700 bytes


def load(lab, conn, scale: Scale, progress) -> None:
    """The nine tables filled by the server, their indexes, the transactions' functions; analyzed,
    checkpointed."""
    tpcc_schema.create_tables(lab, conn)
    progress.phase(f"loading TPC-C, {scale.warehouses} warehouse(s)", total=len(tpcc_schema.TABLES))
    for table in tpcc_schema.TABLES:
        tpcc_schema.fill(conn, table, scale)
        progress.advance()
    progress.phase("creating the TPC-C indexes", total=len(tpcc_schema.INDEXES))
    tpcc_schema.create_indexes(lab, conn, progress)
    conn.execute(tpcc_procs.PROCEDURES)
    conn.execute(tpcc_procs.DRAWN)
    progress.phase("vacuum, analyze, checkpoint")
    conn.execute("VACUUM (FREEZE, ANALYZE)")
    conn.execute("CHECKPOINT")


def verify_tpcc(lab) -> dict:
    """The consistency conditions 1-4, 8 and 9 and amcheck on every TPC-C index and table."""
    with lab.connect() as conn:
        violations = tpcc_schema.check_consistency(conn)
        bad = {k: v for k, v in violations.items() if v}
        if bad:
            raise WorkloadError(f"TPC-C consistency conditions violated: {bad}")
        conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
        for index in tpcc_schema.INDEXES:
            conn.execute("SELECT bt_index_check(%s::regclass, true)", (index,))
        problems = sum(conn.execute("SELECT count(*) FROM verify_heapam(%s::regclass)", (t,)).fetchone()[0]
                       for t in tpcc_schema.TABLES)
        if problems:
            raise WorkloadError(f"verify_heapam found {problems} problems in the TPC-C tables")
    return {"consistency": violations, "amcheck": "clean"}


class PostgresTpcc:
    """TPC-C in PostgreSQL's words: its load, its terminals' calls of the server's functions, its checks.
    pgbench's C clients drive it by default; dbtier's own terminals as well."""

    drivers = ("pgbench", "python")
    calls = tpcc_driver.PostgresCalls

    @staticmethod
    def load(lab, scale: Scale, data_seed: int, progress) -> None:
        with lab.connect() as conn:
            load(lab, conn, scale, progress)

    verify = staticmethod(verify_tpcc)


class Oltp(Workload):
    name = "oltp"
    seed = "002"
    summary = "TPC-C-like order entry: 45/43/4/4/4 mix, NOPM and tpm, latency per type (seed 002)"
    description = (
        "Seed 002 ran an order-entry benchmark on ASE: all-HDD, log-only on flash (1.65x the transactions), "
        "all flash (1.81x), and with reduced caches (13x). Here: TPC-C's schema with WAREHOUSES warehouses "
        "(about 100 MB each), CLIENTS connections without think time, a WARMUP unmeasured but on the devices, "
        "then DURATION seconds measured. Transactions are server-side functions (one round trip each). "
        "After the run the consistency conditions 1-4, 8 and 9 and amcheck must hold. With --engine mariadb: the same "
        "tables clustered by their primary keys, the transactions as stored procedures, dbtier's own terminals "
        "(pymysql), CHECK TABLE for amcheck.")
    params = (
        *tpcc_schema.SCALE_PARAMS,
        Param("clients", int, 4, "client connections (terminals), each on a home warehouse"),
        Param("duration", int, 60, "measured seconds"),
        Param("warmup", int, 10, "seconds run before the measurement, with the devices emulated", minimum=0),
        Param("driver", str, None, "pgbench: the terminals are pgbench clients (C, little client CPU; "
                                    "PostgreSQL's default); python: dbtier's own threads (MariaDB's)",
              choices=("pgbench", "python")),
        Param("data-seed", int, 1, "seed of the transaction inputs"),
    )
    objects = tpcc_schema.OBJECTS
    engines = ("postgres", "mariadb")
    size_options = ("warehouses", "items", "customers", "duration")
    #: (type, pgbench script) -> the script the terminals run: a crash test's ledger row (crash/ledger.py)
    transform = None
    #: the table each writing transaction of dbtier's own terminals inserts its terminal's number into
    #: (a crash test's ledger, crash/ledger.py)
    ledger_table: str | None = None

    @property
    def scale(self) -> Scale:
        return Scale.of(self.p)

    @property
    def engine_tpcc(self):
        """The load, the terminals' calls and the checks in the engine's words: PostgreSQL's here,
        InnoDB's in tpcc_innodb.py."""
        return tpcc_innodb.InnoDBTpcc if self.engine == "mariadb" else PostgresTpcc

    @property
    def driver(self) -> str:
        return self.p["driver"] or self.engine_tpcc.drivers[0]

    def for_engine(self, engine: str) -> None:
        super().for_engine(engine)
        if self.p["driver"] not in (None, *self.engine_tpcc.drivers):
            raise UserError(f"--driver {self.p['driver']} is PostgreSQL's client; with --engine {engine} the terminals "
                            f"are {' or '.join(f'--driver {d}' for d in self.engine_tpcc.drivers)} (dbtier's own)")

    def footprint(self, cache_state: str = "cold") -> Footprint:
        """The loaded database (logged as it is loaded, and again as VACUUM FREEZE's full-page images),
        and what the transactions add over the warm-up and the run at the most the CPUs could run
        (autovacuum is off: dead versions stay)."""
        objects = tpcc_schema.sizes(self.scale)
        wal = 2 * sum(objects.values())
        txns = TXN_PER_CPU_S * min(self.p["clients"], os.cpu_count() or 1) * (self.p["duration"] + self.p["warmup"])
        for name, per_txn in GROWTH_PER_TXN.items():
            objects[name] += int(per_txn * txns)
        return Footprint(objects, wal=wal + WAL_PER_TXN * txns, connections=self.p["clients"] + 1,
                         connections_option="clients")

    def prepare(self, lab, progress) -> None:
        self.engine_tpcc.load(lab, self.scale, self.p["data_seed"], progress)

    def _drive(self, lab, seconds: int, progress, what: str) -> dict:
        progress.phase(f"{what}: {self.p['clients']} clients, {seconds} s", total=seconds)
        if self.driver == "pgbench":
            return tpcc_pgbench.drive(lab, self.p["clients"], seconds, self.p["warehouses"], self.p["items"],
                                      self.p["customers"], self.p["data_seed"], progress, self.transform)
        tally = tpcc_driver.drive(lab.connect, self.p["clients"], seconds, self.p["warehouses"], self.p["items"],
                                  self.p["customers"], self.p["data_seed"], progress, self.engine_tpcc.calls,
                                  self.ledger_table)
        if tally.errors:
            raise WorkloadError(f"{len(tally.errors)} terminal(s) failed: {tally.errors[0]}")
        tpcc_driver.note_transactions(lab, tally)
        return tpcc_driver.summary(tally, seconds)

    def run(self, lab, progress) -> dict:
        return self._drive(lab, self.p["duration"], progress, "measured run")

    def phases(self, cache_state: str = "cold") -> list[Phase]:
        warm = (lambda lab, progress: self._drive(lab, self.p["warmup"], progress, "warm-up")) \
            if self.p["warmup"] else None
        return [Phase("steady state", self.run, warm=warm)]

    def verify(self, lab) -> dict:
        return self.engine_tpcc.verify(lab)

    def rates(self, metrics: dict, elapsed_s: float, phase: str = "run", measured: dict | None = None) -> dict:
        # NOPM and tpm over the driver's own run (the measured interval adds its start and end);
        # CPU per transaction over the whole interval.
        out = {"nopm": metrics["nopm"], "tpm": metrics["tpm"]}
        if measured and metrics["committed"]:
            out["client_cpu_us_per_txn"] = 1e6 * measured["client_cpu_s"] / metrics["committed"]
            out["server_cpu_ms_per_txn"] = 1e3 * measured["server_cpu_s"] / metrics["committed"]
        return out
