"""Seed 000's table and its two workloads on a real server: the table's shape (one ~8 KiB row per
page, unique GUIDs), the same data for the same seed, and the plans the scenarios depend on."""

import pytest

from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import Lab, LabOptions
from dbtier.devices.spec import parse_all
from dbtier.workloads import registry
from dbtier.workloads.base import QuietProgress, WorkloadError


@pytest.fixture
def lab(shm_dir):
    with Lab(parse_all(["ssd=ssd-sata-mlc"]), placement.parse([], ["ssd"]), LabOptions(workspace=shm_dir),
             say=lambda _l: None) as lab:
        yield lab


def test_table_t_has_one_row_per_page_and_unique_guids(lab):
    work = registry.get("random-index")(rows=300, data_seed=7)
    work.prepare(lab.handle, QuietProgress())
    with lab.connect() as conn:
        pages, rows, distinct, width, guid = conn.execute(
            "SELECT pg_relation_size('t') / 8192, count(*), count(DISTINCT attribute), "
            "avg(pg_column_size(t.*))::int, min(attribute) FROM t").fetchone()
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN SELECT * FROM t WHERE attribute = 'x'"))
    assert rows == distinct == 300 and pages == 300
    assert 7600 < width < 8160  # a row fills its page, as on the seed's 8K server
    assert len(guid) == 32 and int(guid, 16) >= 0
    assert "Index Scan using t_attribute_idx" in plan
    assert sorted(work.keys) != work.keys  # the lookup order is shuffled


def test_same_seed_same_data(shm_dir):
    keys = []
    for _ in range(2):
        with Lab(parse_all(["ssd=ssd-sata-mlc"]), placement.parse([], ["ssd"]), LabOptions(workspace=shm_dir),
                 say=lambda _l: None) as lab:
            work = registry.get("table-scan")(rows=50, scans=5, data_seed=3)
            work.prepare(lab.handle, QuietProgress())
            keys.append(work.keys)
    assert keys[0] == keys[1] and len(keys[0]) == 5


def test_table_scan_refuses_an_index_plan(lab):
    from dbtier.workloads import seed000
    from dbtier.workloads.table_scan import PostgresScans

    with lab.connect() as conn:
        seed000.create_table(lab.handle, conn, 50, 1, QuietProgress())
        conn.execute("ANALYZE t")
        PostgresScans.check_plan(conn)  # no index: a sequential scan
        conn.execute("CREATE INDEX ON t (attribute)")  # a user's index would turn scans into lookups
        with pytest.raises(WorkloadError, match="expected a sequential scan"):
            PostgresScans.check_plan(conn)
