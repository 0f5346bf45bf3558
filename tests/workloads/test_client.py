"""`dbtier run client` on real servers: sysbench (the distribution's, which nobody here wrote) against
the lab with a placement, its per-object I/O and a trace that predict reads; psql as a client that
reads libpq's environment; a schema naming roles the lab lacks; a client that fails."""

from __future__ import annotations

import json
import shutil
import signal

import pytest

from dbtier.engines.postgres import binaries
from dbtier.workloads import client
from tests.conftest import assert_refused_in_one_line, dbtier

SYSBENCH = ["sysbench", "--db-driver=pgsql", "--pgsql-host=$PGHOST", "--pgsql-port=${PGPORT}",
            "--pgsql-user=$PGUSER", "--pgsql-db=$PGDATABASE", "--tables=2", "--table-size=2000"]

#: a schema as production dumps it: ownership by a role the lab lacks, a grant to one it lacks, and a
#: grant to a role the file makes itself (kept)
SCHEMA = """
CREATE TABLE pets (id int PRIMARY KEY, name text);
ALTER TABLE public.pets OWNER TO postgres;
INSERT INTO pets SELECT g, 'pet ' || g FROM generate_series(1, 500) g;
CREATE ROLE app_reader;
GRANT SELECT ON TABLE public.pets TO app_reader;
GRANT SELECT ON TABLE public.pets TO reporting;
"""


def test_connection_references_are_replaced_and_nothing_else():
    conn = {"PGHOST": "/w/sock", "PGPORT": "5432", "PGUSER": "dbtier", "PGDATABASE": "dbtier"}
    assert client.expand(["--h=$PGHOST", "${PGPORT}x", "$PGUSERS", "$HOME", "$PGDATABASE"], conn) == \
        ["--h=/w/sock", "5432x", "$PGUSERS", "$HOME", "dbtier"]


def test_the_clients_environment_has_the_labs_connection_only(monkeypatch):
    monkeypatch.setenv("PGSERVICE", "production")
    monkeypatch.setenv("PGHOSTADDR", "10.0.0.1")
    env = client.client_env({"PGHOST": "/w/sock", "PGPORT": "5432"})
    assert env["PGHOST"] == "/w/sock" and "PGSERVICE" not in env and "PGHOSTADDR" not in env
    assert env["PATH"]


@pytest.fixture(scope="module")
def sysbench_run(module_shm_dir, tmp_path_factory):
    if shutil.which("sysbench") is None:
        pytest.skip("sysbench is not installed (make system-packages as root, or apt-get install sysbench)")
    out = tmp_path_factory.mktemp("out")
    prepare = " ".join(f"'{a}'" for a in SYSBENCH) + " oltp_read_write prepare"
    dbtier("run", "client", "-d", "hdd=hdd-sata-7200", "-d", "ssd=ssd-sata-mlc", "-p", "data=hdd,sbtest1=ssd",
           "--prepare-command", prepare, "--connections", "2", "--trace", "--workspace", str(module_shm_dir),
           "-o", str(out), "--json", str(out / "r.json"), "-q",
           "--", *SYSBENCH, "--threads=2", "--events=150", "--time=0", "oltp_read_write", "run", check=True)
    (run_dir,) = out.glob("client-*")
    return json.loads((out / "r.json").read_text()), run_dir


def test_sysbench_runs_measured_with_its_tables_placed(sysbench_run):
    result, run_dir = sysbench_run
    assert result["workload"] == "client" and result["metrics"]["exit_status"] == 0
    placed = {o["object"]: o["device"] for o in result["objects"]}
    assert placed["sbtest1"] == "ssd" and placed["sbtest2"] == "hdd" and placed["sbtest1_pkey"] == "hdd"
    io = {o["object"]: o for o in result["object_io"]}
    assert "sbtest1" in io and io["sbtest1"]["device"] == "ssd", sorted(io)
    assert io["sbtest1"]["reads"] + io["sbtest1"]["writes"] > 0
    assert io["WAL"]["writes"] > 0  # read-write transactions committed in the measured interval
    assert result["elapsed_s"] > 0 and result["elapsed_s"] >= result["metrics"]["client_elapsed_s"] * 0.9
    stdout = (run_dir / "client.stdout").read_text()
    assert "sysbench 1.0" in stdout and "total number of events:              150" in stdout
    assert "Creating table 'sbtest1'" in (run_dir / "prepare.stdout").read_text()
    assert result["loaded_cluster"]["reused"] is False  # the prepare command's load, kept for the next run


def test_the_trace_is_read_by_predict(sysbench_run):
    _result, run_dir = sysbench_run
    proc = dbtier("predict", str(run_dir), "-d", "hdd=hdd-sata-7200", "-d", "ssd=ssd-sata-mlc", "--place", "data=ssd",
                  "--json", str(run_dir.parent / "p.json"), "-q", check=True)
    predicted = json.loads((run_dir.parent / "p.json").read_text())
    assert proc.returncode == 0 and predicted["kind"] == "prediction" and predicted["workload"] == "client"
    (phase,) = predicted["phases"]
    assert phase["phase"] == "client" and phase["recorded"]["elapsed_s"] == sysbench_run[0]["elapsed_s"]
    assert 0 < phase["predicted"]["elapsed_s"] < phase["recorded"]["elapsed_s"]  # all on the SSD: faster


def test_a_schema_naming_roles_the_lab_lacks_and_psql_as_the_client(module_shm_dir, tmp_path):
    (tmp_path / "schema.sql").write_text(SCHEMA)
    psql = str(binaries.find(None).exe("psql"))
    out = tmp_path / "out"
    out.mkdir()
    dbtier("run", "client", "--setup", str(tmp_path / "schema.sql"), "-d", "ssd=ssd-sata-mlc",
           "--workspace", str(module_shm_dir), "-o", str(out), "--json", str(out / "r.json"), "-q", "--",
           psql, "-X", "-A", "-t", "-c", "SELECT count(*), has_table_privilege('app_reader', 'pets', 'SELECT') "
           "FROM pets", check=True)
    result = json.loads((out / "r.json").read_text())
    (run_dir,) = out.glob("client-*")
    assert (run_dir / "client.stdout").read_text().strip() == "500|t"  # the role the file made kept its grant
    (note,) = [n for n in result["notes"] if "schema.sql" in n]
    assert "2 ownership and privilege statement(s)" in note and "(postgres, reporting)" in note


def test_a_failing_client_is_one_line(module_shm_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    proc = dbtier("run", "client", "-d", "ssd=ssd-sata-mlc", "--workspace", str(module_shm_dir), "-o", str(out),
                  "--", "sh", "-c", "echo starting; echo 'FATAL: no such table' >&2; exit 3")
    assert_refused_in_one_line(proc, "the client: sh exited with status 3: FATAL: no such table", {"output": out})


@pytest.mark.parametrize("args, message", [
    (["-d", "ssd=ssd-sata-mlc"], "give the client's command after '--'"),
    (["-d", "ssd=ssd-sata-mlc", "--", "no-such-client-program", "run"], "no-such-client-program: no such program"),
    (["-d", "ssd=ssd-sata-mlc", "--prepare-command", "sysbench 'open", "--", "true"], "--prepare-command"),
])
def test_bad_commands_are_refused_before_anything_starts(args, message, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    proc = dbtier("run", "client", "-o", str(out), *args)
    assert_refused_in_one_line(proc, message, {"output": out})


def test_advise_verifies_the_advice_on_a_client_run(sysbench_run, module_shm_dir, tmp_path):
    """The advice is run live: the client again, on a copy of the cluster the recorded run's prepare
    command loaded and kept (no second prepare); its run directory keeps the client's output."""
    _result, run_dir = sysbench_run
    dbtier("advise", str(run_dir), "--fast", "ssd=ssd-sata-mlc", "--budget", "1MB", "--verify", "1", "--workspace",
           str(module_shm_dir), "-o", str(tmp_path), "--json", str(tmp_path / "a.json"), "-q", check=True)
    (verified,) = tmp_path.glob("client-advised-*")
    result = json.loads((verified / "result.json").read_text())
    assert result["workload"] == "client" and result["elapsed_s"] > 0
    assert result["loaded_cluster"] == {**sysbench_run[0]["loaded_cluster"], "reused": True}
    assert "total number of events:              150" in (verified / "client.stdout").read_text()
    assert not (verified / "prepare.stdout").exists()  # nothing prepared again


def test_ctrl_c_stops_the_client_and_leaves_nothing(shm_dir, tmp_path):
    """Ctrl-C while the client runs: the client's whole session is stopped, then the lab, and nothing
    of the run is left (workspace, output folder, processes)."""
    from tests.cli.test_interrupt import leftovers, processes_naming, start
    from tests.engines.postgres.test_lifecycle import wait_for

    # the client's own name, which dbtier's command line does not hold: $PGPORT is replaced for the client
    prefix = f"dbtier-client-test-{tmp_path.name}"
    marker = f"{prefix}-5432"
    out = tmp_path / "out"
    out.mkdir()
    proc = start(["run", "client", "-d", "d=ram-san", "--workspace", str(shm_dir), "-o", str(out), "-q", "--",
                  "sh", "-c", 'sh -c "sleep 600; true" "$0-child" & wait', f"{prefix}-$PGPORT"])
    try:
        # the inner shell, exec'd (a copy of the outer one before its exec names "$0-child", not this)
        wait_for(lambda: proc.poll() is not None or processes_naming(f"{marker}-child"), 300,
                 "the client's child to start")
        assert proc.poll() is None, f"dbtier ended before its client started: {proc.communicate()}"
        proc.send_signal(signal.SIGINT)
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert processes_naming(marker) == [] and leftovers(shm_dir, out) == []


def test_what_a_client_leaves_running_goes_with_it(shm_dir, tmp_path):
    """A client that exits 0 with a helper still running in the background: the helper is stopped at the
    end of the client's run, and the run is reported."""
    from tests.cli.test_interrupt import leftovers, processes_naming

    prefix = f"dbtier-client-bg-{tmp_path.name}"
    out = tmp_path / "out"
    out.mkdir()
    dbtier("run", "client", "-d", "d=ram-san", "--workspace", str(shm_dir), "-o", str(out), "-q", "--",
           "sh", "-c", '(sh -c "sleep 600; true" "$0-helper" &); echo started', f"{prefix}-$PGPORT", check=True)
    (run_dir,) = out.glob("client-*")
    assert (run_dir / "client.stdout").read_text() == "started\n"
    assert processes_naming(f"{prefix}-5432") == [] and leftovers(shm_dir) == []
