"""Content dbtier did not write, acting against the machine: a dump's psql commands and SQL (which
runs as the lab's superuser, and can start programs as the server's user), and a lab's SQL against
another lab. Each test plays the attack and checks that it fails and that the run says why, or that
it has no effect.

The psql-command tests run for any user. The rest need root, where each lab's server runs as a user
of its own (dbtier.engines.osuser); as a normal user they are skipped: the servers then run as that user,
whose own rights a dump's SQL has (the README says so)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from dbtier.devices.spec import parse_all
from dbtier.errors import UserError
from dbtier.engines import osuser
from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import Lab, LabOptions
from tests.conftest import dbtier

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="each lab runs as a user of its own only when dbtier runs as root")


def _lab(workspace: Path, devices=("d=ram-san",)) -> Lab:
    names = [d.split("=")[0] for d in devices]
    return Lab(parse_all(list(devices)), placement.parse([], names), LabOptions(workspace=workspace),
               say=lambda _l: None)


@pytest.fixture(scope="module")
def plain_dump(module_shm_dir, tmp_path_factory) -> Path:
    """A real plain dump of a small database, by this PostgreSQL's pg_dump (with its \\restrict lines)."""
    path = tmp_path_factory.mktemp("dump") / "shop.sql"
    with _lab(module_shm_dir) as lab:
        db = lab.handle
        db.execute("CREATE TABLE shop (id int PRIMARY KEY, name text)")
        db.execute("INSERT INTO shop SELECT g, 'item ' || g FROM generate_series(1, 200) g")
        for fmt, name in (("p", path.name), ("c", "shop.dump")):
            proc = db.client("pg_dump", f"-F{fmt}", "-f", str(path.parent / name), db.database, as_me=True).run()
            assert proc.returncode == 0, proc.stderr
    text = path.read_text()
    assert "\n\\restrict " in text and "\n\\unrestrict " in text
    return path


def _restore(dump: Path, workspace: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    work = tmp_path / "count.sql"
    work.write_text("SELECT count(*) FROM shop;\n")
    return dbtier("run", "sql", "--restore", str(dump), "--run", str(work), "-d", "d=ram-san", "--workspace",
                  str(workspace), "-o", str(tmp_path / "out"), "-q")


@pytest.mark.parametrize("where", ["first line", "after its own unrestrict", "inside a line"])
def test_a_dumps_psql_commands_never_run(where, plain_dump, shm_dir, tmp_path):
    """`\\! id > FILE` in a dump: refused with its line, whether it comes first, after the dump's own
    \\unrestrict, or after SQL on the same line (which psql itself refuses under dbtier's \\restrict)."""
    mark = tmp_path / "ran"
    lines = plain_dump.read_text().splitlines(keepends=True)
    attack = f"\\! id > {mark}\n"
    if where == "first line":
        lines.insert(0, attack)
    elif where == "after its own unrestrict":
        at = next(i for i, line in enumerate(lines) if line.startswith("\\unrestrict "))
        lines.insert(at + 1, attack)
    else:
        at = next(i for i, line in enumerate(lines) if line.startswith("CREATE TABLE"))
        lines.insert(at, f"SELECT 1; \\! id > {mark}\n")
    dump = tmp_path / "evil.sql"
    dump.write_text("".join(lines))
    proc = _restore(dump, shm_dir, tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert ("\\! is a psql command" in proc.stderr if where != "inside a line"
            else "backslash commands are restricted" in proc.stderr), proc.stderr
    assert str(dump) in proc.stderr
    assert not mark.exists(), f"the dump's command ran: {mark.read_text()}"
    assert not (tmp_path / "out").exists()


def test_the_real_dump_restores_with_its_own_restrict_lines(plain_dump, shm_dir, tmp_path):
    proc = _restore(plain_dump, shm_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "out").glob("sql-*/result.json"))


@pytest.mark.parametrize("name", ["shop.sql", "shop.dump"])
def test_a_dump_named_relative_to_where_you_are_restores(name, plain_dump, shm_dir, tmp_path):
    """--restore shop.dump from the dump's folder: found there, whichever client restores it."""
    (tmp_path / "count.sql").write_text("SELECT count(*) FROM shop;\n")
    proc = dbtier("run", "sql", "--restore", name, "--run", str(tmp_path / "count.sql"), "-d", "d=ram-san",
                  "--workspace", str(shm_dir), "-o", str(tmp_path / "out"), "--json", str(tmp_path / "r.json"), "-q",
                  cwd=plain_dump.parent)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["params"]["restore"] == str(plain_dump.parent / name)  # recorded absolute
    assert doc["metrics"]["statement_times"][0]["rows"] == 1 and doc["files"][0]["path"] == str(plain_dump.parent / name)


@needs_root
def test_what_a_dumps_sql_starts_does_not_outlive_its_lab(shm_dir):
    """COPY ... TO PROGRAM starts a process that detaches (setsid, no preload): gone when the lab ends,
    with what it left in the shared folders."""
    with _lab(shm_dir) as lab:
        uid = lab.user.uid
        left = Path("/dev/shm") / f"dbtier-test-left-{os.getpid()}"
        # the program reads what COPY sends before it detaches and ends: a shell that ended first would
        # leave the server writing into a closed pipe (EPIPE, seen under load)
        lab.handle.execute(f"COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; env -u LD_PRELOAD setsid sh -c \"touch {left}; "
                           f"exec sleep 600\" >/dev/null 2>&1 < /dev/null &'")
        deadline = time.monotonic() + 10
        while not left.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert left.exists() and left.stat().st_uid == uid
        running = osuser.processes_of(uid)
        assert any("sleep" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace") for p in running
                   if Path(f"/proc/{p}").exists())
    assert osuser.processes_of(uid) == []
    assert not left.exists()


@needs_root
def test_two_labs_cannot_reach_each_other(shm_dir):
    """Two labs at once run as two users: one's SQL can read neither the other's emulation state, nor
    its data, nor reach its socket, nor pause its emulation."""
    with _lab(shm_dir) as a, _lab(shm_dir) as b:
        assert a.user.uid != b.user.uid and a.user.gid != b.user.gid
        state, socket_dir, data = b.session.state_path, b.cluster.socket_dir, b.cluster.pgdata
        for target in (state, data / "PG_VERSION"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                a.handle.execute("SELECT pg_read_binary_file(%s)", (str(target),))
        # a program of lab a's: it may open neither b's state (to pause it) nor b's socket
        probe = a.handle.handover_dir("probe") / "probe.py"
        with os.fdopen(a.handle.handover_file(probe), "w") as f:
            f.write("import socket, sys\n"
                    f"try:\n    open({str(state)!r}, 'r+b')\n    sys.exit(1)\nexcept OSError:\n    pass\n"
                    f"try:\n    socket.socket(socket.AF_UNIX).connect({str(socket_dir / '.s.PGSQL.5432')!r})\n"
                    "    sys.exit(2)\nexcept OSError:\n    sys.exit(3)\n")
        with pytest.raises(psycopg.Error) as refused:
            a.handle.execute(f"COPY (SELECT 1) TO PROGRAM 'python3 {probe}'")
        assert "exit code 3" in (refused.value.diag.message_detail or ""), refused.value.diag.message_detail
        assert b.handle.execute("SELECT 1") == [(1,)]


@needs_root
def test_alter_system_and_rewritten_configuration_never_take_effect(shm_dir):
    """ALTER SYSTEM is off; a postgresql.auto.conf or pg_hba.conf written by the server's user anyway
    stops the lab at its next restart, before the server could listen on TCP."""
    with _lab(shm_dir) as lab:
        with pytest.raises(psycopg.Error, match="ALTER SYSTEM is not allowed"):
            lab.handle.execute("ALTER SYSTEM SET listen_addresses = '127.0.0.1'")
        auto = lab.cluster.pgdata / "postgresql.auto.conf"
        lab.handle.execute(f"COPY (SELECT 'listen_addresses = ''127.0.0.1''') TO '{auto}'")
        with pytest.raises(UserError, match="postgresql.auto.conf"):
            lab.restart_cold()
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", 5432)) != 0
    with _lab(shm_dir) as lab:
        hba = lab.cluster.pgdata / "pg_hba.conf"
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # dbtier's own: the server may only read it
            lab.handle.execute(f"COPY (SELECT 'host all all 127.0.0.1/32 trust') TO '{hba}'")
        lab.handle.execute(f"COPY (SELECT 1) TO PROGRAM 'mv {hba} {hba}.old && echo host all all 127.0.0.1/32 trust "
                           f"> {hba}'")
        with pytest.raises(UserError, match="pg_hba.conf was changed during the run"):
            lab.restart_cold()


@needs_root
def test_root_clients_work_where_the_server_cannot_write(shm_dir):
    """pgbench and psql run as root (to read the user's own files) work and log in a folder the servers'
    user cannot enter, so nothing it plants redirects what root writes."""
    with _lab(shm_dir) as lab:
        logs = lab.client_dir("pgbench")
        probe = subprocess.run(["python3", "-c", f"import os; os.symlink('/etc/shadow', '{logs}/log1')"],
                               user=lab.user.uid, group=lab.user.gid, extra_groups=lab.user.groups,
                               capture_output=True, text=True)
        assert probe.returncode != 0 and "PermissionError" in probe.stderr
        client = lab.handle.client("psql", "-XAtc", "SELECT 1", lab.handle.database, as_me=True)
        assert client.cwd.stat().st_uid == 0 and client.cwd.stat().st_mode & 0o077 == 0


@pytest.mark.parametrize("given_as", ["--restore", "--setup", "--run"])
def test_a_mariadb_table_kept_outside_the_lab_is_refused_and_removed(given_as, shm_dir, tmp_path):
    """A dump's or a SQL file's DATA DIRECTORY has MariaDB keep a table's file outside the lab, on no
    emulated device, wherever its server's user may write: the run says so in one line and leaves
    nothing there (InnoDB made the file new, and its database's folder with it)."""
    outside = Path(tempfile.mkdtemp(prefix="dbtier-outside-"))  # in /tmp: the server's user reaches it
    try:
        outside.chmod(0o777)
        sql = tmp_path / "t.sql"
        sql.write_text(f"CREATE TABLE t (id INT PRIMARY KEY) DATA DIRECTORY = '{outside}';\nINSERT INTO t VALUES (1);\n")
        query = tmp_path / "q.sql"
        query.write_text("SELECT 1;\n")
        args = {"--restore": ["--restore", sql, "--run", query], "--setup": ["--setup", sql, "--run", query],
                "--run": ["--run", sql]}[given_as]
        out = tmp_path / "out"
        proc = dbtier("run", "sql", "--engine", "mariadb", *map(str, args), "-d", "d=ram-san", "--workspace",
                      str(shm_dir), "-o", str(out))
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "table dbtier.t" in proc.stderr and "(DATA DIRECTORY)" in proc.stderr, proc.stderr
        assert not out.exists()
        assert list(outside.iterdir()) == []
    finally:
        shutil.rmtree(outside, ignore_errors=True)


@pytest.mark.parametrize("given_as", ["--restore", "--setup", "--run"])
def test_a_postgres_tablespace_made_outside_the_lab_is_refused_and_emptied(given_as, shm_dir, tmp_path):
    """A dump's or a SQL file's CREATE TABLESPACE puts what it holds outside the lab, on no emulated
    device (the folder made by the server's user itself, as a dump can): the run says so in one line,
    and what the server made there is gone after it."""
    outside = Path(tempfile.mkdtemp(prefix="dbtier-outside-"))
    try:
        outside.chmod(0o777)
        sql = tmp_path / "t.sql"
        sql.write_text(f"COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; mkdir -m 700 {outside}/ts';\n"
                       f"CREATE TABLESPACE away LOCATION '{outside}/ts';\n"
                       "CREATE TABLE t (id int PRIMARY KEY) TABLESPACE away;\nINSERT INTO t VALUES (1);\n"
                       "-- PostgreSQL database dump complete\n")
        query = tmp_path / "q.sql"
        query.write_text("SELECT 1;\n")
        args = {"--restore": ["--restore", sql, "--run", query], "--setup": ["--setup", sql, "--run", query],
                "--run": ["--run", sql]}[given_as]
        out = tmp_path / "out"
        proc = dbtier("run", "sql", *map(str, args), "-d", "d=ram-san", "--workspace", str(shm_dir), "-o", str(out))
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert f"a tablespace at {outside}/ts (CREATE TABLESPACE)" in proc.stderr, proc.stderr
        assert not out.exists()
        assert list(outside.rglob("PG_*")) == []
    finally:
        shutil.rmtree(outside, ignore_errors=True)
