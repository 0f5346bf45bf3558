"""A user's own database into the lab: a pg_dump file (custom, directory, tar or plain SQL) restored
as the setup step, and setup SQL files run by psql. Both run with the emulation paused, as every
workload's load does.

The lab has no roles but its own superuser, so ownership and privileges in a dump are left out (with
a note), never a failure: pg_restore's --no-owner --no-privileges, and for a plain dump its ALTER ...
OWNER TO, GRANT, REVOKE and SET SESSION AUTHORIZATION lines, blanked in a copy that keeps the line
numbers an error will name."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

from dbtier.errors import UserError
from dbtier.workloads.base import Workload

CUSTOM_MAGIC = b"PGDMP"
_OWNERSHIP = re.compile(r"^(ALTER (?!DEFAULT PRIVILEGES).* OWNER TO .*|ALTER DEFAULT PRIVILEGES .*|GRANT .*|REVOKE .*|"
                        r"SET SESSION AUTHORIZATION .*|RESET SESSION AUTHORIZATION)\s*;\s*$")
_PSQL_ERROR = re.compile(r"^psql:(?P<file>.+?):(?P<line>\d+): (?:ERROR|FATAL):\s+(?P<msg>.*)$")


def dump_format(path: Path) -> str:
    """custom, directory, tar or plain, from what is at path; a UserError if it is none of them."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"--restore {path}: no such file or folder")
    if path.is_dir():
        if not (path / "toc.dat").is_file():
            raise UserError(f"--restore {path}: a folder without toc.dat is not a directory-format dump (pg_dump -Fd)")
        return "directory"
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
    return "plain"


def psql_error(stderr: str, what: str) -> str:
    """One line from psql's complaint: FILE:LINE: the server's message."""
    for line in stderr.splitlines():
        m = _PSQL_ERROR.match(line.strip())
        if m:
            return f"{m.group('file')}:{m.group('line')}: {m.group('msg')}"
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return f"{what}: {lines[-1] if lines else 'psql failed'}"


def run_setup_file(db, path: Path, shown: str | None = None) -> None:
    """A setup file, by psql (so psql's own commands work there too), stopping at the first error."""
    proc = db.client("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(path), db.database, as_me=True).run()
    if proc.returncode != 0:
        message = psql_error(proc.stderr, f"--setup {shown or path}")
        if shown:
            message = message.replace(str(path), shown)
        raise UserError(message)


def _without_ownership(src: Path, dest: Path) -> tuple[int, set[str]]:
    """A copy of a plain dump with its ownership and privilege lines blanked (line numbers kept, data in
    COPY blocks left as it is). Returns the lines blanked and the roles they named."""
    blanked, roles, in_copy = 0, set(), False
    with open(src, encoding="utf-8", errors="strict") as inp, open(dest, "w", encoding="utf-8") as out:
        for line in inp:
            if in_copy:
                in_copy = line.rstrip("\n") != "\\."
            elif line.startswith("COPY ") and line.rstrip().endswith("FROM stdin;"):
                in_copy = True
            elif _OWNERSHIP.match(line):
                blanked += 1
                roles.update(re.findall(r"(?:OWNER TO|TO|FROM|AUTHORIZATION) \"?([A-Za-z_][\w$]*)\"?", line))
                line = "\n"
            out.write(line)
    return blanked, roles - {"PUBLIC", "public"}


def restore(db, path: Path, jobs: int, progress) -> dict:
    """Restores the dump into the lab's database; returns what was done and any notes."""
    fmt = dump_format(path)
    progress.phase(f"restoring {path.name} ({fmt} format)")
    notes = []
    if fmt == "plain":
        copy = db.scratch_dir("restore") / "dump.sql"
        try:
            blanked, roles = _without_ownership(path, copy)
        except UnicodeDecodeError as exc:
            raise UserError(f"--restore {path}: not UTF-8 text (byte {exc.start}); a plain dump is SQL text") from None
        if blanked:
            notes.append(f"the dump's {blanked} ownership and privilege statements were left out (roles "
                         f"{', '.join(sorted(roles)) or 'none named'}): the lab has no roles but its own")
        if jobs > 1:
            notes.append("a plain dump restores in one job (-j applies to custom and directory dumps)")
        run_setup_file(db, copy, str(path))
        copy.unlink()
    else:
        workers = jobs if fmt in ("custom", "directory") else 1
        if workers < jobs:
            notes.append("a tar dump restores in one job (-j applies to custom and directory dumps)")
        proc = db.client("pg_restore", "--no-owner", "--no-privileges", "--exit-on-error", "-j", str(workers),
                         "-d", db.database, str(path), as_me=True).run()
        if proc.returncode != 0:
            lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
            raise UserError(f"--restore {path}: pg_restore failed: {lines[-1] if lines else proc.returncode}")
        notes.append("ownership and privileges in the dump were left out (pg_restore --no-owner --no-privileges): "
                     "the lab has no roles but its own")
    with db.connect() as conn:
        conn.execute("ANALYZE")
    return {"format": fmt, "jobs": jobs, "notes": notes}


def dump_bytes(path: Path | None) -> int:
    """The size of a dump file or folder (0 without one)."""
    if path is None:
        return 0
    path = Path(path)
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size


def load_user_setup(db, dump: Path | None, jobs: int, setup_files, progress) -> dict | None:
    """A user workload's setup: the dump restored, then each setup file by psql. Returns what the
    restore did (None without a dump)."""
    restored = restore(db, Path(dump), jobs, progress) if dump is not None else None
    for path in setup_files:
        progress.phase(f"setup: {Path(path).name}")
        run_setup_file(db, Path(path).resolve())
    return restored


class UserWorkload(Workload):
    """A workload on the user's own objects (run sql, run pgbench): what its setup restored is reported
    with the run's checks, and its notes (what was left out) said to the user."""
    user_objects = True
    restored: dict | None = None

    def verify(self, db) -> dict:
        return {"restored": self.restored} if self.restored else {}

    def notes(self) -> list[str]:
        return list(self.restored["notes"]) if self.restored else []
