"""The published JSON schema: a valid Draft 2020-12 schema, checked on every document the suite
writes (conftest sets DBTIER_CHECK_SCHEMA), and strict where it says it is."""

import json

import jsonschema
import pytest

from dbtier.report import jsonout, schema


def a_run(**changes) -> dict:
    figures = {"r/s": 10.0, "w/s": 0.0, "r_await": 5.0, "w_await": 0.0, "%util": 50.0}
    doc = {"kind": "run", "workload": "random-index", "params": {"rows": 10}, "cache_state": "cold",
           "started": "2026-11-25T12:00:00+0000",
           "lab": {"postgres": {"version": "18.6"}, "cache_bytes": 1 << 25, "io_mode": "direct",
                   "placement": {"data": "d", "indexes": "d", "wal": "d", "temp": "d", "objects": {"My Table": "d"}},
                   "devices": [{"name": "d", "profile": "hdd-sata-7200", "kind": "hdd"}]},
           "phase": "run", "elapsed_s": 1.0, "server_cpu_s": 0.1, "io_wait_s": 0.9,
           "devices": [{"device": "d", "profile": "hdd-sata-7200", "kind": "hdd", "iostat": figures,
                        "lateness": {"p50_us": 1.0}, "counters": {"reads": 10}}],
           "top_events": [{"event": "IO:DataFileRead", "time_s": 0.9, "elapsed_pct": 90.0, "waits": 10}],
           "rates": {"lookups_per_s": 10.0}}
    doc.update(changes)
    return doc


def test_the_schema_is_a_valid_schema():
    jsonschema.Draft202012Validator.check_schema(schema.schema())


def test_the_suite_checks_every_document_it_writes():
    assert schema.CHECK_ENV == "DBTIER_CHECK_SCHEMA"
    import os
    assert os.environ.get(schema.CHECK_ENV) == "1"


def test_a_good_document_passes_and_is_written(tmp_path):
    assert schema.problems(json.loads(jsonout.dumps(a_run()))) == []
    jsonout.write(tmp_path / "r.json", a_run())
    assert json.loads((tmp_path / "r.json").read_text())["schema_version"] == 2


@pytest.mark.parametrize("change, where", [
    ({"rates": {"lookups/s": 10.0}}, "rates"),                                  # a key with a slash
    ({"top_events": [{"event": "x", "time_s": 1.0, "%elapsed": 1.0}]}, "top_events/0"),
    ({"cache_state": "warm"}, "cache_state"),
    ({"elapsed_s": -1.0}, "elapsed_s"),
    ({"kind": "runs"}, "kind"),
])
def test_a_bad_document_is_refused_where_it_is_wrong(tmp_path, change, where):
    found = schema.problems({"schema_version": 2, **a_run(**change)})
    assert any(p.startswith(where) for p in found), found
    with pytest.raises(ValueError, match="breaks result.schema.json"):
        jsonout.write(tmp_path / "bad.json", a_run(**change))
    assert not (tmp_path / "bad.json").exists()


def test_data_keys_and_iostat_names_are_free():
    """Maps keyed by data (objects, settings) and iostat's own column names are not ours to rename."""
    assert schema.problems(json.loads(jsonout.dumps(a_run()))) == []  # "My Table", "r/s", "%util"
