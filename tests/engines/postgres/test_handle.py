"""The lab as a workload sees it: SQL, client programs run as the lab runs them, and every object
with its device."""

import pytest
from psycopg import sql

from dbtier.devices.spec import parse_all
from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import Lab, LabOptions


@pytest.fixture(scope="module")
def db(module_shm_dir):
    reqs = parse_all(["hdd=ram-san", "ssd=ram-san"])
    with Lab(reqs, placement.parse(["data=hdd,indexes=ssd"], ["hdd", "ssd"]), LabOptions(workspace=module_shm_dir),
             say=lambda _l: None) as lab:
        yield lab.handle


def test_execute_returns_rows_and_runs_statements_without(db):
    db.execute("CREATE TABLE h (id int PRIMARY KEY, v text)")
    assert db.execute("INSERT INTO h SELECT g, 'x' FROM generate_series(1, 10) g") == []
    assert db.execute("SELECT count(*), %s FROM h", ("p",)) == [(10, "p")]


def test_clients_run_as_the_servers_user_on_the_labs_socket(db):
    proc = db.client("psql", "-XAtc", "SELECT current_user, inet_server_addr() IS NULL", db.database).run()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "dbtier|t"  # the superuser, over the unix socket
    who = db.client("psql", "-XAtc", r"\! id -u", db.database).run()
    assert who.returncode == 0 and int(who.stdout.strip()) == db._lab.user.uid
    with pytest.raises(ValueError):
        db.client("rm", "-rf", "/")


def test_objects_lists_every_relation_with_its_device(db):
    with db.connect() as conn:
        conn.execute("CREATE SCHEMA sales")
        conn.execute("CREATE TABLE sales.sale (id int, sold_on date) PARTITION BY RANGE (sold_on)")
        conn.execute("CREATE TABLE sales.sale_2026 PARTITION OF sales.sale FOR VALUES FROM ('2026-01-01') "
                     "TO ('2027-01-01')")
        conn.execute("CREATE INDEX sale_sold_on_idx ON sales.sale (sold_on)")
        conn.execute("CREATE MATERIALIZED VIEW hv AS SELECT * FROM h")
        conn.execute(sql.SQL("CREATE INDEX hv_idx ON hv (id) {}").format(db.tablespace("hv_idx", "index")))
    found = {o.qualified: o for o in db.objects()}
    assert found["h"].kind == "table" and found["h"].device == "hdd" and found["h"].bytes > 0
    assert found["h_pkey"].kind == "index" and found["h_pkey"].table == "h"
    assert found["hv"].kind == "materialized view"
    assert found["hv_idx"].device == "ssd"
    assert found["sales.sale"].kind == "table" and found["sales.sale_2026"].kind == "table"
    assert found["sales.sale_sold_on_idx"].kind == "index"
    assert not any(o.schema.startswith("pg_") for o in found.values())
