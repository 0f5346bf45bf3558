"""What a workload may use of a lab, and nothing else: connections and SQL, PostgreSQL's client
programs as the lab runs them (the servers' user, the lab's private socket, the emulation), where its
files go (an object's tablespace, a scratch folder outside every device, the dump device), and the
objects the database has.

    def prepare(self, db: LabHandle, progress):
        with db.connect() as conn: ...
        db.client("pgbench", "-i", "-s", "10", db.database).run()
        db.objects()   # every table, index and materialized view, with its size and device"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql


#: what a client program is given beside its own arguments
CLIENTS = ("pgbench", "psql", "pg_dump", "pg_restore", "pg_dumpall", "vacuumdb", "reindexdb", "createdb")
RELKINDS = {"r": "table", "p": "table", "i": "index", "I": "index", "m": "materialized view"}


@dataclass
class Client:
    """One client program's command line, environment and user: run it, or start it."""
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    user_kwargs: dict = field(default_factory=dict)

    def run(self, timeout: float | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv, env=self.env, cwd=self.cwd, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout, **self.user_kwargs)

    def popen(self, **kw) -> subprocess.Popen:
        return subprocess.Popen(self.argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, **self.user_kwargs,
                                **kw)


@dataclass(frozen=True)
class DbObject:
    """A table, index or materialized view of the lab's database, and where it is."""
    schema: str
    name: str
    kind: str          # table, index, materialized view
    bytes: int
    tablespace: str
    device: str | None  # None: a tablespace that is no device's (pg_global)
    path: str          # pg_relation_filepath, relative to the data directory
    table: str | None = None  # an index's table
    total_bytes: int | None = None  # every fork, and a table's TOAST: what moving it moves (pg_table_size)

    @property
    def qualified(self) -> str:
        return self.name if self.schema == "public" else f"{self.schema}.{self.name}"

    def describe(self) -> dict:
        return {"object": self.qualified, "kind": self.kind, "tablespace": self.tablespace, "device": self.device,
                "path": self.path, "bytes": self.bytes, "total_bytes": self.total_bytes,
                **({"table": self.table} if self.table else {})}


class LabHandle:
    """The lab as a workload sees it (see the module's docstring)."""

    def __init__(self, lab):
        self._lab = lab

    @property
    def database(self) -> str:
        from dbtier.engines.postgres.cluster import DATABASE
        return DATABASE

    def connect(self, dbname: str | None = None, **kw) -> psycopg.Connection:
        """An autocommit connection as the superuser, to the lab's database unless another is named."""
        return self._lab.cluster.connect(dbname or self.database, **kw)

    def execute(self, statement, params=None, dbname: str | None = None) -> list[tuple]:
        """One statement on a connection of its own; its rows (none for a statement without)."""
        with self.connect(dbname) as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description else []

    def create_database(self, name: str) -> None:
        """Another database, on the data device, with temp files where `temp` goes."""
        self._lab.create_database(name)

    def tablespace(self, name: str, kind: str) -> sql.Composable:
        """The TABLESPACE clause for an object about to be created, from the placement."""
        return sql.SQL("TABLESPACE {}").format(sql.Identifier(self._lab.placement.tablespace_for(name, kind)))

    def scratch_dir(self, sub: str | None = None) -> Path:
        """A folder outside every device that the server and the clients may read and write (a load's
        input files, a client's logs); `sub`: a folder of its own in it."""
        return self._lab.scratch_dir(sub)

    def client_dir(self, sub: str | None = None) -> Path:
        """A folder for client programs run as dbtier's own user (as_me): only that user may enter it,
        so what they write there (pgbench's logs) cannot be redirected by the server's."""
        return self._lab.client_dir(sub)

    def handover_dir(self, sub: str) -> Path:
        """A folder of dbtier's own whose files the servers' user may read but not change."""
        return self._lab.handover_dir(sub)

    def handover_file(self, path: Path) -> int:
        """A new file in a handover_dir, open for writing: its fd."""
        return self._lab.handover_file(path)

    def dump_dir(self) -> Path:
        """A folder for dumps on the device `dump` is placed on (made once, the servers' user's)."""
        return self._lab.dump_dir()

    def note_transactions(self, script: str, clients, ends_epoch_us, latency_ms, on_backend: bool = False) -> None:
        """A client's completed transactions (pgbench's log): kept beside a trace for predictions;
        on_backend: each client is the server process it ran on (a replay's statements)."""
        self._lab.note_transactions(script, clients, ends_epoch_us, latency_ms, on_backend)

    def client(self, program: str, *args: str, as_me: bool = False) -> Client:
        """A PostgreSQL client program of the lab's install, connecting to the lab's server: run as the
        servers' user in the scratch folder, or (as_me) as dbtier's own, to read a file the user named,
        in a folder of that user alone; its own I/O on the devices emulated as the server's is."""
        if program not in CLIENTS:
            raise ValueError(f"{program} is not one of the client programs the lab runs ({', '.join(CLIENTS)})")
        cluster = self._lab.cluster
        from dbtier.engines.postgres.cluster import PORT, SUPERUSER
        argv = [str(cluster.install.exe(program)), "-h", str(cluster.socket_dir), "-p", str(PORT), "-U", SUPERUSER,
                *args]
        if as_me:
            return Client(argv, dict(cluster.env), self.client_dir(), {})
        return Client(argv, dict(cluster.env), self.scratch_dir(), cluster.user.popen_kwargs())

    def connection_env(self) -> dict[str, str]:
        """The lab's connection as libpq's environment says it: its private socket folder, port, user
        and database."""
        from dbtier.engines.postgres.cluster import PORT, SUPERUSER
        return {"PGHOST": str(self._lab.cluster.socket_dir), "PGPORT": str(PORT), "PGUSER": SUPERUSER,
                "PGDATABASE": self.database}

    def objects(self, dbname: str | None = None) -> list[DbObject]:
        """Every table, index and materialized view outside the system schemas (TOAST excluded: it goes
        with its table), with its size, tablespace and device."""
        devices = self._lab.tablespace_devices()
        with self.connect(dbname) as conn:
            rows = conn.execute(
                "SELECT n.nspname, c.relname, c.relkind, pg_relation_size(c.oid), pg_table_size(c.oid), "
                "       coalesce(t.spcname, dt.spcname), coalesce(pg_relation_filepath(c.oid), ''), "
                "       (SELECT tc.relname FROM pg_index x JOIN pg_class tc ON tc.oid = x.indrelid "
                "        WHERE x.indexrelid = c.oid) "
                "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "LEFT JOIN pg_tablespace t ON t.oid = c.reltablespace "
                "CROSS JOIN (SELECT spcname FROM pg_database d JOIN pg_tablespace s ON s.oid = d.dattablespace "
                "            WHERE d.datname = current_database()) dt "
                "WHERE c.relkind IN ('r', 'p', 'i', 'I', 'm') "
                "  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%' "
                "  AND n.nspname NOT LIKE 'pg_temp%%' "
                "ORDER BY n.nspname, c.relname").fetchall()
        return [DbObject(schema, name, RELKINDS[kind], size, space, devices.get(space), path, table, total)
                for schema, name, kind, size, total, space, path, table in rows]
