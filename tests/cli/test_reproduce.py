"""`dbtier reproduce`: one article end to end (the figures beside the article's, with reasons, in the
terminal, result.json and report.html), and bad input."""

import json

from tests.conftest import dbtier, dbtier_in_terminal, shown_whole


def test_only_an_unknown_article_is_refused(tmp_path):
    proc = dbtier("reproduce", "--only", "000,009", "-o", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert "no seed article 009" in proc.stderr and not list(tmp_path.iterdir())


def test_seed_001_quick_on_both_engines(tmp_path, shm_dir):
    """A column per engine: PostgreSQL's figures measured, MariaDB's not run (InnoDB cannot place an
    index apart from its table), with that reason; no MariaDB server is started for it."""
    rc, shown = dbtier_in_terminal("reproduce", "--quick", "--only", "001", "--engine", "postgres,mariadb",
                                   "-o", str(tmp_path), "--workspace", str(shm_dir), columns=80)
    assert rc == 0, shown[-2000:]
    report = shown[shown.index("seed 001: "):]  # from the figures on: the progress display redraws itself
    words = " ".join(report.split())  # a header may wrap
    assert "3-10%" in report and "PostgreSQL" in words and "MariaDB" in words and "measured reason" in words
    assert max(len(line) for line in report.splitlines()) <= 80
    assert "On one engine or the other: 0 of the 0 figures with a number" in " ".join(shown.split())
    (run,) = tmp_path.glob("reproduce-*")
    doc = json.loads((run / "result.json").read_text())
    assert doc["kind"] == "reproduce" and doc["quick"] is True and doc["engines"] == ["postgres", "mariadb"]
    art, maria = doc["articles"]
    assert (art["seed"], art["engine"], maria["seed"], maria["engine"]) == ("001", "postgres", "001", "mariadb")
    assert not art["failures"] and not maria["failures"]
    assert [f["article"] for f in art["figures"]] == ["3-10%", "70-85%", "under 20%"]
    for f in art["figures"]:
        assert f["ours"].count("%") == 3 and f["reason"] and f["agrees"] in (True, False)
        assert shown_whole(report, f["ours"])  # 80 columns: wrapped between figures, never inside one
    assert all(r["summary"]["checks"]["amcheck"] == "clean" for r in art["runs"])
    assert (run / "seed001" / "index-on-ssd" / "result.json").exists()
    for f in maria["figures"]:
        assert f["ours"] == "-" and f["reason"].startswith("index-on-raid, index-on-ssd: InnoDB keeps")
    assert set(maria["not_run"]) == {"index-on-raid", "index-on-ssd"} and not (run / "seed001-mariadb").exists()
    html = (run / "report.html").read_text()
    assert "seed 001" in html and "measured reason" in html and "runs on MariaDB" in html
    assert not list(shm_dir.glob("lab-*"))


def test_engines_are_checked_before_anything_runs(tmp_path):
    for args, said in ((("--engine", "oracle"), "--engine oracle: not an engine dbtier runs"),
                       (("--engine", ","), "--engine ',': give an engine"),
                       (("--mariadb-bin", str(tmp_path)), "--mariadb-bin is for --engine mariadb"),
                       (("--engine", "mariadb", "--cluster", "127.0.0.1:1"), "nothing answers there")):
        proc = dbtier("reproduce", "--only", "001", "-o", str(tmp_path), *args)
        assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and said in proc.stderr, proc.stderr
    assert not list(tmp_path.iterdir())
