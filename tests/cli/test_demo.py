"""`dbtier demo`: runs, shows seed 000's shape at the device level, writes its result."""

import json

from tests.conftest import dbtier


def test_demo_shape_and_result(tmp_path):
    proc = dbtier("demo", "-o", str(tmp_path), check=True)
    assert "SSD speed-up" in proc.stdout
    (result,) = tmp_path.glob("demo-*/result.json")
    doc = json.loads(result.read_text())
    assert doc["schema_version"] == 1
    speedups = {w["workload"].split()[0]: w["speedup"] for w in doc["workloads"]}
    # Random reads: seek and rotation vanish (seed 000: 21x). Scans: transfer-bound (seed 000: 2.17x).
    assert speedups["random"] > 10
    assert 1.3 < speedups["sequential"] < 4
    for w in doc["workloads"]:
        for run in w["runs"]:
            assert run["reads"] in (500, 1500)
            assert run["iostat"]["%util"] > 50
