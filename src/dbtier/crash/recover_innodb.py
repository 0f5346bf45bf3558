"""A crash state recovered by MariaDB (the lab's own binaries) and checked, as recover.py does it for
PostgreSQL: the server starts (InnoDB applies its redo log, rolls back what was not committed) and
logs no error, every acknowledged commit is there, the workload's consistency holds, CHECK TABLE finds
every table and index whole (it reads each of their pages, each checksum verified as it is read), and
innochecksum finds every page of every tablespace right once the server stopped (the undo and system
tablespaces too, which no table's check reads; the doublewrite buffer's pages left out: _page_ranges).

A timed recovery runs on the run's emulated devices, each state's folder on its device's profile, the
page cache empty: the time from the server's start to its first accepted connection is the recovery
time a DBA would see on those devices. The checks run with the emulation paused."""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path

import pymysql

from dbtier.crash.recover import Checked, give_state, log_tail, recovery_env, timed_start
from dbtier.engines.mariadb import PAGE_BYTES
from dbtier.engines.mariadb.lab import DATABASE
from dbtier.engines.mariadb.server import OWN_DATA_DIRECTORY, Folders, Server
from dbtier.errors import UserError

#: the server's own words for damage it found and carried on past, in its error log
_ERROR = "[ERROR]"


def recover(lab, state: Path, roles: dict[str, int], ledger, log_path: Path, timed: bool = True,
            socket_dir: Path | None = None) -> Checked:
    """Starts a server on `state` (a folder per device number, as states.Builder lays it out; roles:
    each InnoDB role's device number); timed: on the emulated devices, its recovery time the RTO (else
    on the host alone, recovery_s None). socket_dir: the folder its socket, pid file and error log go in
    (one each for states recovered side by side); its log is copied to log_path."""
    live = lab.server
    folders = _folders(state, roles, socket_dir or live.folders.run)
    check_links_within(folders.data)
    for stale in ("mysqld.err", "mysqld.pid", "mysqld.sock"):
        (folders.run / stale).unlink(missing_ok=True)
    folders.temp.mkdir(exist_ok=True)  # the temporary tablespace is made again as the server starts
    env, session = recovery_env(lab, live.env, state, timed)
    give_state(live.user, state)
    server = Server(live.install, live.user, folders, env, live.settings)
    try:
        took = timed_start(session, server.start)
    except UserError as exc:
        _keep_log(server, log_path)
        return Checked(False, log_tail=log_tail(log_path, 40),
                       problems=[f"the server did not start: {str(exc).split(': ', 1)[-1]}"])
    lab.claim.watch(server.proc.pid, live.user.uid)  # a killed run's reaper stops it too
    out = Checked(True, took)
    try:
        with server.connect(DATABASE) as conn:
            out.read_ledger(ledger, conn)
            damaged = _check_tables(conn)
            if damaged:
                out.problems.append(damaged)
    except pymysql.err.MySQLError as exc:  # the server went away as it read a damaged page
        out.problems.append(f"the server failed as its tables were checked: {' '.join(str(exc).split())[:200]}")
    finally:
        server.stop()
        _keep_log(server, log_path)
    pages = _innochecksum(live, state, folders)
    if pages:
        out.problems.append(pages)
    out.log_tail = log_tail(log_path)
    said = [ln.split(_ERROR, 1)[1].strip() for ln in log_tail(log_path, 100_000).splitlines() if _ERROR in ln]
    if said:
        out.problems.append(f"the server logged {len(said)} error{'s' * (len(said) != 1)}: {said[0][:200]}")
    return out


def check_links_within(data: Path) -> None:
    """Every table file kept apart (InnoDB's link to it, a .isl file) is found through the server's
    own data directory, as dbtier places tables: a path leading out of the state would have its
    recovery open and change another folder's file (the lab's), and check the wrong one."""
    for isl in data.rglob("*.isl"):
        target = isl.read_text(errors="replace").strip()
        if not target.startswith(OWN_DATA_DIRECTORY + "/"):
            raise UserError(f"table {isl.parent.name}.{isl.stem} was put at {target} by the workload's own DATA "
                            "DIRECTORY, which a crash state cannot have a copy of: place it with --place instead")


def _folders(state: Path, roles: dict[str, int], run: Path) -> Folders:
    return Folders(data=state / str(roles["data"]) / "data", log=state / str(roles["log"]) / "log",
                   undo=state / str(roles["undo"]) / "undo", temp=state / str(roles["temp"]) / "temp", run=run)


#: how InnoDB names a page in its error log: by tablespace id and page number, or by page and file
_PAGE_ID = re.compile(r"\[page id: space=(\d+), page number=(\d+)\]")
_PAGE_IN_FILE = re.compile(r"page (\d+) in file (\S+)")
#: where a tablespace's first page says which tablespace it is (FIL_PAGE_SPACE_ID, fil0fil.h)
SPACE_ID_AT = 34


def damaged_page(problems: list[str], state: Path, roles: dict[str, int]) -> tuple[str, int, int, str] | None:
    """The first page a state's problems name, as (its file relative to the state, offset, bytes, how
    the server named it); None: they name none, or no tablespace of the state is the one named."""
    folders = _folders(state, roles, state)
    for text in problems:
        if m := _PAGE_ID.search(text):
            space, page = int(m[1]), int(m[2])
            path = next((p for p in _tablespaces(state, folders) if _space_id(p) == space), None)
        elif m := _PAGE_IN_FILE.search(text):
            page, named = int(m[1]), m[2].removeprefix(OWN_DATA_DIRECTORY + "/")
            if named.startswith("/"):  # in the folder the state was recovered in: the same place in this one
                path = next((p for p in _tablespaces(state, folders) if named.endswith(f"/{p.relative_to(state)}")),
                            None)
            else:
                path = (folders.data / named).resolve()
        else:
            continue
        if path is not None and path.is_relative_to(state.resolve()):
            return str(path.relative_to(state.resolve())), page * PAGE_BYTES, PAGE_BYTES, m[0]
    return None


def _tablespaces(state: Path, folders: Folders) -> list[Path]:
    """Every tablespace of a state: the system tablespace, the undo tablespaces, each table's file
    wherever it was placed."""
    return [*sorted(folders.data.glob("ibdata*")), *sorted(folders.undo.glob("undo*")), *sorted(state.rglob("*.ibd"))]


def _space_id(path: Path) -> int | None:
    try:
        with open(path, "rb") as f:
            head = f.read(SPACE_ID_AT + 4)
    except OSError:
        return None
    return struct.unpack(">I", head[SPACE_ID_AT:])[0] if len(head) == SPACE_ID_AT + 4 else None


def _keep_log(server: Server, log_path: Path) -> None:
    try:
        log_path.write_bytes(server.error_log.read_bytes())
    except OSError:
        pass


def _check_tables(conn) -> str | None:
    """CHECK TABLE of every table in the database: what it says other than OK, first."""
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND ENGINE = 'InnoDB'",
                    (DATABASE,))
        tables = [name for (name,) in cur.fetchall()]
        wrong = []
        for table in tables:
            cur.execute(f"CHECK TABLE `{table}`")
            wrong += [f"{table}: {text}" for _t, _op, kind, text in cur.fetchall()
                      if kind in ("error", "warning") or (kind == "status" and text != "OK")]
    if not wrong:
        return None
    return f"CHECK TABLE {wrong[0]}" + (f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else "")


#: where the system tablespace's page 5 (TRX_SYS) says where the doublewrite buffer is: at its page's
#: end less 200 bytes, a segment header (10 bytes), then the magic number and the first page of each
#: of its two blocks of 64 pages (MariaDB's storage/innobase/include/trx0sys.h)
DOUBLEWRITE_AT = PAGE_BYTES - 200 + 10
DOUBLEWRITE_MAGIC = 536853855
DOUBLEWRITE_BLOCK_PAGES = 64


def _page_ranges(ibdata: Path) -> list[tuple[int, int | None]]:
    """The system tablespace's pages to check: all but the doublewrite buffer's, whose pages are copies
    in flight (never a page of their own: innochecksum finds them invalid even in a new server's)."""
    with open(ibdata, "rb") as f:
        f.seek(5 * PAGE_BYTES + DOUBLEWRITE_AT)
        head = f.read(12)
    if len(head) < 12:
        return [(0, None)]
    magic, *blocks = struct.unpack(">III", head)
    if magic != DOUBLEWRITE_MAGIC:
        return [(0, None)]
    ranges, start = [], 0
    for first in sorted(blocks):
        if first > start:
            ranges.append((start, first - 1))
        start = max(start, first + DOUBLEWRITE_BLOCK_PAGES)
    return [*ranges, (start, None)]


def _innochecksum(live: Server, state: Path, folders: Folders) -> str | None:
    """innochecksum over every tablespace of the stopped server: the system tablespace (but its
    doublewrite buffer), the undo tablespaces and each table's file, wherever it was placed."""
    checks = [(path, _page_ranges(path) if path.name.startswith("ibdata") else [(0, None)])
              for path in _tablespaces(state, folders)]
    exe = live.install.exe("innochecksum")
    env = {k: v for k, v in live.env.items() if k != "LD_PRELOAD"}
    bad = []
    for path, ranges in checks:
        for first, last in ranges:
            pages = ["--start-page", str(first), *(["--end-page", str(last)] if last is not None else [])]
            proc = subprocess.run([str(exe), *pages, str(path)], env=env, capture_output=True, text=True, cwd="/",
                                  **live.user.popen_kwargs())
            if proc.returncode != 0:
                said = (proc.stderr or proc.stdout).strip().splitlines()
                bad.append(f"{path.relative_to(state)}: {said[0] if said else f'exit status {proc.returncode}'}")
                break
    if not bad:
        return None
    return f"innochecksum: {bad[0]}" + (f" (and {len(bad) - 1} more files)" if len(bad) > 1 else "")
