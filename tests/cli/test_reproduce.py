"""`dbtier reproduce`: one article end to end (the figures beside the article's, with reasons, in the
terminal, result.json and report.html), and bad input."""

import json

from tests.conftest import dbtier, dbtier_in_terminal, shown_whole


def test_only_an_unknown_article_is_refused(tmp_path):
    proc = dbtier("reproduce", "--only", "000,009", "-o", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert "no seed article 009" in proc.stderr and not list(tmp_path.iterdir())


def test_seed_001_quick(tmp_path, shm_dir):
    rc, shown = dbtier_in_terminal("reproduce", "--quick", "--only", "001", "-o", str(tmp_path),
                                   "--workspace", str(shm_dir), columns=80)
    assert rc == 0, shown[-2000:]
    report = shown[shown.index("seed 001: "):]  # from the figures on: the progress display redraws itself
    assert "3-10%" in report and "measured reason" in " ".join(report.split())  # a header may wrap
    assert max(len(line) for line in report.splitlines()) <= 80
    (run,) = tmp_path.glob("reproduce-*")
    doc = json.loads((run / "result.json").read_text())
    assert doc["kind"] == "reproduce" and doc["quick"] is True
    (art,) = doc["articles"]
    assert art["seed"] == "001" and not art["failures"]
    assert [f["article"] for f in art["figures"]] == ["3-10%", "70-85%", "under 20%"]
    for f in art["figures"]:
        assert f["ours"].count("%") == 3 and f["reason"] and f["agrees"] in (True, False)
        assert shown_whole(report, f["ours"])  # 80 columns: wrapped between figures, never inside one
    assert all(r["summary"]["checks"]["amcheck"] == "clean" for r in art["runs"])
    assert (run / "seed001" / "index-on-ssd" / "result.json").exists()
    html = (run / "report.html").read_text()
    assert "seed 001" in html and "measured reason" in html
    assert not list(shm_dir.glob("lab-*"))
