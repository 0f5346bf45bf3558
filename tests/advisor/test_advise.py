"""dbtier advise: a run built so the answer is known (one small table read at random, one bigger one
read in sequence) gets that answer; the solver's path finds what trying every placement finds, with
objects that only pay together; a verified placement runs live; every bad input one line, exit 2."""

from __future__ import annotations

import itertools
import json
import random
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest

from dbtier.advisor import search
from dbtier.advisor.budget import Budget
from dbtier.advisor.candidates import Candidate
from dbtier.engines.postgres import placement as placement_mod
from tests.conftest import dbtier

LOOKUPS = 300


@pytest.fixture(scope="module")
def recorded(module_shm_dir, tmp_path_factory):
    """`lookups` (40 MB, one row a page: more than the disk's own cache holds) read at random through
    its index; `scanned` (60 MB) read once from end to end; on a disk, direct I/O, from a cold cache."""
    work = tmp_path_factory.mktemp("advise")
    (work / "setup.sql").write_text(
        "CREATE TABLE lookups (id int PRIMARY KEY, pad text) WITH (fillfactor = 10);\n"
        "INSERT INTO lookups SELECT g, repeat('x', 700) FROM generate_series(1, 5000) g;\n"
        "CREATE TABLE scanned AS SELECT g AS id, repeat('y', 900) AS pad FROM generate_series(1, 60000) g;\n"
        "VACUUM ANALYZE lookups, scanned;\n")
    ids = list(range(1, 5001))
    random.Random(7).shuffle(ids)
    (work / "run.sql").write_text("SELECT count(*) FROM scanned;\n"
                                  + "".join(f"SELECT length(pad) FROM lookups WHERE id = {i};\n" for i in ids[:LOOKUPS]))
    out = work / "runs"
    dbtier("run", "sql", "--setup", str(work / "setup.sql"), "--run", str(work / "run.sql"), "-d", "hdd=hdd-sata-7200",
           "--trace", "-q", "--workspace", str(module_shm_dir), "--output", str(out), check=True)
    return next(out.glob("sql-*"))


def advise(run_dir, tmp_path, *args) -> dict:
    path = tmp_path / "a.json"
    dbtier("advise", str(run_dir), *args, "--json", str(path), "-q", "--output", str(tmp_path / "out"), check=True)
    return json.loads(path.read_text())


def test_the_randomly_read_table_goes_to_flash(recorded, tmp_path):
    """64 MB hold either table, not both: the one with the random reads is the answer."""
    doc = advise(recorded, tmp_path, "--fast", "ssd=ssd-sata-mlc", "--budget", "64MB")
    best = doc["recommended"]
    assert "lookups" in best["fast"] and "scanned" not in best["fast"], best
    assert best["fast_bytes"] <= 64 << 20
    where = placement_mod.parse([best["place"]], ["hdd", "ssd"])  # the --place text does what it says
    assert where.device_for("lookups", "table") == "ssd" and where.device_for("scanned", "table") == "hdd"
    # every random read was on lookups: on flash the run is several times faster
    assert best["speedup"] > 2.0, best
    objects = {o["name"]: o for o in doc["objects"]}
    assert objects["lookups"]["reads"] >= LOOKUPS and objects["lookups"]["random_reads"] > 0.9 * objects["lookups"]["reads"]
    assert 64 << 20 > objects["scanned"]["bytes"] > objects["lookups"]["bytes"]
    assert objects["lookups"]["alone_speedup"] > objects["scanned"]["alone_speedup"]
    # the curve starts at 1x with nothing fast and ends with everything that did I/O on flash
    curve = doc["curve"]
    assert curve[0]["fast_bytes"] == 0 and curve[0]["speedup"] == pytest.approx(1.0)
    assert all(b["fast_bytes"] > a["fast_bytes"] and b["speedup"] > a["speedup"] for a, b in zip(curve, curve[1:]))
    assert (tmp_path / "out").is_dir() and any((tmp_path / "out").glob("advise-sql-*/report.html"))
    # what a DBA runs to make it so, in an order PostgreSQL takes: lookups to a tablespace on the SSD;
    # when the advice puts the catalogs (data) there too, what stays on the disk leaves the database's
    # default first, then the database's default moves (ALTER DATABASE refuses once a relation is there)
    (sql,) = (tmp_path / "out").glob("advise-sql-*/migration.sql")
    text = sql.read_text()
    moves = {m["name"]: m for m in doc["migration"]["moves"]}
    assert "CREATE TABLESPACE dev_ssd LOCATION" in text and "ACCESS EXCLUSIVE on the table" in text
    assert all(m["seconds"] > 0 for m in moves.values() if m["bytes"] > 1 << 20)
    if where.roles["data"] == "ssd":  # lookups goes with the database's default
        order, db = list(moves), moves["the database's default tablespace"]
        assert "ALTER TABLE scanned SET TABLESPACE dev_hdd;" in text and moves["scanned"]["to"] == "hdd"
        assert order.index("scanned") < order.index(db["name"]) and "lookups" not in moves
        assert db["to"] == "ssd" and db["bytes"] >= objects["lookups"]["bytes"]
        assert text.index("SET TABLESPACE dev_hdd") < text.index('ALTER DATABASE :"target_db" SET TABLESPACE dev_ssd')
    else:
        assert "ALTER TABLE lookups SET TABLESPACE dev_ssd;" in text and "ALTER TABLE scanned" not in text
        assert moves["lookups"]["bytes"] == objects["lookups"]["bytes"]


def test_a_cost_budget_is_a_fast_capacity(recorded, tmp_path):
    """$1/GB fast, $0.10/GB slow: every byte costs $0.10, each one moved $0.90 more."""
    total = sum(o["bytes"] for o in advise(recorded, tmp_path, "--fast", "ssd=ssd-sata-mlc", "--budget", "64MB")["objects"])
    room = 48 << 20
    max_cost = (total * 0.10 + room * 0.90) / 2**30
    doc = advise(recorded, tmp_path, "--fast", "ssd=ssd-sata-mlc", "--cost", "fast=1,slow=0.10", "--max-cost",
                 f"{max_cost:.9f}")
    assert abs(doc["budget"]["fast_bytes"] - room) < 4096
    assert doc["recommended"]["cost"] <= max_cost * (1 + 1e-6)
    assert "lookups" in doc["recommended"]["fast"]


def test_verify_runs_the_advice_live(recorded, tmp_path, module_shm_dir):
    doc = advise(recorded, tmp_path, "--fast", "ssd=ssd-sata-mlc", "--budget", "64MB", "--verify", "1",
                 "--workspace", str(module_shm_dir))
    (v,) = doc["verify"]
    assert v["place"] == doc["recommended"]["place"]
    # predicted against a live run of the same placement, as the replay's known bias goes on this host
    # (docs/predict.md): the recording waited on the disk, and this VM runs a backend slower after each
    # long wait, so a placement that moves the waits to flash is overstated (20-28% here on 2026-11-27,
    # the server's CPU time 0.30 s recorded against 0.15 s live): at most 15% under, 60% over
    assert 0.85 * v["measured"] <= v["predicted"] <= 1.6 * v["measured"], v


def test_an_interrupted_verification_keeps_the_advice(recorded, tmp_path, module_shm_dir):
    """The advice is written before it is verified: Ctrl-C during the live runs leaves it in place."""
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "dbtier", "advise", str(recorded), "--fast", "ssd=ssd-sata-mlc",
                             "--budget", "64MB", "--verify", "1", "--workspace", str(module_shm_dir), "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    said = []
    try:
        for line in proc.stdout:
            said.append(line)
            if "verifying it live" in line:
                break
        proc.send_signal(signal.SIGINT)
        said.append(proc.communicate(timeout=120)[0])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, "".join(said)[-3000:]
    (advice,) = out.glob("advise-*")
    doc = json.loads((advice / "result.json").read_text())
    assert doc["kind"] == "advice" and doc["recommended"]["place"] and "verify" not in doc
    assert not list(out.glob("sql-*")) and not list(out.glob(".*"))  # the live run left nothing


def _fake_predictor(cost_of):
    """A stand-in for the replay: the elapsed of a placement is cost_of(the names on the fast device)."""
    def predict(scenario, figures=False):
        fast = frozenset(n for n, dev in scenario.placement.objects.items() if dev == "fast")
        fast |= {r for r in ("wal", "temp") if scenario.placement.roles[r] == "fast"}
        return SimpleNamespace(phases=[{"predicted": {"elapsed_s": cost_of(fast), "rates": {}}}])
    return SimpleNamespace(predict=predict)


def test_the_solver_path_matches_every_placement_tried():
    """16 objects (too many to try all): each saves time alone in proportion to its reads, and one
    table with its index saves much more together (they seek between each other on the disk); the
    MILP with its refinement finds what the brute force finds."""
    rng = random.Random(3)
    cands = [Candidate(f"t{i}", "table", rng.randint(1, 40) << 20, "test", reads=100) for i in range(14)]
    cands += [Candidate("big", "table", 60 << 20, "test", reads=100),
              Candidate("big_idx", "index", 20 << 20, "test", reads=100, table="big")]
    alone = {c.name: rng.uniform(0.1, 1.0) for c in cands}

    def elapsed(fast):
        together = 6.0 if {"big", "big_idx"} <= fast else 0.0
        return 40.0 - sum(alone[n] for n in fast) - together

    capacity = 120 << 20
    adv = search.Advisor(_fake_predictor(elapsed), cands, [("slow", None), ("fast", None)], "slow", "fast")
    found = adv.run(Budget(capacity)).best(capacity)[0]
    size = {c.name: c.bytes for c in cands}
    brute = min((frozenset(s) for k in range(len(cands) + 1) for s in itertools.combinations(size, k)
                 if sum(size[n] for n in s) <= capacity), key=elapsed)
    assert elapsed(found.fast) == pytest.approx(elapsed(brute), rel=0.01)
    assert {"big", "big_idx"} <= found.fast
    assert "MILP" in adv.search.method and adv.predictions < 2 ** 16 // 50


def test_every_placement_is_tried_when_few_objects():
    cands = [Candidate(n, "table", 10 << 20, "test", reads=10) for n in "abcd"]
    adv = search.Advisor(_fake_predictor(lambda fast: 10.0 - len(fast)), cands, [("slow", None), ("fast", None)],
                         "slow", "fast")
    s = adv.run(Budget(20 << 20))
    assert all(frozenset(c) in s.options for k in range(3) for c in itertools.combinations("abcd", k))
    assert len(s.best(20 << 20)[0].fast) == 2


@pytest.mark.parametrize("args, message", [
    (["{run}", "--fast", "ssd=ssd-sata-mlc", "--budget", "16kB"], "the smallest object with I/O"),
    (["{run}", "--fast", "ssd=nosuch-profile", "--budget", "1GB"], "nosuch-profile"),
    (["{run}", "--fast", "ssd=ssd-sata-mlc", "--slow", "hdd=nosuch-profile", "--budget", "1GB"], "nosuch-profile"),
    (["{plain}", "--fast", "ssd=ssd-sata-mlc", "--budget", "1GB"], "was recorded without --trace"),
    (["{run}", "--fast", "hdd=ssd-sata-mlc", "--budget", "1GB"], "needs a name of its own"),
    (["{run}", "--fast", "ssd", "--budget", "1GB"], "expected NAME=PROFILE"),
    (["{run}", "--fast", "ssd=ssd-sata-mlc"], "say how much fast storage there is"),
    (["{run}", "--fast", "ssd=ssd-sata-mlc", "--budget", "1GB", "--max-cost", "3"], "not both"),
    (["{run}", "--fast", "ssd=ssd-sata-mlc", "--budget", "12"], "give a unit"),
    (["{run}", "--fast", "ssd=ssd-sata-mlc", "--cost", "fast=1", "--max-cost", "3"], "give both prices"),
    (["{run}", "--fast", "ssd=ssd-sata-mlc", "--cost", "fast=1,slow=0.1", "--max-cost", "0.000001"], "give at least"),
    (["{run}", "--fast", "ssd=ssd-sata-mlc", "--budget", "1GB", "--verify", "99"], "--verify 99"),
    (["{run}", "--fast", "ssd=ssd-sata-mlc", "--budget", "1GB", "--risk", "0.2"], "--risk and --duration go with --catalog"),
    (["{run}", "--fast", "ssd=real", "--budget", "1GB"], "no model to predict with"),
    (["{missing}", "--fast", "ssd=ssd-sata-mlc", "--budget", "1GB"], "is not a directory"),
    (["{run}", "--fast", "ssd=ssd-sata-mlc", "--budget", "1GB", "--cluster", "auto"], "give --verify K too"),
    (["{run}", "--fast", "ssd=ssd-sata-mlc", "--budget", "1GB", "--verify", "1", "--cluster", "127.0.0.1:9"],
     "nothing answers there"),
])
def test_bad_input_one_line_exit_2(recorded, tmp_path, args, message):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "result.json").write_text((recorded / "result.json").read_text())
    words = {"run": str(recorded), "plain": str(plain), "missing": str(tmp_path / "missing")}
    proc = dbtier("advise", *[a.format(**words) for a in args], "--output", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "out").exists()


def test_the_verified_best_stands_unless_another_ran_better():
    from dbtier.advisor.advice import verified_best
    runs = [{"label": "advised", "place": "a", "measured": 100.0, "fast_bytes": 1},
            {"label": "alt2", "place": "b", "measured": 100.5, "fast_bytes": 2},
            {"label": "alt3", "place": "c", "measured": 90.0, "fast_bytes": 3}]
    assert verified_best({"verify": runs, "higher_is_better": True})["label"] == "advised"  # 0.5% is a tie
    runs[1]["measured"] = 110.0
    best = verified_best({"verify": runs, "higher_is_better": True})
    assert best["label"] == "alt2" and best["over_advice"] == pytest.approx(1.1)
    elapsed = [{**r, "measured": m} for r, m in zip(runs, (2.0, 1.5, 2.5))]  # seconds: lower is better
    best = verified_best({"verify": elapsed, "higher_is_better": False})
    assert best["label"] == "alt2" and best["over_advice"] == pytest.approx(2.0 / 1.5)
