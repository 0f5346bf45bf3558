"""What a workload holds of a MariaDB lab (the PostgreSQL lab's LabHandle, engines/postgres/handle.py,
for InnoDB): connections to the lab's database, its tables with their files and devices, the lab's
connection for a client program, and the folders a client may use.

    db.execute("SELECT count(*) FROM t"); db.objects(); db.connection_env()["MYSQL_UNIX_PORT"]"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from dbtier.errors import UserError

#: the databases of the server's own (never a workload's objects)
SYSTEM_DATABASES = ("mysql", "information_schema", "performance_schema", "sys")


@dataclass(frozen=True)
class Table:
    """One InnoDB table: where its file is, on which device, and its size (data and indexes)."""
    database: str
    name: str
    bytes: int
    path: str          # its .ibd file
    device: str | None
    qualified: str     # as --place names it: name in the lab's database, database.name elsewhere
    kind: str = "table"

    def describe(self) -> dict:
        """As a PostgreSQL object describes itself; its tablespace is InnoDB's, one file per table."""
        return {"object": self.qualified, "kind": self.kind, "tablespace": f"{self.database}/{self.name}",
                "device": self.device, "path": self.path, "bytes": self.bytes, "total_bytes": self.bytes}


class MariaHandle:
    """The lab's database as a workload uses it."""

    def __init__(self, lab):
        self._lab = lab

    @property
    def database(self) -> str:
        return self._lab.database

    def connect(self, dbname: str | None = None, local_infile: bool = False):
        return self._lab.connect(dbname or self.database, local_infile=local_infile)

    def execute(self, statement: str, params=None, dbname: str | None = None) -> list[tuple]:
        with self.connect(dbname) as conn, conn.cursor() as cur:
            cur.execute(statement, params)
            return list(cur.fetchall())

    def create_table(self, name: str, definition: str, options: str = "") -> None:
        """CREATE TABLE on the device the placement gives it (InnoDB sets a table's file apart only as it
        creates it)."""
        self._lab.create_table(name, definition, options)

    def client_dir(self, sub: str | None = None) -> Path:
        """A folder for client programs run as dbtier's own user, which only that user may enter."""
        return self._lab.client_dir(sub)

    def note_transactions(self, script: str, clients, ends_epoch_us, latency_ms, on_backend: bool = False) -> None:
        """A client's completed transactions (the TPC-C terminals'), kept beside the trace."""
        self._lab.note_transactions(script, clients, ends_epoch_us, latency_ms, on_backend)

    def connection_env(self) -> dict[str, str]:
        """The lab's connection: its private socket (MYSQL_UNIX_PORT, which MariaDB's and MySQL's client
        libraries read), the account of dbtier's own OS user (unix_socket authentication, no password)
        and the lab's database."""
        return {"MYSQL_UNIX_PORT": str(self._lab.server.socket), "MYSQL_USER": pwd.getpwuid(os.geteuid()).pw_name,
                "MYSQL_DATABASE": self.database}

    def objects(self, dbname: str | None = None) -> list[Table]:
        """Every InnoDB table outside the server's own databases, with its file and device."""
        rows = self.execute(
            "SELECT t.TABLE_SCHEMA, t.TABLE_NAME, coalesce(t.DATA_LENGTH, 0) + coalesce(t.INDEX_LENGTH, 0), "
            "       coalesce(s.FILENAME, '') "
            "FROM information_schema.TABLES t LEFT JOIN information_schema.INNODB_SYS_TABLESPACES s "
            "  ON s.NAME = concat(t.TABLE_SCHEMA, '/', t.TABLE_NAME) "
            "WHERE t.ENGINE = 'InnoDB' AND t.TABLE_SCHEMA NOT IN %s ORDER BY t.TABLE_SCHEMA, t.TABLE_NAME",
            (SYSTEM_DATABASES,), dbname)
        out = []
        for db, name, size, path in rows:
            full = self._lab.file_path(path) if path else ""
            out.append(Table(db, name, int(size), full, self._lab.device_of_path(full) if full else None,
                             name if db == self.database else f"{db}.{name}"))
        return out

    def dump_dir(self) -> Path:
        """A folder for dumps on the device the engine's dumps go to (the data's: MariaDB has no dump
        role), the server's user's: `mariadb-dump --tab` has the server write the rows there."""
        return self._lab.dump_dir()

    def sync_files(self, paths: list[Path]) -> None:
        """Files the server wrote and did not sync, written to their device and waited for."""
        self._lab.sync_files(paths)

    def physical_backup(self, step: str, target: Path) -> str:
        """mariadb-backup --backup into target, or --prepare of it (Lab.physical_backup)."""
        return self._lab.physical_backup(step, target)

    #: the client programs of the lab's install that client() runs
    CLIENTS = ("mariadb", "mariadb-dump", "mariadb-import")

    def client(self, program: str, *args: str) -> subprocess.Popen:
        """A MariaDB client program of the lab's install, started as dbtier's own user against the
        lab's server, its output piped. The client's own I/O is not emulated: the programs run here
        (mariadb-dump --tab, mariadb-import) have the server write and read the rows."""
        if program not in self.CLIENTS:
            raise ValueError(f"{program} is not one of the client programs the lab runs ({', '.join(self.CLIENTS)})")
        argv = [str(self._lab.server.install.exe(program)), "--no-defaults", f"--socket={self._lab.server.socket}",
                f"--user={pwd.getpwuid(os.geteuid()).pw_name}", *args]
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=self.client_dir(),
                                env=self._lab.server.install.env({"PATH": os.environ.get("PATH", "/usr/bin")}))

    def run_sql_file(self, path: Path, what: str) -> None:
        """A SQL file (a mariadb-dump file is one) run by the lab's mariadb client as dbtier's own user,
        into the lab's database; its first error ends it, in one line with the file's line."""
        argv = [str(self._lab.server.install.exe("mariadb")), "--no-defaults", f"--socket={self._lab.server.socket}",
                f"--user={pwd.getpwuid(os.geteuid()).pw_name}", f"--database={self.database}", "--batch"]
        try:
            with open(path, "rb") as f:
                run = subprocess.run(argv, stdin=f, capture_output=True, cwd=self.client_dir(),
                                     env=self._lab.server.install.env({"PATH": os.environ.get("PATH", "/usr/bin")}))
        except OSError as exc:
            raise UserError(f"{what} {path}: {exc.strerror}") from None
        if run.returncode != 0:
            said = [ln.strip() for ln in run.stderr.decode("utf-8", "replace").splitlines()
                    if ln.strip() and not ln.startswith("---")] or ["no message"]
            error = next((m for m in map(re.compile(r"ERROR \d+ \(\w+\) at line (\d+): (.*)").match, said) if m), None)
            raise UserError(f"{what} {path}" + (f", line {error.group(1)}: {error.group(2)}" if error
                                                 else f": {said[-1]}")[:300])

    def analyze(self) -> None:
        """Statistics for every table, as a loaded database is left (ANALYZE TABLE)."""
        with self.connect() as conn, conn.cursor() as cur:
            for t in self.objects():
                cur.execute(f"ANALYZE TABLE `{t.database}`.`{t.name}`")
                cur.fetchall()
