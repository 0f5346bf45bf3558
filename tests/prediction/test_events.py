"""The replay's events of trace records: each field as native/iotap/replay.h says a replay takes it."""

import numpy as np

from dbtier.devices import native
from dbtier.measure import trace
from dbtier.prediction import events


def test_a_record_becomes_the_event_the_replay_takes():
    rec = np.zeros(4, dtype=trace.RECORD)
    rec["kind"] = [trace.CALL, trace.CALL, trace.CALL, trace.SYNC]
    rec["op"] = [trace.READ, trace.READ, trace.FLUSH, trace.SLEEP]
    rec["submit_ns"] = [1000, 2000, 3000, 4000]
    rec["start_ns"] = [1300, 1900, 3100, 4000]     # the host call's end (the second: before its start)
    rec["complete_ns"] = [1800, 0, 3500, 0]        # what it waited for
    rec["end_ns"] = [1850, 2100, 3400, 3000]       # returned: 50 ns late; 100 ns late; not late; a reversed sync
    rec["offset"], rec["len"], rec["file"], rec["dev"] = 8192, 8192, [3, 4, -1, -1], [1, 2, 1, 1]
    rec["aux"] = [10, trace.SIZE_UNKNOWN, 7, 9]    # a read's size in pages (unknown); fsync's flags
    rec["flags"] = [trace.FLAGS["direct"] | trace.FLAGS["page_cache"], trace.FLAGS["dsync"], 0,
                    trace.SYNC_SEM | events.CLIENT]
    ev = native.replay_events(rec, np.array([0, 0, 1, 1]), np.array([-1, -1, -1, 0]), np.array([-1, -1, -1, -1]))
    assert list(ev["t0"]) == [1000, 2000, 3000, 4000] and list(ev["t1"]) == [1850, 2100, 3400, 4000]
    assert list(ev["host_ns"]) == [300, 0, 100, 0]
    assert list(ev["late_ns"]) == [50, 100, 0, 0]
    assert list(ev["file_size"]) == [10 * trace.SIZE_PAGE, 2**64 - 1, 2**64 - 1, 2**64 - 1]
    assert list(ev["aux"]) == [0, 0, 7, 0] and list(ev["dev"]) == [1, 2, 1, 0]
    assert list(ev["flags"]) == [trace.FLAGS["direct"], trace.FLAGS["dsync"], 0, trace.SYNC_SEM | events.CLIENT]
    assert list(ev["stream"]) == [0, 0, 1, 1] and list(ev["dep"]) == [-1, -1, -1, 0]
    assert list(ev["file"]) == [3, 4, -1, -1] and list(ev["kind"]) == list(rec["kind"])
    assert (ev["off"] == 8192).all() and (ev["len"] == 8192).all() and (ev["nudge_ns"] == 0).all()
