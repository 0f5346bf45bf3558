"""A damaged page's fsyncs, said in words from the trace's calls: an fsync covers only what was written
before it began, so a write made while one ran, with none begun after it returned by the cut, was
covered by none (MariaDB 10.11 with innodb_flush_method = fsync, docs/crash.md)."""

from __future__ import annotations

import numpy as np

from dbtier.crash import pagestory
from dbtier.measure import trace as tracefile

MS = 1_000_000
FILE, OTHER = 3, 4


def calls(*fsyncs: tuple[int, float, float]) -> np.ndarray:
    """fsync calls (file, began at ms, returned at ms), in the order they began."""
    out = np.zeros(len(fsyncs), dtype=tracefile.RECORD)
    for row, (file, began, returned) in zip(out, fsyncs):
        row["kind"], row["op"], row["file"] = tracefile.CALL, tracefile.FLUSH, file
        row["submit_ns"], row["end_ns"] = int(began * MS), int(returned * MS)
    return out


def said(fsyncs: np.ndarray, write_ms: float, cut_ms: float) -> tuple[dict, str]:
    text: list[str] = []
    facts = pagestory._fsyncs(fsyncs, FILE, int(write_ms * MS), int(cut_ms * MS), text)
    return facts, "".join(text)


def test_a_write_made_while_an_fsync_ran_and_none_after_is_covered_by_none():
    facts, text = said(calls((FILE, 10.0, 13.0), (OTHER, 20.0, 21.0), (FILE, 79.0, 90.0)), write_ms=10.6, cut_ms=80.0)
    assert facts == {"running_at_write": 1, "begun_after": 1, "returned_after": 0,
                     "running_began_ms_before_write": 0.6, "running_returned_ms_after_write": 2.4}
    assert "it began 0.60 ms before the write and returned 2.40 ms after it" in text
    assert "(1 began after it, the first 1.00 ms before the cut, and had not returned)" in text
    assert "an fsync covers only what was written before it began" in text


def test_an_fsync_begun_after_the_write_and_returned_is_said():
    facts, text = said(calls((FILE, 10.0, 13.0), (FILE, 15.0, 17.0)), write_ms=10.6, cut_ms=80.0)
    assert facts["returned_after"] == 1
    assert "1 fsync of the file began after the write and returned before the cut, the first 4.40 ms after" in text
    assert "covers only" not in text


def test_no_fsync_at_all():
    facts, text = said(calls((OTHER, 1.0, 2.0)), write_ms=10.0, cut_ms=80.0)
    assert facts == {"running_at_write": 0, "begun_after": 0, "returned_after": 0}
    assert text == " No fsync of the file begun after the write returned before the cut."
