"""Seed 002's operational work: build the database (create it, bulk-load it, create its indexes),
then dump it to a dump device and restore it from there, each step timed. The seed built its 95 GB
order-entry database on ASE 7x faster on flash (load 7x, index creation 8x), dumped it 5.5x faster
and loaded the dump 5x faster; striping the dump over several files gained up to 1.25x more.

Here the database is TPC-C's (tpcc_schema.py). The bulk load is COPY from files the server wrote
beforehand outside every device (a source that costs nothing, as a loader's input on other disks);
the dump is pg_dump's directory format, uncompressed as ASE's dumps were, with --jobs workers (the
seed's stripes), into the device placed as `dump`; the restore is pg_restore --jobs into a new
database. On MariaDB (build_innodb.py) the same steps as InnoDB does them."""

from __future__ import annotations

from pathlib import Path

from psycopg import sql

from dbtier.errors import UserError
from dbtier.workloads import build_innodb, tpcc_procs, tpcc_schema
from dbtier.workloads.base import Footprint, Param, Phase, Workload, WorkloadError
from dbtier.workloads.tpcc_schema import Scale

DB = "tpcc_build"


class Build(Workload):
    name = "build"
    seed = "002"
    summary = "create, bulk-load (COPY) and index a TPC-C database; dump and restore it (seed 002)"
    description = (
        "Seed 002 timed building its order-entry database (create, bulk copy, create indexes: 161 min on HDD, "
        "22.5 on flash, 7x) and dumping and loading it (5.5x and 5x), with striped dumps up to 1.25x faster. "
        "Here: TPC-C with WAREHOUSES warehouses; create database, COPY of the nine tables, the ten indexes, "
        "pg_dump -Fd with JOBS workers to the device placed as dump (--place dump=DEVICE), and pg_restore with "
        "JOBS workers into a new database; each phase measured. On MariaDB: LOAD DATA, the secondary indexes "
        "(InnoDB keeps the rows in the primary key), JOBS mariadb-dump --tab at once, mariadb-import with JOBS "
        "threads.")
    params = (
        *tpcc_schema.SCALE_PARAMS,
        Param("jobs", int, 1, "dump and restore workers (the seed's dump stripes): pg_dump and pg_restore --jobs; "
                              "on MariaDB, mariadb-dumps at once and mariadb-import's threads"),
        Param("backup", bool, False, "MariaDB: also a physical backup of the restored database to the dump device "
                                     "(mariadb-backup --backup), and its --prepare, each a phase"),
    )
    engines = ("postgres", "mariadb")
    innodb: build_innodb.InnoDBBuild | None = None  # the steps on MariaDB, chosen by for_engine
    objects = tpcc_schema.OBJECTS
    size_options = ("warehouses", "items", "customers")

    @property
    def scale(self) -> Scale:
        return Scale.of(self.p)

    def footprint(self, cache_state: str = "cold") -> Footprint:
        """The database once (the restore drops it first), the load files (CSV, about the tables' size)
        outside every device, the dump (uncompressed COPY text, about the same) on the dump device, and
        the WAL of the load and index builds, twice (load and restore); with --backup, a copy of the whole
        database beside the dump. pg_dump and pg_restore hold a connection per job and one more."""
        objects = tpcc_schema.sizes(self.scale)
        tables = sum(objects[t] for t in tpcc_schema.TABLES)
        backup = sum(objects.values()) if self.p["backup"] else 0
        return Footprint(objects, wal=2 * sum(objects.values()), dump=tables + backup, scratch=tables, databases=1,
                         connections=self.p["jobs"] + 1, connections_option="jobs")

    def for_engine(self, engine: str) -> None:
        super().for_engine(engine)
        if self.p["backup"] and engine != "mariadb":
            raise UserError("--backup is mariadb-backup's physical backup (--engine mariadb); on PostgreSQL the "
                            "build's dump is pg_dump's")
        self.innodb = (build_innodb.InnoDBBuild(self.scale, self.p["jobs"], backup=self.p["backup"])
                       if engine == "mariadb" else None)

    def prepare(self, lab, progress) -> None:
        """The load's input: one CSV file per table, written by the server outside every device."""
        if self.innodb:
            return self.innodb.prepare(lab, progress)
        self.staging = lab.scratch_dir()
        self.dump_dir = lab.dump_dir() / "tpcc"
        progress.phase("writing the load files", total=len(tpcc_schema.TABLES))
        with lab.connect() as conn:
            conn.execute(tpcc_schema.FUNCTIONS)
            for table in tpcc_schema.TABLES:
                conn.execute(sql.SQL("COPY ({}) TO {}").format(sql.SQL(tpcc_schema.data_query(table, self.scale)),
                                                               sql.Literal(str(self.staging / f"{table}.csv"))))
                progress.advance()
        self.expected = {}

    def _create(self, lab, progress) -> dict:
        progress.phase("create database and tables")
        lab.create_database(DB)
        with lab.connect(DB) as conn:
            tpcc_schema.create_tables(lab, conn)
            conn.execute(tpcc_procs.PROCEDURES)
        return {"tables": len(tpcc_schema.TABLES)}

    def _load(self, lab, progress) -> dict:
        progress.phase("bulk load (COPY)", total=len(tpcc_schema.TABLES))
        rows = {}
        with lab.connect(DB) as conn:
            for table in tpcc_schema.TABLES:
                cur = conn.execute(sql.SQL("COPY {} FROM {}").format(
                    sql.Identifier(table), sql.Literal(str(self.staging / f"{table}.csv"))))
                rows[table] = cur.rowcount
                progress.advance()
        self.expected = rows
        return self.scale.check_loaded(rows)

    def _index(self, lab, progress) -> dict:
        progress.phase("create indexes", total=len(tpcc_schema.INDEXES))
        with lab.connect(DB) as conn:
            tpcc_schema.create_indexes(lab, conn, progress)
            conn.execute("ANALYZE")
        return {"indexes": len(tpcc_schema.INDEXES)}

    def _tool(self, lab, name: str, *args: str) -> None:
        """A client program of the install, as the lab runs them, with its I/O on the devices."""
        proc = lab.client(name, *args).run()
        if proc.returncode != 0:
            raise WorkloadError(f"{name} failed: {' / '.join(proc.stderr.strip().splitlines()[-3:])}")

    def _dump(self, lab, progress) -> dict:
        progress.phase(f"pg_dump -Fd -j {self.p['jobs']} to the dump device")
        self._tool(lab, "pg_dump", "-Fd", "-j", str(self.p["jobs"]), "-Z", "0", "-f", str(self.dump_dir), DB)
        size = sum(f.stat().st_size for f in Path(self.dump_dir).iterdir())
        return {"dump_bytes": size}

    def _restore(self, lab, progress) -> dict:
        progress.phase(f"pg_restore -j {self.p['jobs']} from the dump device")
        with lab.connect() as conn:
            conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(DB)))
        lab.create_database(DB)
        self._tool(lab, "pg_restore", "-j", str(self.p["jobs"]), "-d", DB, str(self.dump_dir))
        with lab.connect(DB) as conn:
            rows = {t: conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(t))).fetchone()[0]
                    for t in tpcc_schema.TABLES}
        if rows != self.expected:
            raise WorkloadError(f"the restored database differs from the loaded one: {rows} against {self.expected}")
        return {"rows": sum(rows.values())}

    def phases(self, cache_state: str = "cold") -> list[Phase]:
        # One after the other, as the seed's operator did: each step starts with what the last left.
        if self.innodb:
            return self.innodb.phases()
        return [Phase("create database", self._create), Phase("load", self._load, cold=False),
                Phase("create indexes", self._index, cold=False), Phase("dump", self._dump),
                Phase("restore", self._restore)]

    def verify(self, lab) -> dict:
        if self.innodb:
            return self.innodb.verify(lab)
        with lab.connect(DB) as conn:
            violations = tpcc_schema.check_consistency(conn)
            conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
            for index in tpcc_schema.INDEXES:
                conn.execute("SELECT bt_index_check(%s::regclass, true)", (index,))
        if any(violations.values()):
            raise WorkloadError(f"TPC-C consistency conditions violated after the restore: {violations}")
        return {"consistency": violations, "amcheck": "clean", "rows": sum(self.expected.values())}

    def rates(self, metrics: dict, elapsed_s: float, phase: str = "run", measured: dict | None = None) -> dict:
        if phase in ("load", "restore"):
            return {"rows_per_s": metrics["rows"] / elapsed_s}
        if phase == "dump":
            return {"dump_mb_per_s": metrics["dump_bytes"] / 1048576 / elapsed_s}
        return {}
