"""Where layouts differ: each phase and each transaction type against the first layout, and the one
that differs most among those that weigh enough (hand-built results, the figures known)."""

import pytest

from dbtier.experiments.breakdown import breakdown
from dbtier.report import compareview, verdict


def phased(**elapsed):
    return {"elapsed_s": sum(elapsed.values()),
            "phases": [{"phase": name, "elapsed_s": s, "metrics": {}} for name, s in elapsed.items()]}


def test_the_phase_a_layout_speeds_up_is_named_though_a_long_one_hides_it():
    """A 60 s report on both layouts hides the 6 s phase the WAL's device made 1.5x faster; a tiny
    phase 10x faster is too small to be named (under 2% of the run)."""
    base = phased(report=60.0, pay=6.0, tiny=0.5)
    wal = phased(report=60.5, pay=4.0, tiny=0.05)
    parts = breakdown(["base", "wal"], [base, wal])
    pay = next(r for r in parts["phases"] if r["phase"] == "pay")
    assert pay["layouts"][1]["speedup"] == pytest.approx(1.5) and pay["layouts"][0]["speedup"] == 1.0
    assert pay["share"] == pytest.approx(6 / 66.5)
    assert parts["largest"] == {"phase": "pay", "script": None, "layout": "wal", "speedup": pytest.approx(1.5),
                                "figure": "elapsed s"}
    line = verdict.compare(["base", "wal"], [base, wal], [1.0, 66.5 / 64.55], "elapsed s", parts["largest"])[-1]
    assert line == "Where the layouts differ most: phase pay, 1.50x faster on wal than on base."
    table = compareview.phase_data(["base", "wal"], parts)
    assert table.rows[1] == ["pay", "9%", "6.00 s", "4.00 s (1.50x)"]


def test_transaction_types_by_their_mean_latency():
    def run(tps, payment_ms, order_ms, count=500):
        return {"phase": "run", "elapsed_s": 10.0, "metrics": {"tps": tps, "scripts": {
            "payment": {"count": count, "mean_ms": payment_ms, "p50_ms": payment_ms, "p95_ms": 2 * payment_ms,
                        "p99_ms": 3 * payment_ms},
            "order": {"count": count, "mean_ms": order_ms, "p50_ms": order_ms, "p95_ms": order_ms, "p99_ms": order_ms}}}}
    parts = breakdown(["hdd", "ssd"], [run(100, 8.0, 2.0), run(120, 2.0, 1.8)])
    (phase,) = parts["phases"]
    assert phase["figure"] == "tps" and phase["layouts"][1]["speedup"] == pytest.approx(1.2)
    payment = next(r for r in parts["scripts"] if r["script"] == "payment")
    assert payment["layouts"][1]["speedup"] == pytest.approx(4.0) and payment["layouts"][1]["tps"] == 50.0
    assert parts["largest"]["script"] == "payment" and parts["largest"]["speedup"] == pytest.approx(4.0)
    rows = compareview.script_data(["hdd", "ssd"], parts).rows
    assert rows[0][:2] == ["payment", "hdd"] and rows[1][0] == "" and rows[1][-1] == "4.00x"
    line = verdict.compare(["hdd", "ssd"], [{"elapsed_s": 10.0, "metrics": {"tps": 100}},
                                            {"elapsed_s": 10.0, "metrics": {"tps": 120}}], [1.0, 1.2], "tps",
                           parts["largest"])[-1]
    assert line == "Where the layouts differ most: transaction payment, 4.00x faster on ssd than on hdd (its mean latency)."


def test_a_slower_layout_is_said_slower_and_a_one_phase_run_names_nothing_more():
    parts = breakdown(["a", "b"], [phased(load=10.0, scan=10.0), phased(load=10.0, scan=25.0)])
    assert parts["largest"]["phase"] == "scan" and parts["largest"]["speedup"] == pytest.approx(0.4)
    assert "2.50x slower on b" in verdict._largest_clause(parts["largest"], "a")
    one = breakdown(["a", "b"], [{"elapsed_s": 2.0, "metrics": {}}, {"elapsed_s": 1.0, "metrics": {}}])
    assert one["largest"] is None and compareview.phase_data(["a", "b"], one) is None
