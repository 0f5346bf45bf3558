"""The built-in workloads on InnoDB (`--engine mariadb`). Seed 000: the table's shape (two ~8 KiB rows
to a 16 KiB page, unique GUIDs, the same data for the same seed), the random lookups through the
GUID's index, each reading the row's page from the disk it is placed on, and the full scans reading
the whole table each time; the trace's bytes against InnoDB's own count of what it read. Seed 003:
the insert loop, one commit, its redo log on a disk of its own."""

import json

import pytest

from dbtier.engines.mariadb import PAGE_BYTES as PAGE
from tests.conftest import dbtier

ROWS = 1000


def run(shm, out, *args) -> dict:
    path = out / f"r{len(list(out.glob('r*.json')))}.json"
    dbtier("run", *args, "--engine", "mariadb", "--workspace", str(shm), "--output", str(out), "--json", str(path),
           "-q", check=True)
    return json.loads(path.read_text())


def innodb_read(doc: dict) -> int:
    """The bytes the trace saw read from InnoDB's tablespaces (its counters leave out the redo log and
    the server's other files)."""
    return sum(r["read_bytes"] for r in doc["object_io"] if r["kind"] in ("table", "system", "undo", "temp"))


def reads(doc: dict, obj: str) -> dict:
    return {r["device"]: r["reads"] for r in doc["object_io"] if r["object"] == obj}


def test_random_lookups_read_each_rows_page_from_its_disk(module_shm_dir, tmp_path):
    # a pool of 768 pages for a table of about 500: InnoDB's default innodb_lru_scan_depth would keep
    # 1,024 pages free and the table would not stay (measured: 838 reads for 501 pages); the lab's keeps 100
    doc = run(module_shm_dir, tmp_path, "random-index", "--rows", str(ROWS), "--cache", "12MB", "-d",
              "flash=ssd-sata-mlc", "-d", "disk=hdd-sata-7200", "--place", "t=disk")
    assert doc["metrics"]["found"] == doc["metrics"]["lookups"] == ROWS
    pages = doc["metrics"]["table_pages"]
    assert ROWS / 2 <= pages <= ROWS / 2 * 1.3  # two rows to a page, and InnoDB's extents' slack
    on_disk = reads(doc, "t")["disk"]
    # from a cold buffer pool that holds the table: each page of the rows read once, with the index's
    # pages and the clustered index's upper levels (544 reads for 501 pages of rows, once)
    assert 0.9 * pages <= on_disk <= 1.15 * pages + 20, (on_disk, pages)
    assert innodb_read(doc) == pytest.approx(doc["innodb_status"]["Innodb_data_read"], rel=0.02)
    # each lookup through the index (a scan would read every row for each key), waiting for the disk:
    # its time for the table's reads is most of the run's (about 80%)
    assert doc["innodb_status"]["Handler_read_rnd_next"] < ROWS
    disk_s = sum(r["device_s"] for r in doc["object_io"] if r["object"] == "t")
    assert disk_s > 0.5 * doc["elapsed_s"], (disk_s, doc["elapsed_s"])
    assert doc["lab"]["placement"]["objects"] == {"t": "disk"}


def test_the_index_cannot_be_placed_apart_from_its_table(module_shm_dir, tmp_path):
    proc = dbtier("run", "random-index", "--engine", "mariadb", "--rows", "10", "-d", "flash=ssd-sata-mlc", "-d",
                  "disk=hdd-sata-7200", "--place", "t_attribute_idx=disk", "--workspace", str(module_shm_dir),
                  "--output", str(tmp_path))
    assert proc.returncode == 2 and "t_attribute_idx is an index, and InnoDB keeps every index in its table's file" \
        in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_full_scans_read_the_table_each_time(module_shm_dir, tmp_path):
    """A buffer pool of a third of the table: each scan reads it whole from the disk."""
    args = ("table-scan", "--rows", "2000", "--scans", "3", "--cache", "6MB", "-d", "disk=hdd-sata-7200")
    doc = run(module_shm_dir, tmp_path, *args)
    pages = doc["metrics"]["table_pages"]
    assert doc["metrics"]["rows_returned"] == 3
    table = next(r for r in doc["object_io"] if r["object"] == "t")
    assert table["read_bytes"] >= 2.5 * pages * PAGE, (table["read_bytes"], pages)
    assert innodb_read(doc) == pytest.approx(doc["innodb_status"]["Innodb_data_read"], rel=0.02)


def test_the_same_seed_makes_the_same_rows(module_shm_dir):
    from dbtier.devices.spec import parse_all
    from dbtier.engines.mariadb import placement
    from dbtier.engines.mariadb.lab import Lab, LabOptions
    from dbtier.workloads import seed000_innodb
    from dbtier.workloads.base import QuietProgress

    digests = []
    for seed in (3, 3, 4):
        with Lab(parse_all(["d=ssd-sata-mlc"]), placement.parse([], ["d"]), LabOptions(workspace=module_shm_dir),
                 say=lambda _l: None) as lab:
            seed000_innodb.create_table(lab.handle, 300, seed, QuietProgress())
            (digest, width, distinct), = lab.handle.execute(
                "SELECT md5(group_concat(concat_ws('|', owner, object_name, data_object_id, object_type, created, "
                "attribute) ORDER BY object_id SEPARATOR ',')), avg(length(padding1) + length(padding2)), "
                "count(DISTINCT attribute) FROM t")
            digests.append(digest)
            assert distinct == 300 and width == 7500
    assert digests[0] == digests[1] != digests[2]


def test_the_insert_loop_commits_once_and_its_redo_goes_to_the_log_device(module_shm_dir, tmp_path):
    rows = 20000
    doc = run(module_shm_dir, tmp_path, "insert-loop", "--rows", str(rows), "-d", "flash=ssd-sata-mlc", "-d",
              "disk=hdd-sata-7200", "--place", "log=disk")
    assert doc["metrics"]["inserts"] == rows and doc["checks"] == {"rows": rows, "check_table": "OK"}
    log = next(r for r in doc["object_io"] if r["object"] == "redo log")
    assert log["device"] == "disk" and log["flushes"] >= 1
    assert log["write_bytes"] == pytest.approx(doc["innodb_status"]["Innodb_os_log_written"], rel=0.02)
    assert doc["innodb_status"]["Handler_write"] >= rows
