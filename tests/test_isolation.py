"""Another local user against dbtier: cannot reach a lab's server, cannot write its emulation state or
trace, and cannot make dbtier delete, chmod or overwrite anything by pre-creating or linking paths.

As root the tests make a second, unprivileged user (`dbtier-other`) and act as it; as a normal user
they are skipped, because only root can act as another user."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dbtier.engines import osuser
from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import Lab, LabOptions
from dbtier.devices.spec import parse_all
from tests.conftest import dbtier, shm_folder, stop_session

OTHER = "dbtier-other"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="acting as a second local user needs root")


@pytest.fixture(scope="module")
def other() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(OTHER)
    except KeyError:
        # as a lab's pool user is made: retried while another useradd (a lab's, beside) holds /etc/passwd
        osuser._run_admin(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                           "--shell", "/usr/sbin/nologin", OTHER], "the tests' second user")
        return pwd.getpwnam(OTHER)


#: The system's Python, which any user may run (the project's may sit in root's private home).
OTHER_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable


def as_other(other, code: str) -> subprocess.CompletedProcess:
    """Python code (standard library only) run as the other user: its uid, its gid, no extra groups."""
    return subprocess.run([OTHER_PYTHON, "-c", code], user=other.pw_uid, group=other.pw_gid, extra_groups=[],
                          capture_output=True, text=True, cwd="/", env={"PATH": "/usr/bin:/bin"})


@pytest.fixture
def shared_base():
    """A folder everyone may write, as /tmp is (mode 1777): where an attacker plants things."""
    path = shm_folder(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def lab(other, module_shm_dir):
    with Lab(parse_all(["ssd=ssd-sata-mlc"]), placement.parse([], ["ssd"]), LabOptions(workspace=module_shm_dir),
             say=lambda _l: None) as the_lab:
        yield the_lab


def test_another_user_cannot_connect_to_the_server(other, lab):
    sock = lab.cluster.socket_dir / ".s.PGSQL.5432"
    probe = as_other(other, "import socket, sys\n"
                            f"try:\n    socket.socket(socket.AF_UNIX).connect({str(sock)!r})\n"
                            "except OSError as exc:\n    print(type(exc).__name__, exc); sys.exit(3)\n")
    assert probe.returncode == 3, probe.stdout + probe.stderr
    assert "PermissionError" in probe.stdout, probe.stdout
    st = os.stat(lab.cluster.socket_dir)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == lab.user.uid
    with lab.connect() as conn:  # the lab itself still connects, by peer authentication
        assert conn.execute("SELECT setting FROM pg_settings WHERE name = 'listen_addresses'").fetchone()[0] == ""
        rules = conn.execute("SELECT type, auth_method FROM pg_hba_file_rules").fetchall()
    assert rules == [("local", "peer")]


def test_another_user_cannot_write_the_state_or_the_trace(other, lab):
    state = lab.session.state_path
    assert stat.S_IMODE(os.stat(state).st_mode) & 0o077 == 0
    for path, code in ((state, f"open({str(state)!r}, 'r+b')"),
                       (lab.session.trace_dir, f"open({str(lab.session.trace_dir / 'x')!r}, 'w')"),
                       (lab.claim.path, f"import os; os.listdir({str(lab.claim.path)!r})")):
        probe = as_other(other, code)
        assert probe.returncode != 0 and "PermissionError" in probe.stderr, (path, probe.stderr)
    for folder in (lab.session.trace_dir, lab.session.workdir, lab.claim.path, lab.claim.workspace.root):
        assert stat.S_IMODE(os.stat(folder).st_mode) & 0o007 == 0, folder


def test_a_root_planted_by_another_user_is_refused(other, shared_base, tmp_path):
    """The other user makes dbtier's root (dbtier-0) in a shared folder before dbtier does, with a
    record in it that names a folder of root's: dbtier refuses the root and deletes nothing."""
    victim = tmp_path / "precious"
    victim.mkdir(mode=0o700)
    (victim / "data").write_text("keep me")
    plant = ("import os, json\n"
             f"root = {str(shared_base / f'dbtier-{os.geteuid()}')!r}\n"
             "os.mkdir(root, 0o777); os.chmod(root, 0o777); os.mkdir(root + '/lab-00000000')\n"
             "json.dump({'dbtier_claim': 'lab-00000000', 'pid': 1, 'start': '0', 'folders': "
             f"[{str(victim)!r}], 'processes': [], 'sysv_shm': []}}, open(root + '/lab-00000000/owner.json', 'w'))\n")
    assert as_other(other, plant).returncode == 0
    proc = dbtier("run", "random-index", "--rows", "50", "-d", "d=ram-san", "--workspace", str(shared_base),
                  "-o", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    assert "belongs to another user" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert (victim / "data").read_text() == "keep me"
    assert not (tmp_path / "out").exists()


def test_a_symlinked_root_is_refused(other, shared_base, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (target / "data").write_text("keep me")
    as_other(other, f"import os; os.symlink({str(target)!r}, {str(shared_base / f'dbtier-{os.geteuid()}')!r})")
    proc = dbtier("exec", "--workspace", str(shared_base), "-d", f"d=ram-san:{tmp_path}", "--", "true")
    assert proc.returncode == 2 and "link" in proc.stderr, proc.stderr
    assert (target / "data").read_text() == "keep me" and stat.S_IMODE(target.stat().st_mode) == 0o700


def test_folders_the_user_names_keep_their_mode_and_contents(shared_base, tmp_path):
    """--workspace of mode 1777, a 0700 --trace folder, a user's lab-notes/ and dbtier-iobench/ beside
    dbtier's own: all as they were after a run, an exec and an iobench."""
    notes = shared_base / "lab-notes"
    notes.mkdir()
    (notes / "n.txt").write_text("mine")
    old = time.time() - 3600
    os.utime(notes, (old, old))
    trace = tmp_path / "trace"
    trace.mkdir(mode=0o700)
    bench_dir = tmp_path / "benchdir"
    (bench_dir / "dbtier-iobench").mkdir(parents=True)
    (bench_dir / "dbtier-iobench" / "mine.txt").write_text("mine")
    dbtier("run", "table-scan", "--rows", "50", "--scans", "1", "-d", "d=ram-san", "--workspace", str(shared_base),
           "-o", str(tmp_path / "out"), "-q", check=True)
    dev = tmp_path / "dev"
    dev.mkdir()
    dbtier("exec", "--workspace", str(shared_base), "--trace", str(trace), "-q", "-d", f"d=ram-san:{dev}", "--",
           "dd", "if=/dev/zero", f"of={dev}/f", "bs=8k", "count=10", check=True)
    dbtier("iobench", "--workspace", str(shared_base), "-d", f"b=ram-san:{bench_dir}", "--rw", "read", "--bs", "8k",
           "--size", "1m", "--runtime", "0.2", "-q", check=True)
    assert stat.S_IMODE(shared_base.stat().st_mode) == 0o1777
    assert stat.S_IMODE(trace.stat().st_mode) == 0o700 and list(trace.glob("iotap-*.trc"))
    assert (notes / "n.txt").read_text() == "mine"
    assert (bench_dir / "dbtier-iobench" / "mine.txt").read_text() == "mine"
    assert sorted(p.name for p in bench_dir.iterdir()) == ["dbtier-iobench"]
    assert sorted(p.name for p in shared_base.iterdir()) == [f"dbtier-{os.geteuid()}", "lab-notes"]


def test_links_planted_in_a_trace_folder_are_not_followed(other, shared_base, tmp_path):
    """A shared trace folder where the other user linked meta.json and files.json to a file of root's:
    dbtier replaces the links, and the file keeps its contents."""
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    trace = shared_base / "trace"
    as_other(other, f"import os; os.mkdir({str(trace)!r}, 0o777); os.chmod({str(trace)!r}, 0o777)\n"
                    f"os.symlink({str(victim)!r}, {str(trace / 'meta.json')!r})\n"
                    f"os.symlink({str(victim)!r}, {str(trace / 'files.json')!r})\n")
    dev = tmp_path / "dev"
    dev.mkdir()
    dbtier("exec", "--trace", str(trace), "-q", "-d", f"d=ram-san:{dev}", "--", "dd", "if=/dev/zero", f"of={dev}/f",
           "bs=8k", "count=4", check=True)
    assert victim.read_text() == "keep me"
    assert json.loads((trace / "meta.json").read_text())["command"][0] == "dd"
    # --trace named as a link the other user made: refused, whatever it points at
    elsewhere = tmp_path / "private"
    elsewhere.mkdir(mode=0o700)
    for name, target in (("trace2", victim), ("trace3", elsewhere)):
        as_other(other, f"import os; os.symlink({str(target)!r}, {str(shared_base / name)!r})")
        proc = dbtier("exec", "--trace", str(shared_base / name), "-q", "-d", f"d=ram-san:{dev}", "--", "true")
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert victim.read_text() == "keep me" and list(elsewhere.iterdir()) == []


def test_the_reaper_signals_only_what_dbtier_recorded(other, shm_dir, tmp_path):
    """The other user runs a process whose command line names a killed command's folder; the next command
    reaps that folder, and the other user's process lives on."""
    root = shm_dir / f"dbtier-{os.geteuid()}"
    proc = subprocess.Popen([sys.executable, "-m", "dbtier", "exec", "--workspace", str(shm_dir), "-q", "-d",
                             f"d=ram-san:{tmp_path}", "--", "sleep", "600"])
    decoy = None
    try:
        deadline = time.monotonic() + 30
        while not list(root.glob("exec-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        (claim,) = root.glob("exec-*")
        decoy = subprocess.Popen(["sh", "-c", "sleep 600", str(claim / "iotap")], user=other.pw_uid, group=other.pw_gid,
                                 extra_groups=[], start_new_session=True)
        proc.kill()
        proc.wait()
        dbtier("exec", "--workspace", str(shm_dir), "-q", "-d", f"d=ram-san:{tmp_path}", "--", "true", check=True)
        assert not claim.exists()
        assert decoy.poll() is None, "the other user's process was signalled"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if decoy is not None:
            stop_session(decoy)


def test_exec_fails_when_the_program_drops_to_a_user_the_emulation_cannot_reach(other, tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    dev.chmod(0o777)
    proc = dbtier("exec", "-d", f"d=ram-san:{dev}", "--", "setpriv", f"--reuid={other.pw_uid}",
                  f"--regid={other.pw_gid}", "--clear-groups", "dd", "if=/dev/zero", f"of={dev}/f", "bs=8k", "count=4")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "did not apply" in proc.stderr and "r/s" not in proc.stdout + proc.stderr


# -- folders another user can change, and run directories another user made -----------------------


@pytest.fixture
def hers(other, shared_base):
    """A folder of the other user's, in the shared folder: she can rename and replace what is in it."""
    path = shared_base / "hers"
    assert as_other(other, f"import os; os.mkdir({str(path)!r}, 0o755)").returncode == 0
    return path


@pytest.mark.parametrize("where", ["-o", "-o below", "device", "workspace"])
def test_nothing_is_made_in_a_folder_another_user_can_change(where, hers, shm_dir, tmp_path):
    """Results, a device's folder or the workspace inside her folder: she could swap what dbtier made
    for a link between two of its steps (a chmod, a write), so the run is refused before anything is made."""
    args = {"-o": ["-o", str(hers)], "-o below": ["-o", str(hers / "out")],
            "device": ["-d", f"x=ram-san:{hers}"], "workspace": ["--workspace", str(hers)]}[where]
    base = ["--workspace", str(shm_dir)] if where != "workspace" else []
    out = ["-o", str(tmp_path / "out")] if not where.startswith("-o") else []
    proc = dbtier("run", "random-index", "--rows", "50", "-d", "d=ram-san", *base, *out, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"belongs to user {OTHER}" in proc.stderr and "choose a folder only you" in proc.stderr, proc.stderr
    assert list(hers.iterdir()) == [] and not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def recorded_sql(module_shm_dir, tmp_path_factory):
    """A run of the user's own SQL with a setup file, recorded with --trace (what --verify runs again)."""
    work = tmp_path_factory.mktemp("verify")
    (work / "setup.sql").write_text("CREATE TABLE t AS SELECT g AS id, repeat('x', 500) AS pad "
                                    "FROM generate_series(1, 2000) g;\n")
    (work / "q.sql").write_text("SELECT count(*) FROM t;\n")
    dbtier("run", "sql", "--setup", str(work / "setup.sql"), "--run", str(work / "q.sql"), "-d", "hdd=hdd-sata-7200",
           "--trace", "-q", "--workspace", str(module_shm_dir), "-o", str(work / "runs"), check=True)
    return work, next((work / "runs").glob("sql-*"))


def _copy_run(run_dir: Path, dest: Path, change=None) -> Path:
    shutil.copytree(run_dir, dest)
    if change:
        doc = json.loads((dest / "result.json").read_text())
        change(doc)
        (dest / "result.json").write_text(json.dumps(doc))
    return dest


def _verify(run_dir: Path, tmp_path: Path, workspace: Path) -> subprocess.CompletedProcess:
    return dbtier("advise", str(run_dir), "--fast", "ssd=ssd-sata-mlc", "--budget", "64MB", "--verify", "1",
                  "--workspace", str(workspace), "-o", str(tmp_path / "advice"), "-q")


def test_verify_refuses_a_run_directory_another_user_owns(other, recorded_sql, shm_dir, tmp_path):
    _work, run = recorded_sql
    theirs = _copy_run(run, tmp_path / "theirs")
    for path in [theirs, *theirs.iterdir()]:
        os.chown(path, other.pw_uid, other.pw_gid)
    proc = _verify(theirs, tmp_path, shm_dir)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"belongs to user {OTHER}" in proc.stderr and "--verify runs the recorded run again" in proc.stderr
    assert not (tmp_path / "advice").exists()


@pytest.mark.parametrize("damage, message", [
    ("her setup file", f"belongs to user {OTHER}"),
    ("a changed setup file", "has changed since the run was recorded"),
    ("a relative path", "by a relative path"),
    ("no fingerprints", "has no fingerprint of its --setup file"),
    ("listen_addresses", "the recorded run carries a setting dbtier would refuse (--set listen_addresses"),
    ("hba_file", "the recorded run carries a setting dbtier would refuse (--set hba_file"),
])
def test_verify_runs_nothing_the_recording_names_unless_it_is_yours_and_unchanged(damage, message, other,
                                                                                 recorded_sql, shm_dir, tmp_path):
    """Whatever a recording names is checked before it runs: its setup file (hers, changed, named
    relatively, never fingerprinted) and its server settings (what --set would refuse)."""
    work, run = recorded_sql
    mark = tmp_path / "ran"
    setup = tmp_path / "setup.sql"  # runs as root if it ever runs: it must not
    setup.write_text(f"\\! touch {mark}\n" + (work / "setup.sql").read_text())

    def change(doc):
        if damage in ("her setup file", "a changed setup file", "no fingerprints"):
            doc["params"]["setup"] = [str(setup)]
            doc["files"] = [{"option": "setup", "path": str(setup), "sha256": "0" * 64}]
        if damage == "her setup file":
            os.chown(setup, other.pw_uid, other.pw_gid)
        if damage == "no fingerprints":
            del doc["files"]
        if damage == "a relative path":
            doc["params"]["setup"] = ["setup.sql"]
        if damage in ("listen_addresses", "hba_file"):
            doc["lab"]["user_settings"][damage] = "'*'" if damage == "listen_addresses" else "'/tmp/hba'"
    proc = _verify(_copy_run(run, tmp_path / "run", change), tmp_path, shm_dir)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert message in proc.stderr, proc.stderr
    assert not mark.exists() and not (tmp_path / "advice").exists()


def test_verify_runs_an_unchanged_recording_of_ones_own(recorded_sql, shm_dir, tmp_path):
    """The same checks pass a run of one's own, as recorded: its files' fingerprints are in result.json."""
    work, run = recorded_sql
    doc = json.loads((run / "result.json").read_text())
    assert doc["files"] == [{"option": "setup", "path": str(work / "setup.sql"),
                             "sha256": hashlib.sha256((work / "setup.sql").read_bytes()).hexdigest()},
                            {"option": "run", "path": str(work / "q.sql"),
                             "sha256": hashlib.sha256((work / "q.sql").read_bytes()).hexdigest()}]
    proc = _verify(run, tmp_path, shm_dir)
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "advice").glob("advise-*"))) == 1 and len(list((tmp_path / "advice").glob("sql-*"))) == 1
