"""A reproduction goes on past a failed run, whatever the failure was, and says which and why."""

from __future__ import annotations

import contextlib

from dbtier.pg.lab import LabOptions
from dbtier.reproduce import run as run_mod
from dbtier.reproduce.plan import Article, RunSpec


def test_a_run_that_fails_leaves_the_others_to_run(monkeypatch, tmp_path):
    ran = []

    def fake_run_spec(spec, base, progress, artifacts, say):
        ran.append(spec.key)
        if spec.key == "broken":
            raise RuntimeError("the server went away")
        return {"elapsed_s": 1.0, "server_cpu_s": 0.5, "io_wait_s": 0.1, "host_steal_s": 0.0, "top_events": []}

    monkeypatch.setattr(run_mod, "run_spec", fake_run_spec)
    art = Article("999", "a test", "none", [RunSpec("first", "random-index"), RunSpec("broken", "random-index"),
                                            RunSpec("last", "random-index")], lambda results: [])
    said = []
    doc = run_mod.reproduce([art], LabOptions(), tmp_path, lambda _p: contextlib.nullcontext(None), said.append)
    assert ran == ["first", "broken", "last"]
    (article,) = doc["articles"]
    assert article["failures"] == {"broken": "RuntimeError: the server went away"}
    assert any("broken: failed: RuntimeError: the server went away" in line for line in said)
    assert [r["summary"] is not None for r in article["runs"]] == [True, False, True]
