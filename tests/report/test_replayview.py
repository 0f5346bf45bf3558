"""A replay's figures in the result schema and the run views: the statement classes slowest first (20
shown; the rest summed in the terminal, folded in HTML) and one line of faithfulness."""

import io
import json

from rich.console import Console

from dbtier.report import html, jsonout, replayview, schema
from dbtier.report.terminal import show
from tests.report.test_schema import a_run


def a_replay(classes: int = 25, **replay) -> dict:
    rows = [{"class_id": 1000 + i, "normalized": f"SELECT * FROM t{i} WHERE id = $1", "count": 10 + i, "errors": i % 2,
             "new_errors": 0, "mean_ms": float(i), "p50_ms": float(i), "p95_ms": 2.0 * i, "p99_ms": 3.0 * i,
             "production_mean_ms": None} for i in range(classes)]
    rows.sort(key=lambda c: -c["mean_ms"])
    faith = {"mode": "rate", "speed": 1.0, "synthetic": False, "elapsed_s": 10.5, "production_span_s": 10.0,
             "lag_p50_ms": 0.6, "lag_p99_ms": 5.4, "lag_max_ms": 28.0, "late_statements": 48, "late_threshold_ms": 10.0,
             "held_p50_ms": 0.1, "held_p99_ms": 0.9, "held_max_ms": 3.5,
             "failures": 12, "new_failures": 1, "expected_failures": 11, "unexpected_successes": 0,
             "first_new_failures": [{"class_id": 1003, "session": 2, "seq": 7, "sqlstate": "42P01",
                                     "message": 'relation "gone" does not exist', "statement": "SELECT * FROM gone"}],
             "stalled_statements": 1, "stalled_sessions": 1,
             "stalls": [{"session": 1, "seq": 0, "class_id": 1001, "statement": "UPDATE t SET v = 2", "waited_s": 1.2,
                         "blocked_by": [{"session": 0, "pid": 42, "state": "idle in transaction",
                                         "statement": "UPDATE t SET v = 1"}]}],
             "latest": {"session": 3, "seq": 40, "class_id": 1002, "lag_ms": 28.0, "statement": "SELECT * FROM t2",
                        "since_seq": 37, "before": 3, "took_s": 0.05, "production_s": 0.02,
                        "slowest": {"seq": 38, "class_id": 1009, "ms": 31.0, "production_ms": 4.0,
                                    "statement": "SELECT * FROM t9"}},
             "prepares": 3, "not_replayed": {"copy_from_stdin": 2, "fastpath": 0}, **replay}
    return a_run(workload="replay", metrics={"statements": sum(c["count"] for c in rows), "sessions": 4,
                                             "statements_per_s": 100.0, "classes": rows, "replay": faith})


def test_a_replays_figures_follow_the_schema():
    assert schema.problems(json.loads(jsonout.dumps(a_replay()))) == []
    assert schema.problems(json.loads(jsonout.dumps(a_replay(speed="max", lag_p50_ms=None, lag_p99_ms=None,
                                                             lag_max_ms=None)))) == []
    bad = schema.problems({"schema_version": 2, **a_replay(speed=0)})
    assert any(p.startswith("metrics/replay/speed") for p in bad), bad
    missing = a_replay()
    del missing["metrics"]["replay"]["new_failures"]
    assert any("new_failures" in p for p in schema.problems({"schema_version": 2, **missing}))


def test_the_terminal_shows_twenty_classes_slowest_first_and_sums_the_rest():
    data = replayview.classes_data(a_replay())
    assert len(data.rows) == 21 and data.rows[0][0] == "1024" and data.rows[19][0] == "1005"
    assert data.rows[20][:4] == ["5 more", "", f"{sum(10 + i for i in range(5)):,}", "2"]
    out = Console(file=io.StringIO(), width=200, record=True)
    show(out, data)  # as print_run shows it (whose whole run the workload tests print)
    for line in [replayview.faithfulness_line(a_replay()), *replayview.detail_lines(a_replay())]:
        out.print(line, markup=False)
    text = out.export_text()
    assert "statement classes, slowest first (25 classes" in text
    assert ("replay (rate mode, speed 1): 10.5 s against production's 10.0 s; started late against the schedule: p50 "
            "0.60 ms, p99 5.40 ms, max 28.0 ms (48 over 10 ms); held by the replayer itself: p50 0.10 ms, p99 "
            "0.90 ms, max 3.50 ms; 1 new failures (11 expected as in production); 1 "
            "sessions stalled; not replayed: 2 COPY FROM STDIN, 0 fast-path calls") in " ".join(text.split())
    assert ("latest start: session 3 statement 40 (class 1002: SELECT * FROM t2) went 28.0 ms late; since its "
            "statement 37, its last on time, its 3 statements took 0.05 s against production's 0.02 s; most "
            "longer: statement 38 (class 1009: SELECT * FROM t9), 31.0 ms against 4.00 ms") in " ".join(text.split())
    assert 'new failure: class 1003, session 2 statement 7: relation "gone" does not exist [42P01]' in text
    assert "stall: session 1 statement 0 (UPDATE t SET v = 2) waited 1.20 s on a lock held by session 0 (idle in " \
           "transaction: UPDATE t SET v = 1); cancelled" in " ".join(text.split())


def test_html_folds_the_classes_beyond_twenty():
    doc = a_replay()
    section = html.Section("replay", text=[replayview.faithfulness_line(doc)],  # as run_sections puts them
                           tables=[replayview.classes_data(doc, fold=True)])
    page = html.render("dbtier run replay", "now", [section])
    assert page.count("SELECT * FROM t") == 25 and '<details class="more"><summary>5 more rows</summary>' in page
    assert page.index("SELECT * FROM t24 ") < page.index("5 more rows") < page.index("SELECT * FROM t4 ")
    assert "1 new failures (11 expected as in production)" in page
