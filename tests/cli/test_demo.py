"""`dbtier demo` (its quick sizes): seed 000 as `reproduce --only 000` runs it, in a short view, and
the run directory it writes."""

import json

from dbtier.report import verdict
from tests.conftest import dbtier_in_terminal, retry_while_host_steals


def test_demo_is_seed_000s_reproduction_in_a_short_view(tmp_path, shm_dir):
    def attempt():
        for old in tmp_path.glob("demo-*"):
            for f in sorted(old.rglob("*"), reverse=True):
                f.unlink() if f.is_file() or f.is_symlink() else f.rmdir()
            old.rmdir()
        rc, shown = dbtier_in_terminal("demo", "--quick", "-o", str(tmp_path), "--workspace", str(shm_dir), columns=80)
        assert rc == 0, shown
        (run,) = tmp_path.glob("demo-*")
        return shown, run, json.loads((run / "result.json").read_text())

    def shape(result):
        (art,) = result[2]["articles"]
        figures = {f["claim"]: f["our_value"] for f in art["figures"]}
        lookups = figures["random index lookups, SSD speed-up"]
        scans = figures["full table scans, SSD speed-up"]
        # Random lookups: the seek and rotation vanish (seed 000: 21x); full scans are transfer-bound on
        # both devices, a few times at most (seed 000: 2.17x).
        assert lookups > 10 and 1.2 < scans < lookups / 2, (lookups, scans)

    shown, run, doc = retry_while_host_steals(attempt, shape)
    (art,) = doc["articles"]
    assert doc["kind"] == "reproduce" and doc["quick"] is True and art["seed"] == "000"
    assert [r["key"] for r in art["runs"]] == ["random-hdd", "random-ssd", "scan-hdd", "scan-ssd"]
    assert art["scale_model"]["factor"] > 100  # the article's table, scaled: the same as reproduce runs
    assert {tuple(d) for r in art["runs"] for d in r["devices"]} == {("hdd", "hdd-sata-7200"),
                                                                     ("ssd", "ssd-sata-mlc-sata2")}
    flat = " ".join(shown.split())
    # the answer first: the verdict, then the figures with their reasons, then the runs
    answer = " ".join(" ".join(verdict.reproduce(doc)).split())
    # (a table's cells may wrap at 80 columns; its title wraps only between words)
    assert -1 < flat.find(answer) < flat.find("seed 000: ASE 15.7: SSD against HDD") < flat.find("the runs")
    assert "21.0x" in flat and "2.17x" in flat  # the article's figures, beside ours
    for r in art["runs"]:
        assert r["summary"]["server_cpu_s"] > 0 and r["summary"]["io_wait_s"] > 0
        assert (run / "seed000" / r["key"] / "server.log").exists()
    html = (run / "report.html").read_text()
    assert html.count("<svg") >= 1 and "random index lookups" in html and "<script" not in html
    assert not list(shm_dir.glob("dbtier-*/lab-*"))
