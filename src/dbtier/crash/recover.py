"""A crash state recovered by the real server (the lab's own binaries) and checked: it starts (no
PANIC), every acknowledged commit is there, the workload's consistency holds, pg_amcheck finds every
heap and B-tree whole (with heapallindexed), and pg_checksums every page's checksum right.

A timed recovery runs on the run's emulated devices, each state's folder on its device's profile, the
page cache empty as after a power cut: the time from the server's start to its first accepted
connection is the recovery time a DBA would see on those devices (the RTO). It is most of a state's
cost (PostgreSQL fsyncs every file of the data directory before it replays: a device flush each, 2.2 s
on a SATA SSD's model at pgbench scale 1), so run.py times a sample of the cuts and recovers the rest
on the host alone. The checks after it run with the emulation paused: they are not the recovery."""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psycopg
import pymysql

from dbtier.devices.session import Device, Session
from dbtier.engines.postgres import PAGE_BYTES
from dbtier.engines.postgres.cluster import DATABASE, PORT, SUPERUSER, Cluster
from dbtier.errors import UserError

#: a recovery that takes longer is a failure of its own (a server that hangs)
START_TIMEOUT_S = 120.0


@dataclass
class Checked:
    started: bool
    recovery_s: float | None = None
    kept: dict[int, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)   # structure, checksums, consistency, start
    log_tail: str = ""
    ledger_read: bool = True  # False: the server refused the ledger's query (what it said is a problem)

    def read_ledger(self, ledger, conn) -> None:
        """The ledger's rows kept per client, and the workload's consistency, from the recovered database.
        A server that cannot answer (a damaged index: MariaDB's error 1034) found damage: its words are
        the problem, and what the ledger lost is not known."""
        try:
            self.kept = ledger.kept(conn)
            bad = ledger.inconsistency(conn)
        except (psycopg.Error, pymysql.err.MySQLError) as exc:
            self.ledger_read = False
            self.problems.append(f"the ledger and the consistency conditions could not be read: "
                                 f"{' '.join(str(exc).split())[:200]}")
            return
        if bad:
            self.problems.append(bad)


def give_state(user, root: Path) -> None:
    if not user.switches:
        return
    for dirpath, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            os.chown(os.path.join(dirpath, name), user.uid, user.gid, follow_symlinks=False)
    os.chown(root, user.uid, user.gid)


def recovery_env(lab, live_env: dict[str, str], state: Path, timed: bool) -> tuple[dict[str, str], Session | None]:
    """The environment a state's recovering server runs in, from the live server's: timed, under the
    interposer on a session of the state's own (each device's folder in the state, on its profile, the
    page cache empty); else on the host alone. The session is paused until the caller starts it."""
    env = {k: v for k, v in live_env.items() if not k.startswith("DBTIER_")}  # the lab's LD_PRELOAD, reachable
    if not timed:
        env.pop("LD_PRELOAD", None)
        return env, None
    session = Session([Device(d.name, (state / str(n)).resolve(), d.profile) for n, d in enumerate(lab.devices)],
                      state / "emulation", page_cache=lab.page_cache)
    session.create()
    env["DBTIER_IOTAP"] = str(session.state_path)
    return env, session


def timed_start(session: Session | None, start: Callable[[], None]) -> float | None:
    """A recovering server started: with a session (a timed recovery), on the emulated devices, and the
    time to its first accepted connection returned (else None). The session is paused after, whatever
    start raised."""
    if session is None:
        start()
        return None
    session.pause(False)
    t0 = time.monotonic()
    try:
        start()
    finally:
        session.pause()
    return time.monotonic() - t0


def recover(lab, state: Path, roles: dict[str, int], ledger, log_path: Path, timed: bool = True,
            socket_dir: Path | None = None) -> Checked:
    """Starts the server on `state` (a folder per device number, as states.Builder lays it out; roles:
    the data's and the WAL's device numbers); timed: on the emulated devices, its recovery time the RTO
    (else on the host alone, recovery_s None). socket_dir: where its server listens (the lab's own,
    stopped, by default; one each for states recovered side by side)."""
    pgdata = state / str(roles["data"]) / "pgdata"
    live = lab.cluster
    dynshmem = state / "dynshmem"
    dynshmem.mkdir(mode=0o700)
    link = pgdata / "pg_dynshmem"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(dynshmem)
    (pgdata / "postmaster.pid").unlink(missing_ok=True)
    pgdata.chmod(0o700)
    env, session = recovery_env(lab, live.env, state, timed)
    give_state(live.user, state)
    socket_dir = socket_dir or live.socket_dir
    cluster = Cluster(live.install, live.user, pgdata, state / str(roles["wal"]) / "pg_wal", socket_dir, log_path,
                      env, lab.claim, dynshmem)
    try:
        took = timed_start(session, lambda: cluster.start(timeout=START_TIMEOUT_S))
    except UserError:
        tail = log_tail(log_path, 40)
        said = [ln for ln in log_tail(log_path, 100_000).splitlines()
                if ("PANIC:" in ln or "FATAL:" in ln) and not _REFUSED_CONNECTION.search(ln)]
        first = next((ln for ln in said if "PANIC:" in ln), said[0] if said else "")
        why = first.split(":  ", 1)[-1]
        return Checked(False, log_tail=tail, problems=["the server did not start" + (f": {why}" if why else "")])
    out = Checked(True, took)
    try:
        with cluster.connect(DATABASE) as conn:
            out.read_ledger(ledger, conn)
        amcheck = _amcheck(live, socket_dir)
        if amcheck:
            out.problems.append(amcheck)
    finally:
        cluster.stop()
    checksums = _checksums(live, pgdata)
    if checksums:
        out.problems.append(checksums)
    out.log_tail = log_tail(log_path)
    if "PANIC" in out.log_tail:
        out.problems.append("the server logged a PANIC")
    return out


#: the server's FATAL answers to connections tried while it starts (timed_start's polls), not why it stopped
_REFUSED_CONNECTION = re.compile(r"FATAL:  the database system is (starting up|not yet accepting connections|"
                                 r"shutting down|in recovery mode)")


def _amcheck(live, socket_dir: Path) -> str | None:
    """pg_amcheck over every relation of the database: heaps, B-trees with heapallindexed."""
    argv = [str(live.install.exe("pg_amcheck")), "-h", str(socket_dir), "-p", str(PORT), "-U", SUPERUSER,
            "--heapallindexed", "--install-missing", DATABASE]
    proc = subprocess.run(argv, env=dict(live.env, LD_PRELOAD=""), capture_output=True, text=True, cwd="/",
                          **live.user.popen_kwargs())
    if proc.returncode == 0:
        return None
    lines = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    return f"pg_amcheck: {lines[0] if lines else f'exit status {proc.returncode}'}" + \
        (f" (and {len(lines) - 1} more lines)" if len(lines) > 1 else "")


_CHECKSUM_BAD = re.compile(r"^Bad checksums:\s+(\d+)", re.M)
#: pg_checksums' line for a bad page: the file's path and the block within that file (not the relation)
_CHECKSUM_FAILED = re.compile(r'checksum verification failed in file "([^"]+)", block (\d+)')
#: how a problem names a page: _checksums' words above, or the server's ("invalid page in block 7 of
#: relation base/5/16390")
_PAGE_NAMED = re.compile(r'block (\d+) of (?:relation )?"?([^\s)"]+)')


def damaged_page(problems: list[str], state: Path, roles: dict[str, int]) -> tuple[str, int, int, str] | None:
    """The first page a state's problems name, as (its file relative to the state, offset, bytes, how it
    was named); None: they name none."""
    pgdata = state / str(roles["data"]) / "pgdata"
    for text in problems:
        m = _PAGE_NAMED.search(text)
        if m:
            path = (pgdata / m[2]).resolve()
            if path.is_relative_to(state.resolve()):
                rel = str(path.relative_to(state.resolve()))
                return rel, int(m[1]) * PAGE_BYTES, PAGE_BYTES, f"block {m[1]} of {m[2]}"
    return None


def _checksums(live, pgdata: Path) -> str | None:
    """pg_checksums --check on the stopped cluster (PostgreSQL 18 initializes with checksums on)."""
    proc = subprocess.run([str(live.install.exe("pg_checksums")), "--check", "-D", str(pgdata)],
                          env=dict(live.env, LD_PRELOAD=""), capture_output=True, text=True, cwd="/",
                          **live.user.popen_kwargs())
    if proc.returncode == 0:
        return None
    m = _CHECKSUM_BAD.search(proc.stdout)
    if m:
        first = _CHECKSUM_FAILED.search(proc.stderr)
        where = ""
        if first:
            where = f" (the first: block {first[2]} of {os.path.relpath(first[1], pgdata)})"
        return f"pg_checksums: {int(m.group(1))} pages with a bad checksum{where}"
    text = (proc.stderr or proc.stdout).strip().splitlines()
    return f"pg_checksums: {text[-1] if text else f'exit status {proc.returncode}'}"


def log_tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
