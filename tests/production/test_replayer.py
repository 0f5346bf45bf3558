"""The replayer (production/replayer.py) on a real server: a workload recorded from real clients on a
production lab (real timings, real prepared statements, a real failure), replayed against the same
server, its counts, pacing, order, prepares, errors, stalls and interruption checked.

Timing tolerances (these machines are shared and noisy; medians, never maxima): at speed 1 and 4 the
median lag of a statement's start against its schedule is under 20 ms, and the replay's elapsed time
is within 30% (plus 0.3 s) of the capture's span over the speed."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from dbtier.production import capture, replayer
from tests.production.conftest import log_files, production_lab
from tests.production.recorder import Recorder, from_rows

LOOKUP = "SELECT balance FROM account WHERE id = $1"
MOVE = "UPDATE account SET balance = balance + $1 WHERE id = $2"
CLIENTS = 4
ROUNDS = 12


@pytest.fixture(scope="module")
def lab(production_workspace):
    with production_lab(production_workspace, destinations="csvlog") as lab:
        with lab.connect() as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
            conn.execute("CREATE TABLE account (id int PRIMARY KEY, balance bigint NOT NULL)")
            conn.execute("INSERT INTO account SELECT g, 1000 FROM generate_series(1, 5000) g")
        yield lab


@pytest.fixture(scope="module")
def conninfo(lab) -> str:
    with lab.connect() as conn:
        return conn.info.dsn


def record_mix(conninfo: str) -> capture.Capture:
    """Four real clients: a named prepared lookup, an unnamed update in a transaction, think times of
    30 ms, and one statement that fails (as it will again in the replay)."""
    rec = Recorder(conninfo)

    def client(i: int) -> None:
        s = rec.session(f"teller-{i}")
        for j in range(ROUNDS):
            s.execute(LOOKUP, [100 * i + j + 1], cls="lookup", name="lookup")
            s.simple("BEGIN", cls="begin")
            s.execute(MOVE, [j, 100 * i + j + 1], cls="move")
            s.simple("COMMIT", cls="commit")
            time.sleep(0.03)
        s.simple("SELECT balance / 0 FROM account WHERE id = 1", cls="broken")
        s.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return rec.capture()


@pytest.fixture(scope="module")
def recorded(conninfo, tmp_path_factory) -> capture.Capture:
    folder = tmp_path_factory.mktemp("capture")
    capture.write(folder, record_mix(conninfo))
    return capture.read(folder)  # as a replay reads it: checked


def test_counts_per_class_equal_the_captures(lab, conninfo, recorded):
    plan = replayer.build_plan(recorded)
    with lab.connect() as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
    out = replayer.replay(plan, conninfo, replayer.Settings(speed=None))
    metrics = replayer.summarize(plan, out, recorded)
    calls = dict(zip(recorded.classes["normalized"].to_pylist(), recorded.classes["calls"].to_pylist()))
    assert {c["normalized"]: c["count"] for c in metrics["classes"]} == calls
    assert calls[LOOKUP] == CLIENTS * ROUNDS and calls["SELECT balance / 0 FROM account WHERE id = 1"] == CLIENTS
    with lab.connect() as conn:  # the server ran them: pg_stat_statements' own count of each
        server = dict(conn.execute("SELECT query, calls FROM pg_stat_statements").fetchall())
    assert server[LOOKUP] == CLIENTS * ROUNDS and server[MOVE] == CLIENTS * ROUNDS
    assert not np.isnan(out.finished).any()
    assert metrics["replay"]["lag_p50_ms"] is None  # no schedule at max speed
    # ... but the replayer's own delay is: every statement sent no sooner than its session's previous
    # answer was read, and after it by what the replayer took to send it
    assert not np.isnan(out.held_s).any() and (out.held_s >= 0).all()
    for first, stop in zip(plan.first, plan.stop):
        sent, answered = out.started[first + 1:stop], out.finished[first:stop - 1]
        assert (sent >= answered).all() and np.allclose(out.held_s[first + 1:stop], sent - answered, atol=1e-9)
    assert metrics["replay"]["held_max_ms"] == 1e3 * out.held_s.max()


def test_expected_errors_are_not_new_ones(conninfo, recorded):
    plan = replayer.build_plan(recorded)
    out = replayer.replay(plan, conninfo, replayer.Settings(speed=None))
    r = replayer.summarize(plan, out, recorded)["replay"]
    assert r["failures"] == CLIENTS and r["expected_failures"] == CLIENTS
    assert r["new_failures"] == 0 and r["first_new_failures"] == []
    assert {out.error_state[k] for k in range(plan.statements) if out.error_state[k]} == {"22012"}


def _parses_since(lab, mark: str) -> list[str]:
    """The session ids of the server's `parse lookup` log lines after the line carrying `mark`."""
    sessions, seen = [], False
    for path in log_files(lab, ".csv"):
        with open(path, newline="") as f:
            for row in csv.reader(f):
                if len(row) > 13 and mark in row[13]:
                    seen = True
                elif seen and "parse lookup:" in row[13]:
                    sessions.append(row[5])
    return sessions


def test_a_named_statement_is_prepared_once_per_session(lab, conninfo, recorded):
    plan = replayer.build_plan(recorded)
    mark = f"replay-mark-{time.time_ns()}"
    with lab.connect() as conn:
        conn.execute(f"SELECT '{mark}'")
    out = replayer.replay(plan, conninfo, replayer.Settings(speed=None))
    assert out.prepares == [1] * CLIENTS
    time.sleep(0.3)  # the logging collector's file catches up
    parses = _parses_since(lab, mark)
    assert len(parses) == CLIENTS and len(set(parses)) == CLIENTS  # the server saw one parse per session


@pytest.mark.parametrize("speed", [1.0, 4.0])
def test_rate_mode_keeps_each_sessions_pacing(conninfo, recorded, speed):
    plan = replayer.build_plan(recorded)
    out = replayer.replay(plan, conninfo, replayer.Settings(mode="rate", speed=speed))
    lag_ms = 1e3 * np.nanmedian(out.lag_s)
    assert lag_ms < 20, f"median lag {lag_ms:.1f} ms at speed {speed}"
    # the replayer's own share of a statement's lag is at most all of it
    assert not np.isnan(out.held_s).any() and (out.held_s <= np.maximum(out.lag_s, 0) + 1e-9).all()
    # the latest statement is the one named, whenever one was late
    latest = replayer.summarize(plan, out, recorded)["replay"].get("latest")
    assert (latest is not None) == (np.nanmax(out.lag_s) > replayer.LATE_S)
    assert latest is None or latest["lag_ms"] == 1e3 * np.nanmax(out.lag_s)
    expected = recorded.span_s / speed
    assert abs(out.elapsed_s - expected) <= 0.3 * expected + 0.3, (out.elapsed_s, expected)
    # think time kept: each session's gaps between statements follow production's (median within 10 ms)
    gaps_here, gaps_there = [], []
    for a, b in zip(plan.first, plan.stop):
        gaps_here += list(np.diff(out.started[a:b]))
        gaps_there += list(np.diff(plan.start_s[a:b]) / speed)
    assert abs(np.median(gaps_here) - np.median(gaps_there)) < 0.010


def test_the_latest_statement_is_explained_by_the_statements_that_made_it_late():
    # two sessions: the first on time; in the second, statement 1 took 1.6 s where production took 0.1 s,
    # so statements 2 and 3 went late (0.6 s, 0.5 s) until think time absorbed it
    n = 7
    plan = replayer.Plan(session_start_s=[0.0, 0.0], session_end_s=[None, None], first=[0, 2], stop=[2, 7],
                         start_s=np.array([0.0, 1.0, 0.0, 1.0, 2.0, 3.0, 4.0]), execute=[False] * n, name=[None] * n,
                         text=[f"SELECT {k}".encode() for k in range(n)], params=[None] * n,
                         class_id=np.arange(n) + 100, expected_error=[None] * n, rank=np.arange(n),
                         duration_s=np.full(n, 0.1))
    started = np.array([0.0, 1.0, 0.0, 1.0, 2.6, 3.5, 4.0])
    latency = np.array([0.1, 0.1, 0.1, 1.6, 0.9, 0.1, 0.1])
    out = replayer.Outcome(elapsed_s=4.1, started=started, finished=started + latency, lag_s=started - plan.start_s,
                           held_s=np.zeros(n), error_state=[None] * n, error_message=[None] * n)
    late = replayer._latest(plan, out, latency)
    assert (late["session"], late["seq"], late["class_id"], late["since_seq"], late["before"]) == (1, 2, 104, 1, 1)
    assert np.isclose(late["lag_ms"], 600) and np.isclose(late["took_s"], 1.6) and np.isclose(late["production_s"], 0.1)
    assert late["slowest"]["seq"] == 1 and np.isclose(late["slowest"]["ms"], 1600)
    assert np.isclose(late["slowest"]["production_ms"], 100)
    # nothing late, or lag not measured (speed max): nothing named
    on_time = replayer.Outcome(elapsed_s=4.1, started=plan.start_s, finished=plan.start_s + 0.1,
                               lag_s=np.zeros(n), held_s=np.zeros(n), error_state=[None] * n, error_message=[None] * n)
    assert replayer._latest(plan, on_time, np.full(n, 0.1)) is None
    on_time.lag_s = np.full(n, np.nan)
    assert replayer._latest(plan, on_time, np.full(n, 0.1)) is None


def test_order_mode_keeps_the_global_order(conninfo, recorded):
    plan = replayer.build_plan(recorded)
    out = replayer.replay(plan, conninfo, replayer.Settings(mode="order", speed=None))
    by_rank = out.started[np.argsort(plan.rank)]
    assert np.all(np.diff(by_rank) >= 0)  # every statement started after every earlier one had started
    # the capture interleaves the sessions, so this is a real constraint, not one session after another
    sessions_by_rank = np.searchsorted(plan.first, np.argsort(plan.rank), side="right") - 1
    assert np.count_nonzero(np.diff(sessions_by_rank)) > CLIENTS


def _hand_built(rows: list[tuple], sessions: list[tuple]) -> capture.Capture:
    """A small capture: sessions (start, end), statements (session, start, text, error_state)."""
    srows = [{"session": i, "log_session": f"s{i}", "database": "dbtier", "user": "dbtier", "application": "t",
              "client": "[local]", "start_s": a, "end_s": b} for i, (a, b) in enumerate(sessions)]
    classes: dict[str, int] = {}
    seqs: dict[int, int] = {}
    st = []
    for session, start, text, error in rows:
        seq = seqs.get(session, 0)
        seqs[session] = seq + 1
        st.append({"session": session, "seq": seq, "start_s": start, "kind": "simple", "text": text,
                   "class_id": classes.setdefault(text, len(classes) + 1), "error_state": error})
    return from_rows(srows, sorted(st, key=lambda r: (r["session"], r["seq"])), classes)


def test_max_errors_stops_a_replay_gone_wrong(conninfo):
    cap = _hand_built([(0, 0.01 * i, f"SELECT * FROM no_such_table_{i % 3}", None) for i in range(50)], [(0.0, 1.0)])
    plan = replayer.build_plan(cap)
    with pytest.raises(replayer.ReplayStopped, match="3 statements failed that had not failed in production"):
        replayer.replay(plan, conninfo, replayer.Settings(speed=None, max_errors=3))


def test_a_lock_stall_is_reported_and_cancelled(lab, conninfo):
    """Session 0 holds a row lock across 2.5 s of think time; session 1 wants the row at 0.3 s. With a
    stall timeout of 1 s, the watchdog reports both statements and cancels the wait."""
    cap = _hand_built([(0, 0.0, "BEGIN", None), (0, 0.05, "UPDATE account SET balance = 1 WHERE id = 4999", None),
                       (0, 2.5, "COMMIT", None),
                       (1, 0.3, "UPDATE account SET balance = 2 WHERE id = 4999", None)],
                      [(0.0, 2.6), (0.2, 2.6)])
    plan = replayer.build_plan(cap)
    out = replayer.replay(plan, conninfo, replayer.Settings(speed=1.0, stall_timeout_s=1.0))
    r = replayer.summarize(plan, out, cap)["replay"]
    assert r["stalled_sessions"] == 1 and r["stalled_statements"] == 1 and r["new_failures"] == 0
    (stall,) = r["stalls"]
    assert stall["session"] == 1 and "balance = 2" in stall["statement"] and stall["waited_s"] >= 1.0
    (holder,) = stall["blocked_by"]
    assert holder["session"] == 0 and holder["state"] == "idle in transaction" and "balance = 1" in holder["statement"]
    assert out.error_state[3] == "57014"  # cancelled, and counted as the stall, not as a failure
    with lab.connect() as conn:  # session 0 committed after the cancel
        assert conn.execute("SELECT balance FROM account WHERE id = 4999").fetchone()[0] == 1


def _client_backends(lab) -> list[tuple]:
    with lab.connect() as conn:
        return conn.execute("SELECT pid, application_name, state FROM pg_stat_activity WHERE backend_type = "
                            "'client backend' AND pid <> pg_backend_pid()").fetchall()


def test_ctrl_c_leaves_no_connections(lab, conninfo, tmp_path):
    """A replay in a process of its own, interrupted while its sessions sleep in statements: it cancels
    them and closes every connection before it exits."""
    cap = _hand_built([(i, 0.0, "SELECT pg_sleep(30)", None) for i in range(3)], [(0.0, None)] * 3)
    capture.write(tmp_path / "w", cap)
    # Ctrl-C raises KeyboardInterrupt, as dbtier's command line makes sure (a suite started in the background by
    # a non-interactive shell hands its processes SIGINT ignored, and Python then leaves it ignored)
    script = textwrap.dedent(f"""
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from dbtier.production import capture, replayer
        cap = capture.read({str(tmp_path / 'w')!r})
        try:
            replayer.replay(replayer.build_plan(cap), {conninfo!r}, replayer.Settings(speed=None))
        except KeyboardInterrupt:
            raise SystemExit(130)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).parents[2])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len([b for b in _client_backends(lab) if b[1] == "t"]) < 3:
        time.sleep(0.05)
    assert len([b for b in _client_backends(lab) if b[1] == "t"]) == 3
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=20) == 130
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _client_backends(lab):
        time.sleep(0.05)
    assert _client_backends(lab) == []


def test_awkward_statements_never_hang(conninfo):
    """Two statements in one simple text, COPY TO STDOUT (its rows read and dropped), a COPY FROM STDIN
    that slipped into a capture (ended at once: it fails, counted), a NULL value, a session that sent
    nothing."""
    rows = [(0, 0.00, "SELECT 1; SELECT 2", None), (0, 0.01, "COPY (SELECT g FROM generate_series(1, 5000) g) TO STDOUT", None),
            (0, 0.02, "COPY account FROM STDIN", "57014"), (0, 0.03, "SELECT 3", None)]
    cap = _hand_built(rows, [(0.0, 0.1), (0.05, 0.1)])
    plan = replayer.build_plan(cap)
    plan.execute[3], plan.text[3], plan.params[3] = True, b"SELECT coalesce($1::int, 42)", [None]
    out = replayer.replay(plan, conninfo, replayer.Settings(speed=None, stall_timeout_s=5))
    assert out.error_state == [None, None, "57014", None] and not np.isnan(out.finished).any()
    assert "COPY FROM STDIN is not replayed" in out.error_message[2]


def test_a_statistics_capture_draws_its_values_from_the_database(lab, conninfo):
    """No logged values: each $1 drawn from account.id, a seeded sample (the same twice)."""
    rows = [{"session": 0, "seq": i, "start_s": 0.001 * i, "kind": "execute", "text": LOOKUP,
             "param_sources": ["public.account.id"], "class_id": 1} for i in range(50)]
    cap = from_rows([{"session": 0, "log_session": "s0", "database": "dbtier", "user": "u", "application": "a",
                      "client": "[local]", "start_s": 0.0, "end_s": 0.1}], rows, {LOOKUP: 1}, kind="statistics")
    with lab.connect() as conn:
        drawn = replayer.draw_parameters(conn, cap)
        assert drawn == replayer.draw_parameters(conn, cap)
    assert len(drawn["public.account.id"]) == 5000  # a small table: all of it
    plan = replayer.build_plan(cap, drawn)
    assert len({p[0] for p in plan.params}) > 40 and all(1 <= int(p[0]) <= 5000 for p in plan.params)
    out = replayer.replay(plan, conninfo, replayer.Settings(speed=None))
    m = replayer.summarize(plan, out, cap)
    assert m["replay"]["synthetic"] is True and m["replay"]["new_failures"] == 0 and m["classes"][0]["count"] == 50


def test_a_session_whose_server_connection_is_killed_stops_the_replay_in_one_line(lab, conninfo):
    cap = _hand_built([(0, 0.0, "SELECT pg_sleep(10)", None), (0, 0.1, "SELECT 1", None)], [(0.0, None)])
    plan = replayer.build_plan(cap)

    def kill() -> None:
        deadline = time.monotonic() + 10
        with lab.connect() as conn:
            while time.monotonic() < deadline:
                if conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 't' "
                                "AND query LIKE 'SELECT pg_sleep%'").fetchall():
                    return
                time.sleep(0.05)

    killer = threading.Thread(target=kill)
    killer.start()
    try:
        with pytest.raises(replayer.ReplayStopped, match="session 0 lost its connection"):
            replayer.replay(plan, conninfo, replayer.Settings(speed=None))
    finally:
        killer.join()
