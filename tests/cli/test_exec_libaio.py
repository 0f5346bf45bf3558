"""Linux AIO through the interposer: fio's libaio engine keeps 32 requests in flight on an emulated
device under `dbtier exec`, each does its real I/O, and each completes when the device model, with the
others queued beside it, says: fio's IOPS are the model's own closed loop at a queue depth of 32. Traced,
the run is replayed offline, requests in flight and all, for another drive."""

import json
import shutil

import numpy as np
import pytest

from tests.conftest import dbtier, retry_while_host_steals

needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (make setup installs it as root)")

#: a flash drive slow enough that fio and the interposer keep up on a shared 2-core VM: 4 channels, a
#: 16 KiB read holds one for 1,000 us plus 164 us of transfer, then 30 us on the 550 MB/s interface. At
#: depth 32 the channels are never idle (the interface overlaps them): 4 / 1.164 ms = 3,436 IOPS; one at a
#: time gets 1 / 1.194 ms = 838
SLOW_FLASH = """kind = "ssd"
[params]
channels = 4
read_latency_us = 1000
channel_read_mb_s = 100
interface_mb_s = 550
page_kib = 16
"""


def model_iops(profile_path, depth: int, n: int = 4000) -> float:
    from dbtier.devices import profile

    rng = np.random.default_rng(7)
    model = profile.load(str(profile_path)).model()
    addrs = rng.integers(0, 1024, n).astype(np.uint64) * np.uint64(16384)
    issue, done = model.closed(np.ones(n, dtype=np.uint8), addrs, np.full(n, 16384, dtype=np.uint32), jobs=depth)
    return n / ((int(done.max()) - int(issue.min())) / 1e9)


def fio(directory, depth: int) -> list[str]:
    return ["fio", "--name=q", f"--directory={directory}", "--ioengine=libaio", f"--iodepth={depth}", "--direct=1",
            "--rw=randread", "--bs=16k", "--size=16m", "--time_based", "--runtime=2", "--output-format=json"]


@needs_fio
def test_fio_libaio_at_depth_32_gets_the_models_queue(shm_dir, tmp_path):
    prof = tmp_path / "slow-flash.toml"
    prof.write_text(SLOW_FLASH)
    qd32, qd1 = model_iops(prof, 32), model_iops(prof, 1)
    assert qd32 == pytest.approx(4 / 1.164e-3, rel=0.01) and qd1 == pytest.approx(1 / 1.1938e-3, rel=0.01)

    def attempt():
        out = tmp_path / "exec.json"
        proc = dbtier("exec", "--json", str(out), "-d", f"d={prof}:{shm_dir}", "--", *fio(shm_dir, 32))
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["jobs"][0]["read"], json.loads(out.read_text())

    def check(result):
        read, doc = result
        # each request went through the emulation (the counters hold fio's reads and its file's layout)
        assert doc["devices"][0]["counters"]["reads"] >= read["total_ios"] > 1000
        assert read["iops"] == pytest.approx(qd32, rel=0.05), (read["iops"], qd32)
        # and waited its turn among 32: fio's mean completion latency is the queue's, 32 / IOPS
        assert read["clat_ns"]["mean"] / 1e9 == pytest.approx(32 / qd32, rel=0.05)
    retry_while_host_steals(attempt, check)


@needs_fio
def test_fio_libaio_on_a_file_outside_any_device_is_the_kernels(shm_dir, tmp_path):
    """A context whose requests are all on other files is the kernel's alone: fio runs as it does
    without the interposer, and exec reports no device I/O for it."""
    other = tmp_path / "elsewhere"
    other.mkdir()
    out = tmp_path / "exec.json"
    proc = dbtier("exec", "--json", str(out), "-d", f"d=ram-san:{shm_dir}", "--", *fio(other, 8))
    assert proc.returncode == 0, proc.stderr
    read = json.loads(proc.stdout)["jobs"][0]["read"]
    assert read["total_ios"] > 0
    assert json.loads(out.read_text())["devices"][0]["counters"]["reads"] == 0


def replayed_iops(trace_dir, recs, streams, profile_path, scratch) -> float:
    """The reads' rate as the offline replay gives it for the recorded calls on the profile's device."""
    from dbtier.devices import native
    from dbtier.devices.profile import load
    from dbtier.devices.session import Device, Session
    from dbtier.measure import trace

    # its state in the test's own folder, which goes with it (not beside it, in /dev/shm)
    session = Session([Device("d", scratch, load(str(profile_path)))], scratch / f"state-{profile_path.stem}")
    session.create()
    replay = native.Replay(session.state_path)
    try:
        files = np.unique(recs["file"][recs["file"] >= 0])
        chunks = trace.load_layout(trace_dir)["chunks"]
        replay.layout(np.c_[files, np.zeros_like(files), np.zeros_like(files)],
                      np.array([[f, 0, c, a] for f, c, a in chunks], dtype=np.uint64).reshape(-1, 4))
        t0 = int(streams.events["t0"].min())
        start, end, _flags, _reqs = replay.run(streams.events, t0, t0)
    finally:
        replay.close()
    ev = streams.events
    reads = (ev["kind"] == trace.CALL) & ((ev["flags"] & trace.FLAGS["async"]) != 0) & (ev["op"] == trace.READ)
    return int(reads.sum()) / ((int(end[reads].max()) - int(start[reads].min())) / 1e9)


@needs_fio
def test_a_traced_libaio_run_is_predicted_for_another_device(shm_dir, tmp_path):
    """Traced, each request is one call record marked asynchronous (its completion the model's, its end
    when fio reaped it) and each reap a sleep tied to the request it waited for. Replayed, the requests
    queue at the device again while fio goes on: on the recorded drive the replay gives the recorded
    rate; on a drive twice as fast it gives what fio measures there live."""
    from dbtier.errors import UserError
    from dbtier.measure import trace
    from dbtier.prediction import events

    slow, fast = tmp_path / "slow-flash.toml", tmp_path / "fast-flash.toml"
    slow.write_text(SLOW_FLASH)
    fast.write_text(SLOW_FLASH.replace("read_latency_us = 1000", "read_latency_us = 500"))
    proc = dbtier("exec", "--trace", str(tmp_path / "t"), "-d", f"d={slow}:{shm_dir}", "--", *fio(shm_dir, 32))
    assert proc.returncode == 0, proc.stderr
    read = json.loads(proc.stdout)["jobs"][0]["read"]
    recs = trace.read_records(tmp_path / "t", in_order=True)
    calls = trace.calls(recs)
    aio = calls[(calls["flags"] & trace.FLAGS["async"]) != 0]
    reads = aio[aio["op"] == trace.READ]
    assert len(reads) >= read["total_ios"] and set(reads["len"]) == {16384}
    assert (reads["complete_ns"] >= reads["submit_ns"] + 1_164_000).all()  # no read before its channel's time
    assert (reads["end_ns"] >= reads["complete_ns"]).all()  # and none reaped before it completed
    interval = events.interval_records(recs, int(recs["submit_ns"].min()), int(recs["submit_ns"].max()))
    streams = events.build(interval, {}, same_devices={0})
    ev = streams.events
    reaps = (ev["kind"] == trace.SYNC) & ((ev["flags"] & trace.SYNC_AIO) != 0)
    tied = ev["dep"][reaps & (ev["dep"] >= 0)]
    assert len(tied) > 0.9 * len(reads)  # fio reaps at least one at a time, each waiting for its request
    assert ((ev["flags"][tied] & trace.FLAGS["async"]) != 0).all()

    recorded = len(reads) / ((int(reads["complete_ns"].max()) - int(reads["submit_ns"].min())) / 1e9)
    assert replayed_iops(tmp_path / "t", recs, streams, slow, shm_dir) == pytest.approx(recorded, rel=0.01)
    predicted = replayed_iops(tmp_path / "t", recs, streams, fast, shm_dir)
    assert predicted == pytest.approx(model_iops(fast, 32), rel=0.05), predicted  # the faster drive's own queue

    def attempt():
        proc = dbtier("exec", "-d", f"d={fast}:{shm_dir}", "--", *fio(shm_dir, 32))
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["jobs"][0]["read"]["iops"]

    retry_while_host_steals(attempt, lambda live: approx_check(predicted, live))

    # a recording made before the reaps were recorded cannot say when fio took each request back
    older = interval[~((interval["kind"] == trace.SYNC) & ((interval["flags"] & trace.SYNC_AIO) != 0))]
    with pytest.raises(UserError, match="no record of their reaps"):
        events.prepare(older)


def approx_check(predicted: float, live: float) -> None:
    assert predicted == pytest.approx(live, rel=0.05), (predicted, live)
