"""dbtier advise on a MariaDB run: a run built so the answer is known (one table read at random, a bigger
one read in sequence, on a disk) gets that answer in InnoDB's terms (tables, the redo log, undo, temp,
the system tablespace); the shell script it writes rebuilds the table where the advice puts it, run
for real against a MariaDB server; the advice verified live; --catalog picks volumes for its parts."""

from __future__ import annotations

import json
import random

import pytest

from dbtier.engines.mariadb import binaries, placement as placement_mod
from tests.conftest import dbtier

LOOKUPS = 300
#: two 7,000-byte rows a 16 KiB page: 3,000 rows are about 24 MB, read at random through the key
SETUP = ("CREATE TABLE lookups (id INT PRIMARY KEY, pad VARCHAR(7000));\n"
         "INSERT INTO lookups SELECT seq, repeat('x', 7000) FROM seq_1_to_3000;\n"
         "CREATE TABLE scanned (id INT PRIMARY KEY, pad CHAR(250));\n"
         "INSERT INTO scanned SELECT seq, repeat('y', 250) FROM seq_1_to_140000;\n")


@pytest.fixture(scope="module")
def recorded(module_shm_dir, tmp_path_factory):
    """On a disk, direct I/O, a buffer pool of 8 MB, from a cold cache: `scanned` read once, then 300
    random rows of `lookups`."""
    work = tmp_path_factory.mktemp("advise-innodb")
    (work / "setup.sql").write_text(SETUP)
    ids = list(range(1, 3001))
    random.Random(7).shuffle(ids)
    (work / "run.sql").write_text("SELECT count(*) FROM scanned;\n"
                                  + "".join(f"SELECT length(pad) FROM lookups WHERE id = {i};\n" for i in ids[:LOOKUPS]))
    out = work / "runs"
    dbtier("run", "sql", "--engine", "mariadb", "--setup", str(work / "setup.sql"), "--run", str(work / "run.sql"),
           "-d", "hdd=hdd-sata-7200", "--cache", "8MB", "--trace", "-q", "--workspace", str(module_shm_dir),
           "--output", str(out), check=True)
    return next(out.glob("sql-*"))


def advise(run_dir, out, *args) -> dict:
    path = out / "a.json"
    dbtier("advise", str(run_dir), *args, "--json", str(path), "-q", "--output", str(out / "out"), check=True)
    return json.loads(path.read_text())


def test_the_randomly_read_table_goes_to_flash_and_its_script_moves_it(recorded, tmp_path, module_shm_dir):
    doc = advise(recorded, tmp_path, "--fast", "ssd=ssd-sata-mlc", "--budget", "32MB",
                 "--workspace", str(module_shm_dir))
    best, objects = doc["recommended"], {o["name"]: o for o in doc["objects"]}
    assert doc["engine"] == "mariadb"
    # InnoDB's candidates: its tables (their indexes inside), the redo log by its role, the system tablespace
    assert objects["lookups"]["kind"] == "table" and objects["log"]["kind"] == "log"
    assert objects["system"]["kind"] == "system" and not [n for n in objects if n.endswith(("_pkey", "PRIMARY"))]
    assert not [n for n in objects if n.startswith("mysql.")]  # the server's own tables go with the system's
    # each lookup reads its row's page from the disk, at random (and most the page after it: 534 reads for
    # 300 lookups, 291 of them random, measured)
    assert objects["lookups"]["random_reads"] >= LOOKUPS * 0.9, objects["lookups"]
    assert 32 << 20 < objects["scanned"]["bytes"] and objects["lookups"]["bytes"] < 32 << 20
    assert "lookups" in best["fast"] and "scanned" not in best["fast"], best
    where = placement_mod.parse([best["place"]], ["hdd", "ssd"])  # the --place text does what it says
    assert where.device_for("lookups", "table") == "ssd" and where.device_for("scanned", "table") == "hdd"
    # the random reads were the run's wait: the advice takes nearly all of their disk time off the run
    # (0.90-0.94 of it in 6 runs, three at once; a figure of the devices' models). Its speed-up is not one:
    # the recording's CPU time is as loaded as the host (2.11-2.35x in those runs, 1.92x once in CI)
    saved = doc["baseline_value"] - best["value"]
    assert saved >= 0.7 * objects["lookups"]["device_s"], (saved, objects["lookups"])
    assert any("verify it live (--verify K)" in n for n in doc["notes"])  # what the replay cannot foresee
    # what a DBA runs: the table rebuilt in a folder on the SSD, its time from the models
    (script,) = (tmp_path / "out").glob("advise-sql-*/migration.sh")
    text = script.read_text()
    assert doc["migration"]["file"] == "migration.sh" and 'rebuild lookups "$DIR_SSD"' in text, text
    (move,) = [m for m in doc["migration"]["moves"] if m["name"] == "lookups"]
    assert move["to"] == "ssd" and move["seconds"] > 0
    # ... and it does so against a real server: a smaller lookups, rebuilt in a folder the server can
    # write, its rows all there after the swap, its file where the script put it. The folder is on the
    # lab's own device, beside its data directory (the server's working directory; InnoDB makes the
    # folder): a table moved outside the lab would be refused, its I/O on no emulated device
    folder = "/proc/self/cwd/../a-folder-on-the-ssd"
    setup = tmp_path / "small.sql"
    setup.write_text("CREATE TABLE lookups (id INT PRIMARY KEY, pad VARCHAR(100), KEY by_pad (pad));\n"
                     "INSERT INTO lookups SELECT seq, concat('row ', seq) FROM seq_1_to_1000;\n")
    check = ("$MARIADB \"$DB\" -N -e \"SELECT count(*), count(DISTINCT pad) FROM lookups; SELECT FILENAME FROM "
             "information_schema.INNODB_SYS_TABLESPACES WHERE NAME = concat('$DB', '/lookups'); SHOW INDEX FROM lookups\"")
    client = binaries.find().exe("mariadb")  # the lab's install's client, as a DBA's own would be on the PATH
    run = dbtier("run", "client", "--engine", "mariadb", "-d", "hdd=ram-san", "--setup", str(setup), "--workspace",
                 str(module_shm_dir), "--output", str(tmp_path / "runs"), "--",
                 "sh", "-c", f'export DB="$MYSQL_DATABASE" MARIADB="{client} --no-defaults --user=$MYSQL_USER" DIR_SSD={folder} '
                 f'DIR_HDD={folder}; sh {script} && {check}')
    assert run.returncode == 0, run.stderr
    (said,) = (tmp_path / "runs").glob("client-*/client.stdout")
    lines = said.read_text().splitlines()
    told = "now the server's moves, with it stopped (below); then: sh migration.sh after"
    assert (told in lines) == bool(doc["migration"]["server"]), lines  # (temp's, when the advice moves it)
    lines = [ln for ln in lines if ln != told]
    assert lines[0].split() == ["1000", "1000"], lines
    assert lines[1].startswith(folder) and lines[1].endswith("/lookups.ibd"), lines
    assert any("by_pad" in ln for ln in lines[2:]), lines


def test_verify_runs_the_advice_live(recorded, tmp_path, module_shm_dir):
    doc = advise(recorded, tmp_path, "--fast", "ssd=ssd-sata-mlc", "--budget", "32MB", "--verify", "1",
                 "--workspace", str(module_shm_dir))
    (v,) = doc["verify"]
    assert v["place"] == doc["recommended"]["place"]
    # this run's advice is understated by the replay: 0.86-0.88 of the live run alone, 0.82 beside another
    # module (2026-11-29), the table scan's reads on the disk taking 5.6 s of device time live against
    # 3.7 s predicted (4.7 s recorded with temp's writes among them; the cause not found, docs/advise.md).
    # The module runs beside others (the recording and the live run each as loaded as the machine is):
    # a check that the live run is the placement predicted, not of the replay's accuracy
    assert 0.6 * v["measured"] <= v["predicted"] <= 1.6 * v["measured"], v
    # the workload made again is told its engine, as the run's was (oltp's terminals and schema are
    # MariaDB's then: an oltp advice's verification once loaded PostgreSQL's schema into MariaDB)
    from dbtier.advisor import verify
    from dbtier.prediction import recording
    assert verify.workload_of(recording.load(recorded)).engine == "mariadb"


def test_a_catalog_chooses_volumes_for_innodbs_parts(recorded, tmp_path, module_shm_dir):
    doc = advise(recorded, tmp_path, "--catalog", "aws", "--max-cost", "40", "--volumes", "2",
                 "--workspace", str(module_shm_dir))
    best = doc["recommended"]
    parts = {p for v in best["volumes"] for p in v["parts"]}
    assert parts <= {"data", "log", "undo", "temp", "binlog"} and "data" in parts, best
    assert set(doc["parts"]) <= {"data", "log", "undo", "temp", "binlog"}, doc["parts"]
    assert best["cost"] <= 40 and best["value"] > 0
    assert placement_mod.parse([best["place"]], [v["name"] for v in best["volumes"]])  # a --place MariaDB takes


def test_a_moving_data_directory_orders_the_rebuilds_around_the_servers_moves(tmp_path):
    """The data directory moves to a new SSD: a table bound to stay on the disk is rebuilt there first
    (else it would go with it), one kept apart on an old SSD and bound for the new data directory is
    rebuilt into it after the server's moves (`sh migration.sh after`); a device named with a '-' has a
    folder variable the shell takes; the script parses (sh -n)."""
    import subprocess

    from dbtier.advisor import migration_innodb
    from dbtier.advisor.candidates import Candidate
    from dbtier.devices.profile import load

    cands = [Candidate("leaves", "table", 20 << 20, ""), Candidate("joins", "table", 5 << 20, ""),
             Candidate("rides", "table", 8 << 20, ""), Candidate("system", "system", 12 << 20, ""),
             Candidate("log", "log", 96 << 20, "")]
    roles = placement_mod.ROLES
    now = placement_mod.Placement({r: "disk" for r in roles}, {"joins": "old-ssd"})
    then = placement_mod.Placement({**{r: "new-ssd" for r in roles}, "log": "disk"}, {"leaves": "disk"})
    disk, ssd = load("hdd-sata-7200"), load("ssd-sata-mlc")
    steps = migration_innodb.plan(cands, now, then, {"disk": disk, "new-ssd": ssd, "old-ssd": ssd}, "system")
    assert [(m.name, m.target) for m in steps["before"]] == [("leaves", "disk")]
    assert [(m.name, m.target) for m in steps["after"]] == [("joins", "new-ssd")]  # "rides" goes with the directory
    data = next(s for s in steps["server"] if s["role"] == "data")
    assert data["to"] == "new-ssd" and data["bytes"] == (12 + 8) << 20 and data["setting"] == "datadir"
    assert "log" not in {s["role"] for s in steps["server"]}
    text = migration_innodb.script(steps, {"disk": "hdd-sata-7200", "new-ssd": "ssd-sata-mlc"}, "a title")
    assert 'DIR_NEW_SSD="${DIR_NEW_SSD:-/mnt/new-ssd/mariadb}"' in text
    first, later = text.split("\nfi\n")
    assert '  rebuild leaves "$DIR_DISK"' in first and "exit 0" in first and "rebuild joins" not in first
    assert "  rebuild joins\n" in later and "set datadir to a folder on new-ssd" in later
    script = tmp_path / "migration.sh"
    script.write_text(text)
    checked = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
