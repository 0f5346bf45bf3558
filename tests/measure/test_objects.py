"""Objects named from a real server's catalog: a TOAST table and its index carry their owner's name,
in the connected database and in another one."""

from dbtier.devices.spec import parse_all
from dbtier.engines.postgres import placement
from dbtier.engines.postgres.cluster import DATABASE
from dbtier.engines.postgres.lab import Lab, LabOptions
from dbtier.measure import objects


def test_toast_relations_are_named_after_their_table(shm_dir):
    with Lab(parse_all(["d=ram-san"]), placement.parse([], ["d"]), LabOptions(workspace=shm_dir),
             say=lambda _l: None) as lab:
        with lab.connect() as conn:
            conn.execute("CREATE TABLE doc (id int PRIMARY KEY, body text)")
        lab.create_database("other")
        with lab.connect("other") as conn:
            conn.execute("CREATE TABLE notes (body text)")
        names = objects.cluster_names(lab.connect, DATABASE)
    found = sorted(v for v in names.values() if "doc" in v[0] or "notes" in v[0])
    assert found == [("doc", "table"), ("doc (TOAST)", "toast"), ("doc (TOAST)", "toast"), ("doc_pkey", "index"),
                     ("other.notes", "table"), ("other.notes (TOAST)", "toast"), ("other.notes (TOAST)", "toast")]
    assert ("pg_class", "catalog") in names.values()
