"""A MariaDB lab with each InnoDB role on an emulated device of its own and one table on another:
each device's files are the role's, each is written in a measured interval, and nothing is left when
the lab ends. An index cannot be placed apart from its table (InnoDB keeps it in the table's file)."""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

import pytest

from dbtier.errors import UserError

pytestmark = pytest.mark.skipif(shutil.which("apt-get") is None or os.geteuid() != 0,
                                reason="MariaDB's packages come through apt-get; a lab of devices on a tmpfs of its "
                                       "own needs root (a normal user gives the log device a folder)")

ROLES = {"data": "d_data", "log": "d_log", "undo": "d_undo", "temp": "d_temp", "big": "d_table"}


def test_each_role_and_a_table_on_its_own_device(shm_dir):
    from dbtier.devices.spec import parse_all
    from dbtier.engines.mariadb import placement
    from dbtier.engines.mariadb.lab import Lab, LabOptions

    devices = parse_all([f"{d}=ram-san" for d in ROLES.values()])
    place = placement.parse([",".join(f"{k}={v}" for k, v in ROLES.items())], [d.name for d in devices])
    with Lab(devices, place, LabOptions(workspace=shm_dir, cache_bytes=32 << 20,
                                        sets={"sort-buffer-size": "32768", "innodb-max-dirty-pages-pct": "0"}),
             say=lambda _line: None) as lab:
        claim = lab.claim.path
        lab.create_table("big", "id INT PRIMARY KEY, v INT, pad CHAR(200), KEY (v)")
        lab.create_table("small", "id INT PRIMARY KEY, pad CHAR(200)")
        with lab.measure("load") as m:
            with lab.connect() as conn, conn.cursor() as cur, lab.connect() as viewer, viewer.cursor() as view:
                cur.execute("INSERT INTO big SELECT seq, seq % 977, REPEAT('b', 200) FROM seq_1_to_30000")
                cur.execute("INSERT INTO small SELECT seq, REPEAT('s', 200) FROM seq_1_to_3000")
                # a read view older than the update keeps its undo records from purge until the pages
                # are flushed: purged first, their pages would be freed and never written (found so
                # once, three modules at once: 0 bytes to the undo device)
                view.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                cur.execute("UPDATE big SET v = v + 1 WHERE id <= 20000")  # undo records for every row
                cur.execute("SELECT pad, v FROM big ORDER BY v DESC, pad")  # 6 MB sorted in 32 KiB: spills to tmpdir
                assert len(cur.fetchall()) == 30000
                cur.execute("SET GLOBAL innodb_max_dirty_pages_pct = 0")
                import time
                for _ in range(1200):
                    cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")
                    dirty = int(cur.fetchone()[1])
                    if dirty == 0:
                        break
                    time.sleep(0.1)
                assert dirty == 0, f"{dirty} pages still dirty after 2 minutes"
                view.execute("COMMIT")
        files = lab.session.snapshot()["files"]
        wrote = {d["device"]: d["counters"]["write_bytes"] for d in m.result["devices"]}
    on = {}
    for _index, device, path, *_rest in files:
        on.setdefault(device, []).append(Path(path).name)
    names = {d.name: i for i, d in enumerate(devices)}
    assert "big.ibd" in on[names["d_table"]] and "small.ibd" in on[names["d_data"]], on
    # the redo log (made as ib_logfile101 and renamed: the file table keeps the name it first had)
    assert any(n.startswith("ib_logfile") for n in on[names["d_log"]])
    assert not any(n.startswith("ib_logfile") for n in on[names["d_data"]])
    assert {"undo001", "undo002"} <= set(on[names["d_undo"]]), on
    assert "ibdata1" in on[names["d_data"]], on
    # InnoDB's own count of its undo tablespaces' writes: once in 12 runs under load (and once before, in
    # CI), it wrote none while measured, performance_schema agreeing with the trace (0 bytes to either;
    # why InnoDB left them unwritten, with a read view holding them, is not found). The undo device is
    # then held to InnoDB's count, the others to having been written.
    undo_written = sum(r["write_bytes"] for r in m.result["file_io"] if Path(r["file"]).name.startswith("undo"))
    for role, device in ROLES.items():
        if role == "undo":
            assert (wrote[device] > 0) == (undo_written > 0), (wrote, undo_written)
            continue
        assert wrote[device] > 0, (role, wrote, on)
    # InnoDB's own figures beside them: its counters, its timed waits, its I/O per file
    status = m.result["innodb_status"]
    assert status["Handler_write"] >= 33000 and status["Innodb_data_written"] > 0
    assert status["Sort_merge_passes"] > 0  # the sort spilled (to tmpdir, on the temp device)
    assert m.result["top_events"][0]["event"] == "CPU time (measured)" or m.result["top_events"][0]["time_s"] > 0
    assert any(r["event"].startswith("wait/io/file/innodb/") for r in m.result["top_events"]), m.result["top_events"]
    assert any(r["file"].endswith("big.ibd") and r["write_bytes"] > 0 for r in m.result["file_io"])
    # and the I/O per object, named from InnoDB's files, on the devices the placement gave them
    per_object = {(r["object"], r["device"]): r for r in m.result["object_io"]}
    for obj, dev in (("big", "d_table"), ("small", "d_data"), ("redo log", "d_log"), ("undo tablespaces", "d_undo"),
                     ("system tablespace", "d_data"), ("temp files", "d_temp")):
        if obj != "undo tablespaces" or undo_written:
            assert per_object[(obj, dev)]["writes"] > 0, (obj, dev, sorted(per_object))
    assert not claim.exists()  # the lab's tmpfs unmounted, its folders gone


def test_an_index_is_placed_with_its_table():
    from dbtier.engines.mariadb import placement

    place = placement.parse(["data=a,big_v=b"], ["a", "b"])
    with pytest.raises(UserError, match="big_v is an index, and InnoDB keeps every index in its table's file"):
        place.check_objects({"big": "table", "big_v": "index"}, "the workload")
    with pytest.raises(UserError, match="has no table 'bgi'.*did you mean big"):
        placement.parse(["bgi=b"], ["a", "b"]).check_objects({"big": "table"}, "the workload")
    with pytest.raises(UserError, match="no device named 'c'"):
        placement.parse(["log=c"], ["a", "b"])
    assert placement.parse(["log=b"], ["a", "b"]).roles == {"data": "a", "log": "b", "undo": "a", "temp": "a",
                                                           "binlog": "a"}


@pytest.mark.skipif(shutil.which("sysbench") is None, reason="sysbench is not installed (make setup installs it as root)")
def test_sysbench_oltp_on_a_lab(shm_dir):
    """sysbench's own OLTP script (a client nobody here wrote) against a lab whose redo log is on a slow
    disk and whose data is on flash: its commits wait on the log's device, as InnoDB's waits say."""
    import re
    import subprocess

    from dbtier.devices.spec import parse_all
    from dbtier.engines.mariadb import placement
    from dbtier.engines.mariadb.lab import DATABASE, Lab, LabOptions

    devices = parse_all(["flash=ssd-sata-mlc", "disk=hdd-sata-7200"])
    with Lab(devices, placement.parse(["log=disk"], ["flash", "disk"]), LabOptions(workspace=shm_dir),
             say=lambda _line: None) as lab:
        common = ["--db-driver=mysql", f"--mysql-socket={lab.server.socket}", f"--mysql-user={pwd.getpwuid(os.geteuid()).pw_name}",
                  f"--mysql-db={DATABASE}", "--tables=2", "--table-size=5000"]
        prep = subprocess.run(["sysbench", "oltp_read_write", *common, "prepare"], capture_output=True, text=True)
        assert prep.returncode == 0, prep.stderr + prep.stdout
        with lab.measure("oltp") as m:
            run = subprocess.run(["sysbench", "oltp_read_write", *common, "--time=3", "--threads=1", "run"],
                                 capture_output=True, text=True)
        assert run.returncode == 0, run.stderr + run.stdout
    transactions = int(re.search(r"transactions:\s+(\d+)", run.stdout).group(1))
    assert transactions > 10
    rows = {d["device"]: d for d in m.result["devices"]}
    # one client: each commit's redo is flushed by a flush of its own on the disk (none shares a group)
    assert rows["disk"]["counters"]["flushes"] >= transactions, (transactions, rows["disk"]["counters"])
    per_object = {(r["object"], r["device"]) for r in m.result["object_io"]}
    assert ("redo log", "disk") in per_object
    # performance_schema's timed waits: the server's own work; a session idle between statements is the
    # client's time, not a wait of the server's (MariaDB 10.11 does not time its redo log's writes there:
    # the log device's figures above are where they show); nor the table handler's calls, whose time
    # holds the file waits nested in them
    events = [e["event"] for e in m.result["top_events"]]
    assert "idle" not in events and not [e for e in events if e.startswith("wait/io/table/")], events
    assert "CPU time (measured)" in events and len(events) > 1, events


def test_a_scale_model_keeps_a_statements_temporary_table_in_memory():
    """Divided by seed 002's 2,852, MariaDB's 16 MB temporary-table limits would be 5 KiB: TPC-C's
    Stock-Level would write its count to an on-disk Aria table, which the server maps into memory where
    the emulation cannot see it (a run failed so). They stop at 1 MiB, and the account says why."""
    from dbtier.devices.spec import parse_all
    from dbtier.engines.mariadb.lab import LabOptions
    from dbtier.experiments import scale_model

    options, _devices, model = scale_model.apply(2852.0, LabOptions(cache_bytes=21012 << 20),
                                                 parse_all(["disk=hdd-sas-15k"]), "mariadb")
    assert options.sets["tmp-table-size"] == options.sets["max-heap-table-size"] == "1024kB"
    sizes = {s["what"]: s for s in model.describe()["sizes"]}
    assert "Aria" in sizes["tmp-table-size"]["floor"] and sizes["tmp-table-size"]["run"] == 1 << 20
    assert options.sets["sort-buffer-size"] == "32kB" and "minimum" in sizes["sort-buffer-size"]["floor"]
