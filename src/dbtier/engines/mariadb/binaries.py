"""Which MariaDB: the distribution's server packages, downloaded without installing them (`apt-get
download`, which any user may run) and unpacked into dbtier's cache; or an install the user names with
--mariadb-bin.

The series is pinned (10.11, Debian 12's); the exact version is the one the distribution serves, since
its security archive keeps only the latest, and every run records it. The packages: the server and the
clients (`mariadb-server-core`, `mariadb-client-core`, `mariadb-client`), `mariadb-backup`, and the one library the server
needs that a Debian 12 system lacks (`liburing2`: the server links it even when it does no io_uring).
apt checks each package against the archive's signed index as it downloads it; the cache is made
whole in a folder of its own and renamed into place, so an interrupted fetch leaves nothing half made.

    install = binaries.find()          # fetched on first use
    install.exe("mariadbd"), install.env(os.environ), install.version"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from dbtier.errors import UserError

SERIES = "10.11"
PACKAGES = ("mariadb-server-core", "mariadb-client-core", "mariadb-client", "mariadb-backup", "liburing2")
#: what a run needs of an install, under its base folder (--basedir: bin, sbin, share/mysql)
NEEDED = ("sbin/mariadbd", "bin/mariadb-install-db", "bin/mariadb", "bin/mariadb-admin", "bin/mariadb-dump")
LIB_DIR = "lib/x86_64-linux-gnu"  # under the base folder: the unpacked liburing
MANIFEST = "dbtier-manifest.json"  # written last: a cache folder without it is not whole
CACHE_ENV = "DBTIER_CACHE"


@dataclass(frozen=True)
class MariaInstall:
    basedir: Path          # the folder holding bin, sbin and share/mysql (a system install's /usr)
    version: str           # "10.11.19"
    packages: tuple = field(default=())  # (package, version, sha256) unpacked into the cache

    def exe(self, name: str) -> Path:
        sbin = self.basedir / "sbin" / name
        return sbin if sbin.exists() else self.basedir / "bin" / name

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """base with the install's own libraries first on the loader's path."""
        env = dict(base)
        libs = self.basedir / LIB_DIR
        if (libs / "liburing.so.2").exists():
            env["LD_LIBRARY_PATH"] = ":".join(filter(None, [str(libs), base.get("LD_LIBRARY_PATH")]))
        return env

    def layout(self) -> tuple[Path, list[str]]:
        """What must travel together if the install is copied (osuser.reachable_copy): the base folder."""
        return self.basedir.parent, [self.basedir.name]

    def moved(self, anchor: Path) -> "MariaInstall":
        return MariaInstall(anchor / self.basedir.name, self.version, self.packages)

    def describe(self) -> dict:
        return {"engine": "mariadb", "version": self.version, "basedir": str(self.basedir),
                "packages": [{"package": p, "version": v, "sha256": h} for p, v, h in self.packages]}


def cache_root() -> Path:
    """dbtier's download cache: $DBTIER_CACHE, else $XDG_CACHE_HOME/dbtier, else ~/.cache/dbtier."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dbtier"


def server_version(install_env: dict[str, str], mariadbd: Path) -> str:
    try:
        out = subprocess.run([str(mariadbd), "--version"], capture_output=True, text=True, timeout=30,
                             env=install_env)
    except OSError as exc:
        raise UserError(f"cannot run {mariadbd}: {exc.strerror}") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"{mariadbd} --version did not answer in 30 s; is it MariaDB's server?") from None
    m = re.search(r"Ver (\d+\.\d+\.\d+)-MariaDB", out.stdout)
    if not m:
        said = (out.stdout or out.stderr).strip().splitlines()
        raise UserError(f"{mariadbd} --version printed {said[-1] if said else 'nothing'!r}, not a MariaDB version")
    return m.group(1)


def find(mariadb_bin: Path | None = None, say: Callable[[str], None] = lambda _line: None) -> MariaInstall:
    """The MariaDB to run: the install under mariadb_bin (its base folder, or its bin or sbin) if given,
    else the cached packages, fetched first if the cache has none."""
    if mariadb_bin is not None:
        given = Path(mariadb_bin).expanduser().resolve()
        if not given.is_dir():
            raise UserError(f"--mariadb-bin {mariadb_bin}: not a directory; give the folder holding bin and sbin "
                            "(/usr for the distribution's install)")
        base = given.parent if given.name in ("bin", "sbin") else given
        install = _checked(base, "--mariadb-bin " + str(mariadb_bin))
    else:
        install = _cached() or fetch(say)
    if install.version.rsplit(".", 1)[0] != SERIES:
        raise UserError(f"{install.basedir} holds MariaDB {install.version}; dbtier runs the {SERIES} series")
    return install


def _checked(base: Path, what: str, packages: tuple = ()) -> MariaInstall:
    missing = [n for n in NEEDED if not (base / n).is_file()]
    if missing:
        raise UserError(f"{what}: no {', '.join(missing)} under {base}; give the folder holding bin and sbin "
                        "(/usr for the distribution's install)")
    install = MariaInstall(base, "", packages)
    return MariaInstall(base, server_version(install.env(dict(os.environ)), install.exe("mariadbd")), packages)


def _cached() -> MariaInstall | None:
    """The newest whole download of the series in the cache, if any."""
    folder = cache_root() / "mariadb"
    best = None
    for entry in sorted(folder.glob(f"{SERIES}.*")) if folder.is_dir() else []:
        try:
            manifest = json.loads((entry / MANIFEST).read_text())
        except (OSError, ValueError):
            continue
        if not set(PACKAGES) <= {p.get("package") for p in manifest.get("packages", [])}:
            continue  # fetched by a dbtier that took fewer packages: fetched again, whole
        key = tuple(int(x) for x in manifest["version"].split("."))
        if best is None or key > best[0]:
            best = (key, entry, manifest)
    if best is None:
        return None
    _key, entry, manifest = best
    packages = tuple((p["package"], p["version"], p["sha256"]) for p in manifest["packages"])
    return MariaInstall(entry / "usr", manifest["version"], packages)


@contextlib.contextmanager
def _locked(folder: Path):
    """One fetch at a time per cache (two test workers, two runs)."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def fetch(say: Callable[[str], None] = lambda _line: None) -> MariaInstall:
    """Downloads the packages, unpacks them into the cache and returns the install."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise UserError("MariaDB comes from the distribution's packages, and this machine has no apt-get and "
                        "dpkg-deb; install MariaDB 10.11 and give --mariadb-bin DIR")
    folder = cache_root() / "mariadb"
    with _locked(folder):
        found = _cached()  # another run may have fetched it while this one waited
        if found:
            return found
        work = folder / f".fetch-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        try:
            return _fetch_into(folder, work, say)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _fetch_into(folder: Path, work: Path, say: Callable[[str], None]) -> MariaInstall:
    debs = work / "debs"
    debs.mkdir(parents=True)
    say(f"fetching MariaDB {SERIES} ({', '.join(PACKAGES)}) from the distribution into {folder}")
    _download(debs)
    unpacked, packages, version = work / "root", [], None
    for deb in sorted(debs.glob("*.deb")):
        name, ver = (_deb_field(deb, f) for f in ("Package", "Version"))
        packages.append({"package": name, "version": ver, "sha256": _sha256(deb)})
        if name == "mariadb-server-core":
            version = re.sub(r"^\d+:", "", ver).split("-")[0]
        run = subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], capture_output=True, text=True)
        if run.returncode != 0:
            raise UserError(f"dpkg-deb could not unpack {deb.name}: {run.stderr.strip()[:200]}")
    if version is None or version.rsplit(".", 1)[0] != SERIES:
        raise UserError(f"the distribution serves MariaDB {version or 'no server package'}, not the {SERIES} "
                        "series dbtier runs; install MariaDB 10.11 and give --mariadb-bin DIR")
    install = _checked(unpacked / "usr", "the downloaded packages")
    (unpacked / MANIFEST).write_text(json.dumps({"version": install.version, "packages": packages}, indent=1))
    for root, dirs, files in os.walk(unpacked):  # readable by a lab's server user, as the wheel is
        for n in dirs + files:
            p = os.path.join(root, n)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | 0o444 | (0o111 if os.stat(p).st_mode & 0o100 else 0))
    os.chmod(unpacked, 0o755)
    dest = folder / install.version
    shutil.rmtree(dest, ignore_errors=True)  # a folder of that name without its manifest: not whole
    os.rename(unpacked, dest)
    say(f"MariaDB {install.version} is in {dest}")
    return _cached()


def _download(debs: Path) -> None:
    def download() -> subprocess.CompletedProcess:
        return subprocess.run(["apt-get", "download", "-q", *PACKAGES], cwd=debs, capture_output=True, text=True,
                              timeout=600)
    run = download()
    unknown = "Unable to locate package" in run.stderr or "has no installation candidate" in run.stderr
    if run.returncode != 0 and unknown and os.geteuid() == 0:  # the package lists were never fetched here
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True, timeout=600)
        run = download()
    if run.returncode != 0:
        lines = [ln for ln in run.stderr.splitlines() if ln.startswith("E:")] or run.stderr.strip().splitlines()
        hint = ("run 'sudo apt-get update' first, or " if unknown else "") + "install MariaDB 10.11 and give --mariadb-bin DIR"
        raise UserError(f"apt-get could not download MariaDB's packages ({lines[0] if lines else 'no message'}); "
                        f"{hint}")


def _deb_field(deb: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], capture_output=True, text=True, check=True).stdout.strip()


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
