"""A setting or device that is not crash-safe is said in the verdict of a run, a comparison and a
prediction, next to the speed it buys; a safe one says nothing."""

from __future__ import annotations

import json

from dbtier.crash import safety
from dbtier.devices import profile as profiles
from dbtier.report import verdict
from tests.conftest import dbtier


def lab(settings: dict, *specs: str) -> dict:
    devices = []
    for spec in specs:
        name, _, prof = spec.partition("=")
        p = profiles.load(prof)
        devices.append({"name": name, "kind": p.kind, "params": p.params})
    return {"settings": settings, "devices": devices}


def test_each_risk_in_words():
    assert safety.risks(lab({}, "ssd=ssd-sata-mlc")) == []
    assert safety.risks(lab({"fsync": "off"}, "ssd=ssd-sata-mlc"))[0].startswith("fsync = off: a power cut can lose")
    assert "synchronous_commit = off" in safety.risks(lab({"synchronous_commit": "'off'"}, "ssd=ssd-sata-mlc"))[0]
    # full_page_writes = off is a risk where a device can tear an 8 KiB page: a disk (512 B) or flash (4 KiB)
    torn = safety.risks(lab({"full_page_writes": "off"}, "hdd=hdd-sata-7200", "ssd=ssd-sata-mlc{atomic_write_kib=8}"))
    assert torn == ["full_page_writes = off on hdd, which can tear an 8 KiB page: a power cut can leave pages half "
                    "written"]
    liar = safety.risks(lab({}, "ssd=ssd-sata-mlc{flush_honoured=0}", "plp=nvme-enterprise-plp{flush_honoured=0}"))
    assert liar == ["ssd ignores flushes with 64 MiB of volatile write cache: a power cut can lose acknowledged "
                    "commits"], "a drive with power-loss protection loses nothing it acknowledged"


def test_a_comparison_says_it_beside_the_speed_up():
    results = [{"elapsed_s": 10.0, "lab": lab({}, "ssd=ssd-sata-mlc")},
               {"elapsed_s": 1.0, "lab": lab({"fsync": "off"}, "ssd=ssd-sata-mlc")}]
    text = verdict.compare(["safe", "fast"], results, [1.0, 10.0], "elapsed s")
    assert text[0].startswith("On fast this workload ran 10.0x faster than on safe")
    assert text[-1] == ("Not crash-safe on fast: fsync = off: a power cut can lose acknowledged commits and corrupt "
                        "the database ('dbtier crash' measures it).")


def test_a_run_with_fsync_off_says_so(shm_dir, tmp_path):
    proc = dbtier("run", "random-index", "-d", "ssd=ssd-sata-mlc", "--rows", "1000", "--set",
                  "fsync=off", "--workspace", str(shm_dir), "-o", str(tmp_path), "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stderr
    assert "Not crash-safe: fsync = off" in " ".join(proc.stdout.split())
    doc = json.loads((tmp_path / "r.json").read_text())
    assert any(s.startswith("Not crash-safe: fsync = off") for s in verdict.run(doc))
