"""A user's own database into the lab: a pg_dump file (custom, directory, tar or plain SQL) restored
as the setup step, and setup SQL files run by psql. Both run with the emulation paused, as every
workload's load does.

The lab has no roles but its own superuser, so ownership and privileges in a dump are left out (with
a note), never a failure: pg_restore's --no-owner --no-privileges, and for a plain dump its ALTER ...
OWNER TO, GRANT, REVOKE and SET SESSION AUTHORIZATION lines, blanked in a copy that keeps the line
numbers an error will name."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import stat
import tarfile
from pathlib import Path

from dbtier.errors import UserError
from dbtier.workloads import sqlfile
from dbtier.workloads.base import Workload

CUSTOM_MAGIC = b"PGDMP"
#: the last words pg_dump writes in a plain dump: one without them was cut short
DUMP_COMPLETE = "-- PostgreSQL database dump complete"
_OWNERSHIP = re.compile(r"^(ALTER (?!DEFAULT PRIVILEGES).* OWNER TO .*|ALTER DEFAULT PRIVILEGES .*|GRANT .*|REVOKE .*|"
                        r"SET SESSION AUTHORIZATION .*|RESET SESSION AUTHORIZATION)\s*;\s*$")
_PSQL_ERROR = re.compile(r"^psql:(?P<file>.+?):(?P<line>\d+): (?:ERROR|FATAL|error):\s+(?P<msg>.*)$")
#: pg_dump 18 brackets a plain dump with these, so that psql runs none of the dump's own commands
_DUMP_RESTRICT = re.compile(r"^\\(un)?restrict\s+[A-Za-z0-9]+\s*$")


def dump_format(path: Path) -> str:
    """custom, directory, tar or plain, from what is at path; a UserError if it is none of them, or a
    plain dump that was cut short."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"--restore {path}: no such file or folder") from None
    except OSError as exc:
        raise UserError(f"--restore {path}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        _check_directory_dump(path)
        return "directory"
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"--restore {path}: neither a file nor a folder (a pipe or a device); give the dump's file "
                        "or folder")
    try:
        with open(path, "rb") as f:
            head = f.read(8192)
    except OSError as exc:
        raise UserError(f"--restore {path}: {exc.strerror}") from None
    if head.startswith(CUSTOM_MAGIC):
        return "custom"
    if len(head) >= 262 and head[257:262] == b"ustar" and tarfile.is_tarfile(path):
        return "tar"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"--restore {path}: neither a pg_dump archive (custom, directory, tar) nor SQL text") from None
    if "\x00" in text or not text.strip():
        raise UserError(f"--restore {path}: neither a pg_dump archive (custom, directory, tar) nor SQL text")
    if text.lstrip().startswith(("-- MariaDB dump", "-- MySQL dump")):
        raise UserError(f"--restore {path}: a mariadb-dump (mysqldump) file, which MariaDB restores: add --engine "
                        "mariadb")
    _check_complete(path, st.st_size)
    return "plain"


def _check_directory_dump(path: Path) -> None:
    """pg_dump -Fd writes a flat folder of regular files, toc.dat among them. A link in one would have
    pg_restore, which runs as you, load whatever file it points at into the lab's database."""
    try:
        entries = list(os.scandir(path))
    except OSError as exc:
        raise UserError(f"--restore {path}: {exc.strerror}") from None
    for entry in entries:
        if entry.is_symlink() or not entry.is_file(follow_symlinks=False):
            raise UserError(f"--restore {path}: {entry.name} is {'a link' if entry.is_symlink() else 'not a file'}; "
                            "a directory-format dump (pg_dump -Fd) holds files only")
    if not any(e.name == "toc.dat" for e in entries):
        raise UserError(f"--restore {path}: a folder without toc.dat is not a directory-format dump (pg_dump -Fd)")


def _check_complete(path: Path, size: int) -> None:
    """pg_dump ends a plain dump with DUMP_COMPLETE: without it the file was cut short, and would
    restore part of the database (half a table, no indexes) without a word."""
    with open(path, "rb") as f:
        f.seek(max(0, size - 65536))
        tail = f.read().decode("utf-8", "replace")
    if DUMP_COMPLETE not in tail:
        raise UserError(f"--restore {path}: the dump is incomplete (pg_dump ends a plain dump with "
                        f"'{DUMP_COMPLETE}'); it was cut short: dump the database again")


def psql_error(stderr: str, what: str, line_offset: int = 0) -> str:
    """One line from psql's complaint: FILE:LINE: the server's message (LINE less line_offset: lines
    dbtier put before the user's)."""
    for line in stderr.splitlines():
        m = _PSQL_ERROR.match(line.strip())
        if m:
            return f"{m.group('file')}:{int(m.group('line')) - line_offset}: {m.group('msg')}"
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return f"{what}: {lines[-1] if lines else 'psql failed'}"


_CREATE_ROLE = re.compile(r"^\s*CREATE\s+(?:ROLE|USER|GROUP)\s+\"?([A-Za-z_][\w$]*)\"?", re.I | re.M)
_ROLE_NAMED = re.compile(r"(?:OWNER TO|TO|FROM|AUTHORIZATION) \"?([A-Za-z_][\w$]*)\"?")


def _lacking_roles_copy(path: Path, have: set[str], folder: Path) -> tuple[Path | None, int, set[str]]:
    """A setup file whose ownership and privilege lines name roles the lab lacks (a schema dumped from
    production: `ALTER TABLE ... OWNER TO postgres`): a copy in `folder` with those lines blanked (line
    numbers kept), as a dump's are on restore; None when it names none. Roles the file creates itself
    count as the lab's. Returns (the copy, lines blanked, the roles they named)."""
    text = sqlfile.read_text(path, "--setup")
    have = have | {r.lower() for r in _CREATE_ROLE.findall(text)} | {"public", "current_user", "session_user",
                                                                      "current_role"}
    lines, blanked, roles, in_copy = text.splitlines(keepends=True), 0, set(), False
    for number, line in enumerate(lines):
        if in_copy:
            in_copy = line.rstrip("\n") != "\\."
        elif line.startswith("COPY ") and line.rstrip().endswith("FROM stdin;"):
            in_copy = True
        elif _OWNERSHIP.match(line):
            named = {r for r in _ROLE_NAMED.findall(line) if r.lower() not in have}
            if named:
                roles |= named
                blanked += 1
                lines[number] = "\n"
    if not blanked:
        return None, 0, set()
    copy = folder / f"{secrets.token_hex(4)}-{path.name}"
    with open(copy, "x", encoding="utf-8") as out:
        out.writelines(lines)
    return copy, blanked, roles


def run_setup_file(db, path: Path, shown: str | None = None) -> list[str]:
    """A setup file of the user's own, by psql as the user (so psql's own commands work there too, with
    the user's rights), stopping at the first error. Ownership and privilege lines that name roles the
    lab lacks are left out (see _lacking_roles_copy); returns the note that says so."""
    have = {r[0].lower() for r in db.execute("SELECT rolname FROM pg_roles")}
    copy, blanked, roles = _lacking_roles_copy(path, have, db.client_dir("setup"))
    notes = ([f"{shown or path.name}: {blanked} ownership and privilege statement(s) naming roles the lab lacks "
              f"({', '.join(sorted(roles))}) were left out: the lab has no roles but its own"] if blanked else [])
    try:
        proc = db.client("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(copy or path), db.database,
                         as_me=True).run()
    finally:
        if copy is not None:
            copy.unlink()
    if proc.returncode != 0:
        message = psql_error(proc.stderr, f"--setup {shown or path}")
        if copy is not None:
            message = message.replace(str(copy), shown or str(path))
        if shown:
            message = message.replace(str(path), shown)
        raise UserError(message)
    return notes


def _restricted_copy(src: Path, dest_fd: int, key: str) -> tuple[int, set[str], str]:
    """A plain dump as psql will run it: `\\restrict KEY` first (psql then refuses every psql command
    in the file: the dump's SQL reaches the server, nothing of it runs on this machine), its own
    restrict lines and ownership and privilege lines blanked, line numbers otherwise kept, COPY data
    as it is. A psql command of the dump's own is refused here, with its line. Returns the lines
    blanked, the roles they named, and the dump's sha256."""
    blanked, roles, in_copy = 0, set(), False
    digest = hashlib.sha256()
    with open(src, "rb") as raw, os.fdopen(dest_fd, "w", encoding="utf-8") as out:
        out.write(f"\\restrict {key}\n")
        for number, data in enumerate(raw, 1):
            digest.update(data)
            line = data.decode("utf-8")
            if in_copy:
                in_copy = line.rstrip("\n") != "\\."
            elif line.startswith("COPY ") and line.rstrip().endswith("FROM stdin;"):
                in_copy = True
            elif _DUMP_RESTRICT.match(line.strip()):
                line = "\n"
            elif line.lstrip().startswith("\\"):
                cmd = line.split(None, 1)[0]
                if cmd in ("\\connect", "\\c"):
                    raise UserError(f"--restore {src}:{number}: {cmd} switches to another database (a dump made "
                                    "with pg_dump -C, or by pg_dumpall); dump one database, without -C")
                raise UserError(f"--restore {src}:{number}: {cmd} is a psql command; dbtier runs none from a dump "
                                "(pg_dump writes none but its own \\restrict lines)")
            elif _OWNERSHIP.match(line):
                blanked += 1
                roles.update(re.findall(r"(?:OWNER TO|TO|FROM|AUTHORIZATION) \"?([A-Za-z_][\w$]*)\"?", line))
                line = "\n"
            out.write(line)
    return blanked, roles - {"PUBLIC", "public"}, digest.hexdigest()


def _restore_plain(db, path: Path) -> tuple[list[str], str]:
    """A plain dump, run by psql as the servers' user on a copy dbtier made and the servers' user may
    only read, with every psql command refused (see _restricted_copy)."""
    notes = []
    folder = db.handover_dir("restore")
    copy = folder / "dump.sql"
    fd = db.handover_file(copy)
    try:
        try:
            blanked, roles, digest = _restricted_copy(path, fd, secrets.token_hex(16))
        except UnicodeDecodeError as exc:
            raise UserError(f"--restore {path}: not UTF-8 text (byte {exc.start} of a line); a plain dump is SQL "
                            "text") from None
        if blanked:
            notes.append(f"the dump's {blanked} ownership and privilege statements were left out (roles "
                         f"{', '.join(sorted(roles)) or 'none named'}): the lab has no roles but its own")
        proc = db.client("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(copy), db.database).run()
        if proc.returncode != 0:
            raise UserError(psql_error(proc.stderr, f"--restore {path}", line_offset=1).replace(str(copy), str(path)))
    finally:
        copy.unlink()
    return notes, digest


def restore(db, path: Path, jobs: int, progress) -> dict:
    """Restores the dump into the lab's database; returns what was done, any notes, and the dump's
    fingerprint."""
    fmt = dump_format(path)
    progress.phase(f"restoring {path.name} ({fmt} format)")
    if fmt == "plain":
        notes, digest = _restore_plain(db, path)
        if jobs > 1:
            notes.append("a plain dump restores in one job (-j applies to custom and directory dumps)")
    else:
        notes = []
        digest = fingerprint(path)
        workers = jobs if fmt in ("custom", "directory") else 1
        if workers < jobs:
            notes.append("a tar dump restores in one job (-j applies to custom and directory dumps)")
        # pg_restore runs no commands of the archive's on this machine: it reads the archive as you
        # and sends its SQL to the server
        proc = db.client("pg_restore", "--no-owner", "--no-privileges", "--exit-on-error", "-j", str(workers),
                         "-d", db.database, str(path), as_me=True).run()
        if proc.returncode != 0:
            lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
            raise UserError(f"--restore {path}: pg_restore failed: {lines[-1] if lines else proc.returncode}")
        notes.append("ownership and privileges in the dump were left out (pg_restore --no-owner --no-privileges): "
                     "the lab has no roles but its own")
    return {"format": fmt, "jobs": jobs, "notes": notes, "sha256": digest}


def fingerprint(path: Path) -> str:
    """sha256 of a file, or of a folder's files (their names and contents, in name order)."""
    path = Path(path)
    if not path.is_dir():
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    whole = hashlib.sha256()
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        whole.update(f"{entry.name}\0{fingerprint(Path(entry.path)) if entry.is_file() else 'not a file'}\0".encode())
    return whole.hexdigest()


def dump_bytes(path: Path | None) -> int:
    """The size of a dump file or folder (0 without one)."""
    if path is None:
        return 0
    path = Path(path)
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size


def load_user_setup(workload: "UserWorkload", db, dump: Path | None, jobs: int, setup_files, progress) -> dict | None:
    """A user workload's setup: the dump restored, then each setup file by psql, then VACUUM ANALYZE.
    Returns what the restore did (None without a dump).

    The vacuum leaves the tables as a production server's long-lived ones are: hint bits set, the
    visibility map and free space map written, statistics taken. Without it the first statements to
    read each page would set its hint bits and write it back: writes production never made."""
    workload.fingerprint_files(skip="restore")  # the dump's is taken as it is read
    restored = restore(db, Path(dump), jobs, progress) if dump is not None else None
    notes = []
    for path in setup_files:
        progress.phase(f"setup: {Path(path).name}")
        notes += run_setup_file(db, Path(path).resolve())
    progress.phase("VACUUM ANALYZE")
    with db.connect() as conn:
        conn.execute("VACUUM ANALYZE")
    workload.setup_notes = notes
    return restored


def check_mariadb_dump(path: Path, jobs: int, jobs_option: str) -> None:
    """--restore on MariaDB: a mariadb-dump (mysqldump) file, SQL that the mariadb client runs, found
    and checked before the lab is made; pg_dump's formats are PostgreSQL's."""
    path = Path(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UserError(f"--restore {path}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"--restore {path}: a folder (pg_dump's directory format, PostgreSQL's); on MariaDB "
                        "--restore takes a mariadb-dump file")
    try:
        with open(path, "rb") as f:  # its head only: a dump may be gigabytes
            head = f.read(8192)
    except OSError as exc:
        raise UserError(f"--restore {path}: {exc.strerror}") from None
    if head.startswith(CUSTOM_MAGIC) or (len(head) >= 262 and head[257:262] == b"ustar"):
        raise UserError(f"--restore {path}: a pg_dump archive, PostgreSQL's; on MariaDB --restore takes a "
                        "mariadb-dump file")
    if head.decode("utf-8", "replace").lstrip().startswith("-- PostgreSQL database dump"):
        raise UserError(f"--restore {path}: pg_dump's SQL, PostgreSQL's; on MariaDB --restore takes a mariadb-dump "
                        "file")
    if jobs != 1:
        raise UserError(f"{jobs_option} {jobs}: a mariadb-dump file is one script, run by one mariadb client")


def load_mariadb_setup(workload: "UserWorkload", db, dump: Path | None, setup_files, progress) -> dict | None:
    """A user workload's setup on MariaDB: the mariadb-dump file restored, then each setup file, each by
    the mariadb client, then ANALYZE TABLE of every table, as a loaded database is left. Returns what
    the restore did (None without a dump)."""
    workload.fingerprint_files(skip="restore")  # the dump's is taken with what the restore did
    restored = None
    if dump is not None:
        dump = Path(dump).resolve()
        progress.phase(f"restoring {dump.name} (mariadb-dump)")
        db.run_sql_file(dump, "--restore")
        restored = {"format": "mariadb-dump", "jobs": 1, "notes": [], "sha256": fingerprint(dump)}
    for path in setup_files:
        progress.phase(f"setup: {Path(path).name}")
        db.run_sql_file(Path(path).resolve(), "--setup")
    db.analyze()
    return restored


_UNREAD = object()


class UserWorkload(Workload):
    """A workload on the user's own objects (run sql, run pgbench): what its setup restored is reported
    with the run's checks, and its notes (what was left out) said to the user. Every file of the
    user's it runs is fingerprinted (sha256) when it runs, so a recorded run's files can be checked
    before they are run again (advise --verify)."""
    user_objects = True
    restored: dict | None = None
    setup_notes: list[str] = []
    _fingerprints: list[dict] | None = None
    _identity: dict | None | object = _UNREAD  # load_identity's, once taken

    def user_files(self) -> list[tuple[str, Path]]:
        """(option, path) of every file of the user's the workload runs, in order."""
        out = []
        for p in self.params:
            value = self.p[p.key] if p.type is Path else None
            for v in (value if isinstance(value, tuple) else () if value is None else (value,)):
                out.append((p.name, Path(v)))
        return out

    def fingerprint_files(self, skip: str | None = None) -> None:
        """The files' fingerprints, taken as they are run (skip: an option fingerprinted as it is read)."""
        self._fingerprints = [{"option": option, "path": str(path), "sha256": fingerprint(path)}
                              for option, path in self.user_files() if option != skip]

    def load_identity(self) -> dict | None:
        """The dump's and setup files' sha256 (None without either: nothing worth keeping). Taken once
        per workload: a command asks before it checks for room and again as it loads, and a dump may be
        gigabytes."""
        if self._identity is _UNREAD:
            dump, setup = self.p.get("restore"), self.p.get("setup") or ()
            self._identity = None if dump is None and not setup else {
                "restore": fingerprint(dump) if dump is not None else None,
                "setup": [fingerprint(path) for path in setup], "vacuum": True}
        return self._identity

    def load_record(self) -> dict:
        """What the load did that a run reusing its cluster reports as its own (its restore and notes)."""
        return {"restored": self.restored, "setup_notes": list(self.setup_notes)}

    def reuse(self, record: dict) -> None:
        """A kept cluster of the same load stands for this one's: what its load did, as if done here; the
        files this run runs (its --run files, scripts) fingerprinted now, as a load would have."""
        self.restored, self.setup_notes = record.get("restored"), list(record.get("setup_notes") or [])
        self.fingerprint_files(skip="restore")

    def files(self) -> list[dict]:
        out = list(self._fingerprints or [])
        if self.restored:
            out.insert(0, {"option": "restore", "path": str(self.p["restore"]), "sha256": self.restored["sha256"]})
        return out

    def verify(self, db) -> dict:
        return {"restored": self.restored} if self.restored else {}

    def notes(self) -> list[str]:
        return (list(self.restored["notes"]) if self.restored else []) + list(self.setup_notes)
