"""--place: roles, objects, defaults, and the one-line errors for bad input."""

import pytest

from dbtier.errors import UserError
from dbtier.engines.postgres.placement import parse, tablespace_of


def test_defaults_follow_data_and_first_device():
    p = parse([], ["hdd", "ssd"])
    assert p.roles == {"data": "hdd", "indexes": "hdd", "wal": "hdd", "temp": "hdd", "dump": "hdd"}
    p = parse(["data=ssd"], ["hdd", "ssd"])
    assert set(p.roles.values()) == {"ssd"}


def test_roles_and_objects():
    p = parse(["data=hdd,wal=ssd", "temp=hdd, T_Attribute_Idx=ssd"], ["hdd", "ssd"])
    assert p.roles == {"data": "hdd", "indexes": "hdd", "wal": "ssd", "temp": "hdd", "dump": "hdd"}
    assert p.objects == {"t_attribute_idx": "ssd"}
    assert p.device_for("t_attribute_idx", "index") == "ssd"
    assert p.device_for("t", "table") == "hdd"
    assert p.tablespace_for("other_idx", "index") == "dev_hdd"
    assert tablespace_of("fast-1") == "dev_fast_1"


@pytest.mark.parametrize("text, message", [
    ("data", "expected KEY=DEVICE"),
    ("data=", "expected KEY=DEVICE"),
    ("data=sdd", "did you mean ssd"),
    ("wal=ssd,wal=hdd", "placed twice"),
    ("9x=ssd", "neither a role"),
])
def test_bad_place(text, message):
    with pytest.raises(UserError, match=message):
        parse([text], ["hdd", "ssd"])


def test_unknown_object_names_the_workload_objects():
    p = parse(["t_attribute_ix=ssd"], ["hdd", "ssd"])
    with pytest.raises(UserError, match="did you mean t_attribute_idx"):
        p.check_objects({"t": "table", "t_attribute_idx": "index"}, "workload random-index")


def test_device_names_must_map_to_distinct_tablespaces():
    with pytest.raises(UserError, match="differ only"):
        parse([], ["fast-1", "fast_1"])
