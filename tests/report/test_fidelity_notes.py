"""The emulation's lateness said beside a run's figures: a device whose I/Os the model took no time over
(every one served by the emulated page cache) but which came late is said without a share of nothing
(a CI run's `compare` once ended in a ZeroDivisionError there)."""

from dbtier.report.runview import fidelity_notes


def device(read_ns: int, late_mean_us: float, count: int = 10) -> dict:
    return {"device": "nvme", "lateness": {"count": count, "mean_us": late_mean_us, "p99_us": 2 * late_mean_us},
            "counters": {"read_ns": read_ns, "write_ns": 0, "flush_ns": 0}}


def test_late_ios_the_model_took_no_time_over():
    (note,) = fidelity_notes({"devices": [device(0, 30.0)], "host_steal_s": 0.01})
    assert "I/Os completed 30 us late on average (the modelled 0 us; p99 60 us)" in note


def test_late_ios_as_a_share_of_the_modelled_time():
    (note,) = fidelity_notes({"devices": [device(10 * 100_000, 10.0)]})
    assert "(10.0% of the modelled 100 us; p99 20 us)" in note
    assert fidelity_notes({"devices": [device(10 * 100_000, 1.0)]}) == []
