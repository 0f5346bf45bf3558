"""Seed 002's build, dump and restore on InnoDB (build.py is PostgreSQL's): the same TPC-C database in
MariaDB's words. The load files are written by dbtier outside every device, from a staging copy the
server makes unmeasured, and loaded by LOAD DATA LOCAL (as the seed's bulk copy read them from other
disks). InnoDB keeps each table's rows in its primary key, so a table is made with its primary key and
loaded in its order; the create-indexes step builds the two secondary indexes. The dump is
`mariadb-dump --tab` (the server writes each table's rows to the dump device, the client its
definition), JOBS dumps at once over the tables (the seed's stripes), the files synced to the device
after; the restore runs the definitions and `mariadb-import --use-threads JOBS`, whose LOAD DATA the
server reads from the dump device."""

from __future__ import annotations

from pathlib import Path

import pymysql

from dbtier.engines.mariadb import SEEDED_RAND
from dbtier.workloads import restore, tpcc_innodb
from dbtier.workloads.base import Phase, WorkloadError
from dbtier.workloads.tpcc_schema import Scale

SOURCE = "tpcc_source"  # the staging copy the load files are written from, dropped before the measurement


class InnoDBBuild:
    """The build's steps on a MariaDB lab, for Build to run as its phases."""

    def __init__(self, scale: Scale, jobs: int, data_seed: int = 1, backup: bool = False):
        self.scale, self.jobs, self.data_seed, self.backup = scale, jobs, data_seed, backup
        self.expected: dict[str, int] = {}

    def prepare(self, lab, progress) -> None:
        """The load's input: one tab-separated file per table, from a staging copy made by the server."""
        self.staging = lab.client_dir("load")
        self.dump_dir = lab.dump_dir()
        progress.phase("writing the load files", total=len(tpcc_innodb.LOAD_ORDER))
        with lab.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {SOURCE}")
            cur.execute(f"USE {SOURCE}")
            for statement in tpcc_innodb.FUNCTIONS:
                cur.execute(statement)
            cur.execute(SEEDED_RAND, (self.data_seed, self.data_seed + 1))
            for table in tpcc_innodb.LOAD_ORDER:
                cur.execute(f"CREATE TABLE {table} ({tpcc_innodb.table_columns(table, secondary=False)}) "
                            f"{tpcc_innodb.OPTIONS}")
                cur.execute(f"INSERT INTO {table} {tpcc_innodb.data_query(table, self.scale)}")
                _write_tsv(conn, table, self.staging / f"{table}.tsv")
                progress.advance()
            cur.execute(f"DROP DATABASE {SOURCE}")

    def create(self, lab, progress) -> dict:
        progress.phase("create the tables")
        for table in tpcc_innodb.TABLES:
            lab.create_table(table, tpcc_innodb.table_columns(table, secondary=False), tpcc_innodb.OPTIONS)
        return {"tables": len(tpcc_innodb.TABLES)}

    def load(self, lab, progress) -> dict:
        progress.phase("bulk load (LOAD DATA)", total=len(tpcc_innodb.LOAD_ORDER))
        rows = {}
        with lab.connect(local_infile=True) as conn, conn.cursor() as cur:
            for table in tpcc_innodb.LOAD_ORDER:
                rows[table] = cur.execute(f"LOAD DATA LOCAL INFILE %s INTO TABLE {table}",
                                          (str(self.staging / f"{table}.tsv"),))
                progress.advance()
        self.expected = rows
        return self.scale.check_loaded(rows)

    def index(self, lab, progress) -> dict:
        progress.phase("create the secondary indexes", total=len(tpcc_innodb.SECONDARY))
        for name, (table, cols) in tpcc_innodb.SECONDARY.items():
            lab.execute(f"ALTER TABLE {table} ADD KEY {name} ({cols})")
            progress.advance()
        lab.analyze()
        return {"indexes": len(tpcc_innodb.SECONDARY)}

    def dump(self, lab, progress) -> dict:
        progress.phase(f"mariadb-dump --tab, {self.jobs} at once, to the dump device")
        groups = _spread(sorted(tpcc_innodb.TABLES, key=lambda t: -self.expected.get(t, 0)), self.jobs)
        _all_at_once(lab, "mariadb-dump", [["--tab", str(self.dump_dir), "--skip-dump-date", lab.database, *group]
                                           for group in groups])
        # The dump done is the dump on its device, as pg_dump's is (it syncs its files): the server's
        # SELECT ... INTO OUTFILE leaves them in the page cache.
        files = sorted(self.dump_dir.iterdir())
        lab.sync_files(files)
        return {"dump_bytes": sum(f.stat().st_size for f in files)}

    def restore(self, lab, progress) -> dict:
        progress.phase(f"the definitions, and mariadb-import --use-threads {self.jobs}, from the dump device")
        with lab.connect() as conn, conn.cursor() as cur:  # one session: it outlives its database
            cur.execute(f"DROP DATABASE {lab.database}")
            cur.execute(f"CREATE DATABASE {lab.database}")
        for table in tpcc_innodb.TABLES:
            lab.run_sql_file(self.dump_dir / f"{table}.sql", "the dump's definition")
        _all_at_once(lab, "mariadb-import", [["--use-threads", str(self.jobs), lab.database,
                                              *(str(self.dump_dir / f"{t}.txt") for t in tpcc_innodb.TABLES)]])
        rows = {t: int(lab.execute(f"SELECT count(*) FROM {t}")[0][0]) for t in tpcc_innodb.TABLES}
        if rows != self.expected:
            raise WorkloadError(f"the restored database differs from the loaded one: {rows} against {self.expected}")
        return {"rows": sum(rows.values())}

    def physical_backup(self, lab, progress) -> dict:
        """mariadb-backup --backup of the restored database, to the dump device: its files copied whole
        (tables, system and undo tablespaces, the redo log written meanwhile), not its rows as text."""
        progress.phase("mariadb-backup --backup, to the dump device")
        lab.physical_backup("backup", self.dump_dir / "backup")
        # The backup done is the backup on its device, as the dump's is: mariadb-backup leaves part of
        # what it wrote in the page cache (measured: 42.5 of 49.2 MB written by its end)
        files = [f for f in (self.dump_dir / "backup").rglob("*") if f.is_file()]
        lab.sync_files(files)
        return {"backup_bytes": sum(f.stat().st_size for f in files), "backup_files": len(files)}

    def prepare_backup(self, lab, progress) -> dict:
        """mariadb-backup --prepare: InnoDB's recovery run on the copy (the redo log it took applied to
        its pages), so that a server could start from it."""
        progress.phase("mariadb-backup --prepare, on the dump device")
        lab.physical_backup("prepare", self.dump_dir / "backup")
        return {"backup_bytes": restore.dump_bytes(self.dump_dir / "backup")}

    def phases(self) -> list[Phase]:
        return [Phase("create database", self.create), Phase("load", self.load, cold=False),
                Phase("create indexes", self.index, cold=False), Phase("dump", self.dump),
                Phase("restore", self.restore),
                *([Phase("backup", self.physical_backup), Phase("prepare the backup", self.prepare_backup, cold=False)]
                  if self.backup else [])]

    def verify(self, lab) -> dict:
        checks = tpcc_innodb.verify(lab)
        return {**checks, "rows": sum(self.expected.values())}


def _write_tsv(conn, table: str, path: Path) -> None:
    """A table's rows as LOAD DATA reads them by default: tab-separated, NULL as \\N; streamed from the
    server, not held whole in memory."""
    with conn.cursor(pymysql.cursors.SSCursor) as cur, open(path, "w", encoding="ascii") as f:
        cur.execute(f"SELECT * FROM {table}")
        for row in cur:
            f.write("\t".join("\\N" if v is None else str(v) for v in row) + "\n")


def _spread(tables: list[str], jobs: int) -> list[list[str]]:
    """The tables dealt to `jobs` dumps, largest first, so that each has about as much."""
    groups: list[list[str]] = [[] for _ in range(min(jobs, len(tables)))]
    for i, table in enumerate(tables):
        groups[i % len(groups)].append(table)
    return groups


def _all_at_once(lab, program: str, arguments: list[list[str]]) -> None:
    """Runs the lab's client program once per argument list, all at once; the first failure, in one line."""
    procs, failed = [], []
    try:
        for args in arguments:
            procs.append(lab.client(program, *args))
        for proc in procs:
            _out, err = proc.communicate()
            if proc.returncode != 0:
                said = err.decode("utf-8", "replace").strip().splitlines()[-2:]
                failed.append(" / ".join(said) or f"exit {proc.returncode}")
    finally:  # interrupted or failed: none left running against a server about to stop
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if failed:
        raise WorkloadError(f"{program} failed: {failed[0]}")

