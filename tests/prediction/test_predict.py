"""dbtier predict: a recorded run replayed on other devices and placements, against live runs; the
recorded calls replayed give the recorded device requests; every bad input one line, exit 2."""

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from dbtier.devices import native
from dbtier.devices.session import Device
from dbtier.measure import trace
from dbtier.prediction import events
from tests.conftest import dbtier, retry_while_host_steals

ROWS = 1500


@pytest.fixture(scope="module")
def recorded(module_shm_dir, tmp_path_factory):
    """random-index on a disk, traced: every lookup one random read of the table."""
    out = tmp_path_factory.mktemp("runs")
    dbtier("run", "random-index", "--rows", str(ROWS), "-d", "hdd=hdd-sata-7200", "--trace", "-q",
           "--workspace", str(module_shm_dir), "--output", str(out), check=True)
    return next(out.glob("random-index-*"))


def predicted(run_dir, tmp_path, *args) -> dict:
    path = tmp_path / "p.json"
    dbtier("predict", str(run_dir), *args, "--json", str(path), check=True)
    return json.loads(path.read_text())


def test_the_recorded_layout_predicts_the_recorded_run(recorded, tmp_path):
    doc = predicted(recorded, tmp_path)
    (phase,) = doc["phases"]
    assert phase["predicted"]["elapsed_s"] == pytest.approx(phase["recorded"]["elapsed_s"], rel=0.02)
    rec = {r["device"]: r for r in phase["recorded"]["devices"]}
    for row in phase["predicted"]["devices"]:  # the same device requests, so the same iostat figures
        assert row["iostat"]["r/s"] == pytest.approx(rec[row["device"]]["iostat"]["r/s"], rel=0.02)
        assert row["iostat"]["r_await"] == pytest.approx(rec[row["device"]]["iostat"]["r_await"], rel=0.02)
    table = {r["object"]: r for r in phase["predicted"]["object_io"]}
    assert table["t"]["reads"] == ROWS  # one read per lookup, as recorded


def test_a_flash_prediction_against_a_live_run(recorded, tmp_path, module_shm_dir):
    """The whole database on flash, predicted from the disk's run, against the run itself: at most 15%
    under, at most 60% over. The replay keeps the recorded CPU time between calls, and this VM runs a
    backend two to five times slower after each of the disk's 5 ms waits than after flash's 0.2 ms, so
    the prediction overstates: by 4-14% in the bench, and by 35-50% on 2026-11-27, when the VM ran
    slower all day (the suite 19-21 min against 13), alike at this commit and the one before it."""
    doc = predicted(recorded, tmp_path, "-d", "hdd=ssd-sata-mlc")
    (phase,) = doc["phases"]
    out = tmp_path / "live"
    out.mkdir()
    dbtier("run", "random-index", "--rows", str(ROWS), "-d", "hdd=ssd-sata-mlc", "-q", "--workspace",
           str(module_shm_dir), "--output", str(out), "--json", str(out / "r.json"), check=True)
    live = json.loads((out / "r.json").read_text())
    assert 0.85 * live["elapsed_s"] <= phase["predicted"]["elapsed_s"] <= 1.6 * live["elapsed_s"], (
        phase["predicted"]["elapsed_s"], live["elapsed_s"])
    assert phase["recorded"]["elapsed_s"] / phase["predicted"]["elapsed_s"] > 8  # 4.5 ms reads become 0.22 ms
    pred_dev, live_dev = phase["predicted"]["devices"][0], live["devices"][0]
    assert pred_dev["iostat"]["r_await"] == pytest.approx(live_dev["iostat"]["r_await"], rel=0.05)


def test_one_process_has_no_race_to_say_and_a_narrow_spread(recorded, tmp_path):
    """random-index is one backend: no note of races; a spread's replays change only the order in which
    concurrent calls reach a device, so what moves is the background processes' few writes against
    its reads. (The spread once moved each call's host time, and lengthened the lone backend by half
    a host delay a call: 5.84 to 6.23 s on a busy host, where this failed.)"""
    doc = predicted(recorded, tmp_path, "--spread", "4")
    assert not [n for n in doc["notes"] if n.startswith("several processes")]
    (phase,) = doc["phases"]
    e = phase["spread"]["elapsed_s"]
    assert e["max"] - e["min"] < 0.05 * phase["predicted"]["elapsed_s"]


def test_an_index_moved_to_flash(recorded, tmp_path):
    doc = predicted(recorded, tmp_path, "-d", "ssd=ssd-sata-mlc", "--place", "data=hdd,t_attribute_idx=ssd")
    (phase,) = doc["phases"]
    where = {r["object"]: r["device"] for r in phase["predicted"]["object_io"]}
    assert where["t"] == "hdd" and where["t_attribute_idx"] == "ssd"
    # the table's random reads stay on the disk: the index alone on flash changes little (seed 001)
    assert phase["predicted"]["elapsed_s"] == pytest.approx(phase["recorded"]["elapsed_s"], rel=0.05)


def test_a_device_added_with_nothing_placed_on_it_says_so(recorded, tmp_path):
    """-d ssd=... adds a device; without --place nothing moves there, and the prediction says so rather
    than letting "all on the SSD" be read into a figure of the recorded layout."""
    alone = predicted(recorded, tmp_path)
    doc = predicted(recorded, tmp_path, "-d", "ssd=ssd-sata-mlc")
    assert [n for n in doc["notes"] if n.startswith("device ssd: nothing is placed on it")]
    assert doc["phases"][0]["predicted"]["elapsed_s"] == alone["phases"][0]["predicted"]["elapsed_s"]
    placed = predicted(recorded, tmp_path, "-d", "ssd=ssd-sata-mlc", "--place", "data=ssd")
    assert not [n for n in placed["notes"] if "nothing is placed" in n]


def test_a_prediction_on_a_capped_volume_says_what_held_it(recorded, tmp_path):
    """One backend's random reads, one at a time, on a volume of 100 IOPS: each waits for the cap
    (10 ms apart, though a read takes 0.2 ms), so the prediction takes reads / 100 s and says the cap
    held the volume nearly all the time. With a burst to 1,000 IOPS on 300 credits, full buckets run
    the first reads at the burst rate, then at the baseline with the credits spent. The caps are strict
    (cap_tolerance_ms = 0): every read waits for its slot, and is counted."""
    def volume(name, extra=""):
        path = tmp_path / f"{name}.toml"
        path.write_text(f'kind = "cloud"\n[params]\nread_latency_us = 200\nwrite_latency_us = 200\niops = 100\n'
                        f'cap_tolerance_ms = 0\n{extra}')
        return str(path)

    capped = predicted(recorded, tmp_path, "-d", f"hdd={volume('capped')}")["phases"][0]["predicted"]
    dev = capped["devices"][0]
    reads = dev["iostat"]["r/s"] * capped["elapsed_s"]
    assert capped["elapsed_s"] == pytest.approx(reads / 100, rel=0.1)
    (held,) = dev["limits"]
    assert held["limit"] == "iops" and held["rate"] == 100 and held["held_pct"] > 90
    burst = "burst_iops = 1000\nburst_credits = 300\n"
    full = predicted(recorded, tmp_path, "-d", f"hdd={volume('burst', burst)}")["phases"][0]["predicted"]
    held = {h["limit"]: h for h in full["devices"][0]["limits"]}
    assert set(held) == {"iops", "iops_credits"} and held["iops"]["rate"] == 1000
    assert held["iops_credits"]["rate"] == 100 and held["iops_credits"]["held_pct"] > 80
    # the bucket's 300 credits, full as the measured part begins, and the 100/s it earns while they last,
    # buy 300 / (1 - 100/1000) = 333 reads at 1 ms instead of 10: each saves 9 ms
    # A read that came after its slot did not wait, and is not counted; how many did depends on the
    # recording's own timing (323 once in CI, at 8061dc3, where 333 to 3% had held before)
    bursts = held["iops"]["requests"]
    assert 0.9 * 333 <= bursts <= 1.03 * 333, bursts
    assert capped["elapsed_s"] - full["elapsed_s"] == pytest.approx(bursts * 0.009, abs=0.3)
    # --credits sets the bucket the measured part starts with: half of it buys half the burst; an empty
    # one none, the baseline from the first read (the capped volume's time)
    half = predicted(recorded, tmp_path, "-d", f"hdd={volume('burst', burst)}", "--credits", "0.5")
    assert half["scenario"]["credits"] == 0.5
    half_held = {h["limit"]: h for h in half["phases"][0]["predicted"]["devices"][0]["limits"]}
    assert half_held["iops"]["requests"] == pytest.approx(bursts / 2, rel=0.05)
    empty = predicted(recorded, tmp_path, "-d", f"hdd={volume('burst', burst)}", "--credits", "empty")
    empty = empty["phases"][0]["predicted"]
    empty_held = {h["limit"]: h for h in empty["devices"][0]["limits"]}
    # no burst but what credits earned in the recording's idle moments buy: a host that stalled the run
    # (a loaded machine: once 50 ms) earned a few credits there, spent at the burst rate
    assert "iops_credits" in empty_held and empty_held.get("iops", {"requests": 0})["requests"] <= 0.05 * bursts
    assert empty["elapsed_s"] == pytest.approx(capped["elapsed_s"], rel=0.02)


def test_a_run_with_its_credits_spent_live_and_predicted(recorded, tmp_path, module_shm_dir):
    """--credits empty on a volume of 1,000 IOPS that would burst to 5,000: live, the measured part
    starts with the bucket empty, whatever the load before it spent, so every read waits its 1 ms slot at
    the baseline, and the run says so; the recorded disk run predicted on it with --credits empty agrees."""
    toml = tmp_path / "bursting.toml"
    toml.write_text('kind = "cloud"\n[params]\nread_latency_us = 200\nwrite_latency_us = 200\niops = 1000\n'
                    'burst_iops = 5000\nburst_credits = 3000\n')
    pred = predicted(recorded, tmp_path, "-d", f"hdd={toml}", "--credits", "empty")["phases"][0]["predicted"]

    def attempt():
        out = tmp_path / "live"
        shutil.rmtree(out, ignore_errors=True)
        dbtier("run", "random-index", "--rows", str(ROWS), "-d", f"hdd={toml}", "--credits", "empty", "-q",
               "--workspace", str(module_shm_dir), "--output", str(out), "--json", str(tmp_path / "r.json"), check=True)
        return out, json.loads((tmp_path / "r.json").read_text())

    def check(result):
        out, live = result
        assert live["lab"]["credits"] == 0.0
        assert 'credits = "empty"' in (next(out.glob("random-index-*")) / "experiment.toml").read_text()
        held = {h["limit"]: h for h in live["devices"][0]["limits"]}
        # nearly every read waits its slot: one that came 1 ms or more after the last (the client or the host
        # paused) had earned its token and is not held (1,498 of 1,500 once in CI; 1,432 in another, the
        # hypervisor stealing 20 ms of CPU over the 3 s, just under what retries), 10% allowed: with its
        # credits full instead, none of the 1,500 would be held
        assert held["iops_credits"]["rate"] == 1000 and held["iops_credits"]["requests"] >= 0.90 * ROWS
        # a read that came after a pause had earned its token: a WAL write may then wait on the burst rate
        assert all(h["held_pct"] < 1 for k, h in held.items() if k != "iops_credits"), held
        assert live["elapsed_s"] >= ROWS / 1000
        assert pred["elapsed_s"] == pytest.approx(live["elapsed_s"], rel=0.10)
    retry_while_host_steals(attempt, check)


def test_recorded_calls_replayed_give_the_recorded_device_requests(shm_dir, tmp_path):
    """Live, the interposer records a program's calls and the device requests they caused; offline, the
    calls replayed through the same core on the recorded layout give the same requests."""
    dev = shm_dir / "disk"
    dev.mkdir()
    script = (
        "import os, random\n"
        f"d = {str(dev)!r}\n"
        "random.seed(7)\n"
        "fd = os.open(d + '/data', os.O_RDWR | os.O_CREAT)\n"
        "os.pwrite(fd, b'x' * (3 << 20), 0)\n"
        "for i in range(300): os.pread(fd, 8192, random.randrange(384) * 8192)\n"
        "for i in range(50): os.pwrite(fd, b'y' * 8192, i * 8192)\n"
        "os.fsync(fd)\n"
        "w = os.open(d + '/log', os.O_RDWR | os.O_CREAT)\n"
        "for i in range(40): os.pwrite(w, b'w' * 4096, i * 4096); os.fdatasync(w)\n"
    )
    trace_dir = tmp_path / "trace"
    dbtier("exec", "-q", "-d", f"disk=hdd-sata-7200:{dev}", "--trace", str(trace_dir), "--", sys.executable, "-c",
           script, check=True)
    recs = trace.read_records(trace_dir)
    meta, _files = trace.load_meta(trace_dir)
    layout = trace.load_layout(trace_dir)
    live = trace.requests(recs)
    streams = events.build(recs[recs["kind"] != trace.REQUEST], {}, same_devices={0})  # the device as it was
    t0 = int(recs["submit_ns"][0])
    (d,) = meta["devices"]
    from dbtier.devices.profile import load
    from dbtier.devices.session import Session
    session = Session([Device("disk", dev, load(d["profile"]))], tmp_path / "replay")
    session.create()
    replay = native.Replay(session.state_path)
    try:
        files = np.unique(recs["file"][recs["file"] >= 0])
        replay.layout(np.c_[files, np.zeros_like(files), np.zeros_like(files)],
                      np.array([[f, 0, c, a] for f, c, a in layout["chunks"]], dtype=np.uint64).reshape(-1, 4))
        _start, _end, _flags, reqs = replay.run(streams.events, t0, t0)
    finally:
        replay.close()
    assert len(live) > 390 and len(reqs) == len(live)
    for col, rcol in (("op", "op"), ("file", "file"), ("offset", "off"), ("len", "len")):
        assert np.array_equal(live[col].astype(np.int64), reqs[rcol].astype(np.int64)), col
    # the modelled service of each request: the same, as each call came when the recorded one did
    assert np.array_equal(live["complete_ns"] - live["submit_ns"], reqs["complete"] - reqs["arrival"])


@pytest.mark.parametrize("args, message", [
    (["{plain}"], "was recorded without --trace"),
    (["{run}", "--place", "data=nosuch"], "no device named 'nosuch'"),
    (["{run}", "--place", "t_attribute=hdd"], "did you mean t_attribute_idx?"),
    (["{run}", "-d", "hdd=nosuch-profile"], "nosuch-profile"),
    (["{run}", "-d", "ssd=ssd-sata-mlc:/tmp"], "takes no folder"),
    (["{run}", "-d", "ssd=real"], "no model to predict with"),
    (["{run}", "--cpu-scale", "0"], "--cpu-scale 0"),
    (["{old}"], "recorded in trace format 1"),
    (["{v1}"], "written by an older dbtier (schema_version 1"),
    (["{missing}"], "is not a directory"),
    (["{tmp}"], "not a dbtier run directory"),
])
def test_bad_input_one_line_exit_2(recorded, tmp_path, args, message):
    plain = tmp_path / "plain"
    plain.mkdir()
    result = json.loads((recorded / "result.json").read_text())
    (plain / "result.json").write_text(json.dumps(result))
    old = tmp_path / "old"
    old.mkdir()
    (old / "result.json").write_text(json.dumps(result))
    table = pq.read_table(recorded / "trace.parquet")
    md = dict(table.schema.metadata)
    md[b"dbtier"] = json.dumps({**json.loads(md[b"dbtier"]), "trace_format": 1}).encode()
    pq.write_table(table.replace_schema_metadata(md), old / "trace.parquet")
    v1 = tmp_path / "v1"  # a result of the first schema: its keys are since renamed, so refused, not misread
    v1.mkdir()
    (v1 / "result.json").write_text(json.dumps({**result, "schema_version": 1}))
    words = {"plain": plain, "run": recorded, "old": old, "missing": tmp_path / "missing", "tmp": tmp_path, "v1": v1}
    proc = dbtier("predict", *[a.format(**words) for a in args])
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def recorded_on_a_disk(workspace: Path, out: Path, *workload: str) -> tuple[Path, dict]:
    """`dbtier run WORKLOAD` traced, its data on a disk with an SSD beside it: the run's folder and its
    transactions' latencies as predicted for the recorded layout (recorded and predicted)."""
    dbtier("run", *workload, "-d", "hdd=hdd-sata-7200", "-d", "ssd=ssd-sata-mlc", "--place", "data=hdd", "--trace",
           "-q", "--workspace", str(workspace), "--output", str(out), check=True)
    run_dir = max(out.glob(f"{workload[0]}-*"))
    return run_dir, predicted(run_dir, out.parent)["phases"][0]["latency"]


def test_transaction_latencies_of_a_pgbench_run(module_shm_dir, tmp_path):
    """Each transaction pgbench timed is found on its backend and carried through the replay: as
    recorded, its latency comes back; with everything on flash, its reads and flushes shrink."""
    out = tmp_path / "runs"
    out.mkdir()

    def attempt():
        return recorded_on_a_disk(module_shm_dir, out, "pgbench", "-i", "-s", "1", "-c", "2", "-t", "60")

    def check(result):
        run_dir, same = result
        assert (run_dir / "transactions.parquet").is_file()
        (script,) = same
        rec, pred = same[script]["recorded"], same[script]["predicted"]
        assert rec["count"] == pred["count"] == 120
        # the mean, not the median: these latencies gather in two modes (a flush waited for or not), and
        # the median of 120 sits on either as a few transactions move (17 ms or 24 ms, recorded, run to
        # run). Within 0.5% in 12 runs of 12 on 2026-11-27; 6% once that day in the suite, whose cause
        # the failure did not show: retried when the host was measurably busy
        assert pred["mean_ms"] == pytest.approx(rec["mean_ms"], rel=0.05)

    run_dir, same = retry_while_host_steals(attempt, check)
    (script,) = same
    rec = same[script]["recorded"]
    flash = predicted(run_dir, tmp_path, "--place", "data=ssd")["phases"][0]["latency"][script]["predicted"]
    assert flash["p50_ms"] < 0.5 * rec["p50_ms"]  # a disk's milliseconds per read and flush, against flash's
    # two clients on one disk: the recording is one sample of the order their calls reached it in
    assert [n for n in predicted(run_dir, tmp_path)["notes"] if n.startswith("several processes used a disk")]
    spread = [predicted(run_dir, tmp_path, "--spread", "6", "--seed", "5")["phases"][0] for _ in range(2)]
    assert spread[0]["spread"] == spread[1]["spread"]  # seeded: the same moves, the same replays
    s, point = spread[0]["spread"], spread[0]["predicted"]["elapsed_s"]
    assert s["replays"] == 7 and s["seed"] == 5 and s["host_delay_us"]["p90"] > 0
    assert s["elapsed_s"]["min"] <= point <= s["elapsed_s"]["max"]
    # (whether 120 transactions of two clients meet a race the moves change is the recording's own
    # luck: as often as not the range is a few ms wide or none; bench/replay_fidelity.py measures one
    # that is, and the moves themselves are checked below)


def test_the_moves_of_a_spread_replay():
    """Each call reaches the core nudged, earlier or later, by one of the given delays (seeded); no
    process's own times move (its host time, its sleeps and wakes keep theirs)."""
    from dbtier.prediction.events import Streams
    from dbtier.prediction.replay import _arrivals_moved

    ev = np.zeros(6, dtype=native.REPLAY_EVENT)
    ev["kind"] = [trace.CALL, trace.CALL, trace.SYNC, trace.CALL, trace.CALL, trace.SYNC]
    ev["host_ns"] = [20_000, 5_000, 0, 20_000, 0, 0]
    streams = Streams(ev, np.zeros(1, dtype=np.int64), np.zeros(6, dtype=trace.RECORD))
    delays = np.array([0, 10_000, 40_000, 2**40], dtype=np.int64)  # the last beyond what a nudge holds
    one = _arrivals_moved(streams, np.random.default_rng(7), delays).events
    again = _arrivals_moved(streams, np.random.default_rng(7), delays).events
    assert (one["nudge_ns"] == again["nudge_ns"]).all()  # seeded
    assert (one[["host_ns", "t0", "t1", "late_ns"]] == ev[["host_ns", "t0", "t1", "late_ns"]]).all()
    calls = ev["kind"] == trace.CALL
    assert (one["nudge_ns"][~calls] == 0).all() and (ev["nudge_ns"] == 0).all()
    limit = np.iinfo(np.int32).max
    many = np.concatenate([_arrivals_moved(streams, np.random.default_rng(k), delays).events["nudge_ns"][calls]
                           for k in range(50)]).astype(np.int64)
    assert set(np.abs(many)) == {0, 10_000, 40_000, limit}  # each a delay given, the largest held to its field
    assert (many < 0).any() and (many > 0).any()  # both ways


def test_transaction_latencies_of_the_python_oltp_driver(module_shm_dir, tmp_path):
    """dbtier's own OLTP terminals hand each transaction to the lab as pgbench's log does: every type
    comes back as recorded, and on flash its disk reads and WAL flushes shrink."""
    out = tmp_path / "runs"
    out.mkdir()

    def attempt():
        return recorded_on_a_disk(module_shm_dir, out, "oltp", "--warehouses", "1", "--items", "2000", "--customers",
                                  "300", "--clients", "2", "--duration", "3", "--warmup", "1", "--driver", "python")

    def check(result):
        _run_dir, same = result
        assert {"new_order", "payment"} <= set(same)
        for kind in ("new_order", "payment"):
            rec, pred = same[kind]["recorded"], same[kind]["predicted"]
            assert rec["count"] == pred["count"] > 10
            # the mean: see the pgbench test. The Python terminals' own time is in the recorded latency,
            # so a host that stalls them moves it: measured 6.8% off with the machine's CPUs busy
            assert pred["mean_ms"] == pytest.approx(rec["mean_ms"], rel=0.05)

    run_dir, same = retry_while_host_steals(attempt, check)
    flash = predicted(run_dir, tmp_path, "--place", "data=ssd")["phases"][0]["latency"]
    for kind in ("new_order", "payment"):  # each commit waits for a WAL flush: a disk's ms against flash's
        assert flash[kind]["predicted"]["p50_ms"] < 0.5 * same[kind]["recorded"]["p50_ms"]


def test_a_slower_cpu_predicted_against_one_run_live(module_shm_dir, tmp_path):
    """insert-loop (CPU-bound) recorded at this machine's CPU, predicted with --cpu-scale 2, and run
    live with --cpu-scale 2: the replay's scaled CPU between calls and the interposer's dilation agree
    (measured within 2%; 10% allowed for the host). 150,000 rows, about 0.6 s of CPU: at 30,000 rows
    (0.12-0.17 s of CPU) one hiccup of the host weighed enough that two runs at the same CPU speed
    once came out 15% apart."""
    out = tmp_path / "runs"
    common = ["--rows", "150000", "-d", "ssd=ssd-sata-mlc", "-q", "--workspace", str(module_shm_dir)]
    dbtier("run", "insert-loop", *common, "--trace", "--output", str(out / "rec"), check=True)
    run_dir = next((out / "rec").glob("insert-loop-*"))
    pred = sum(ph["predicted"]["elapsed_s"] for ph in predicted(run_dir, tmp_path, "--cpu-scale", "2")["phases"])
    recorded_cpu = json.loads((run_dir / "result.json").read_text())["server_cpu_s"]

    def attempt():
        live = tmp_path / "live.json"
        dbtier("run", "insert-loop", *common, "--cpu-scale", "2", "--output", str(out / "live"), "--json", str(live),
               check=True)
        return json.loads(live.read_text())

    def check(doc):
        assert doc["cpu_dilation_s"] > 0.2 * doc["elapsed_s"], doc["cpu_dilation_s"]  # CPU-bound: K shows
        assert pred == pytest.approx(doc["elapsed_s"], rel=0.10), (pred, doc["elapsed_s"])

    def other_cpu_speed(doc):
        """Two runs of the same work: this VM's CPU is not always as fast (identical loops measured
        0.26 to 0.32 s). The live run's own CPU time (less the dilation) against the recorded one's."""
        r = (doc["server_cpu_s"] - doc["cpu_dilation_s"]) / recorded_cpu
        return f"the same work took {r:.2f} times the recorded CPU time" if abs(r - 1) > 0.05 else None
    retry_while_host_steals(attempt, check, host_slow=other_cpu_speed)


def test_a_scale_model_run_predicts_with_its_profiles_scaled(module_shm_dir, tmp_path):
    """A run at --scale-model 1000 (the table's seeks cross a thousand times as many cylinders, as the
    full-size table's did) predicted on the same profile named again: the what-if profile is scaled
    alike, so the same seeks and the same r_await; unscaled, the table sits on a few cylinders. Both
    runs are made in one attempt: a busy host's lateness would move one and not the other."""

    def attempt():
        out = tmp_path / f"runs{len(list(tmp_path.glob('runs*')))}"
        awaits = {}
        for scale, sizes in (("1", []), ("1000", ["--cache", "32GB", "--scale-model", "1000"])):
            dbtier("run", "random-index", "--rows", str(ROWS), "-d", "hdd=hdd-sata-7200", "--trace", "-q", *sizes,
                   "--workspace", str(module_shm_dir), "--output", str(out / scale), check=True)
            awaits[scale] = next((out / scale).glob("random-index-*"))
        (phase,) = predicted(awaits["1000"], tmp_path, "-d", "hdd=hdd-sata-7200")["phases"]
        unscaled = json.loads((awaits["1"] / "result.json").read_text())["devices"][0]["iostat"]["r_await"]
        return phase["predicted"]["devices"][0], phase["recorded"]["devices"][0], unscaled

    def check(devices):
        pred, rec, unscaled = devices
        assert pred["iostat"]["r_await"] == pytest.approx(rec["iostat"]["r_await"], rel=0.02)
        # the same lookups unscaled: shorter seeks on the 1 TB disk
        assert rec["iostat"]["r_await"] > unscaled + 0.3, (rec["iostat"]["r_await"], unscaled)

    retry_while_host_steals(attempt, check)


def test_a_prediction_the_hosts_cpus_cannot_keep_says_so():
    """Freed devices can leave a many-process run CPU-bound: the replay keeps each process's CPU time but
    does not share CPUs, so the prediction says when the recorded CPU would fill most of the host's
    CPUs over the predicted time (a 7-session replay on 2 CPUs: 1.68 + 0.41 CPU-s, 0.77 s predicted
    on a SATA SSD, 1.3 s live)."""
    from types import SimpleNamespace

    from dbtier.prediction.replay import _cpu_bound_note

    rec = SimpleNamespace(result={"lab": {"host": {"cpus": 2}}})
    phase = {"server_cpu_s": 1.68, "client_cpu_s": 0.41}
    note = _cpu_bound_note(rec, phase, 0.77, 1.0)
    assert note and "2.09 CPU-seconds" in note and "on the host's 2 CPUs, against 0.77 s predicted" in note
    assert _cpu_bound_note(rec, phase, 3.0, 1.0) is None  # 1.04 s of 3 s: the CPUs keep up
    assert _cpu_bound_note(rec, phase, 2.5, 2.0) is not None  # a server twice as slow: 1.89 s of 2.5 s
    assert _cpu_bound_note(SimpleNamespace(result={"lab": {}}), phase, 0.77, 1.0) is None  # no host facts


def test_reads_from_the_page_cache_are_counted_where_the_placement_puts_them(module_shm_dir, tmp_path):
    """A buffered run's reads the page cache served (the catalogs' and the relation cache's files,
    read again) are counted on their device in the prediction's placement, as their device reads are:
    everything moved to flash, none are left on the disk."""
    out = tmp_path / "runs"
    dbtier("run", "random-index", "--rows", "300", "--io-mode", "buffered", "-d", "hdd=hdd-sata-7200", "-d",
           "ssd=ssd-sata-mlc", "--place", "data=hdd", "--trace", "-q", "--workspace", str(module_shm_dir),
           "--output", str(out), check=True)
    run_dir = next(out.glob("random-index-*"))
    moved = predicted(run_dir, tmp_path, "--place", "data=ssd")["phases"][0]["predicted"]["object_io"]
    cached = [r for r in moved if r.get("cached_reads")]
    assert cached and all(r["device"] == "ssd" for r in cached), cached
