"""The story of a page a recovering server named as damaged, told from the durability log and the
trace: how often the server wrote it before the cut, whether its last write was on the media at the
cut (and if not, where it was), what the media held instead, and the fsyncs of its file around that
write. An fsync covers what was written before it began; a write made while one ran, with none begun
after it, was covered by no fsync, whatever the server concluded from the fsync's return."""

from __future__ import annotations

import os

import numpy as np

from dbtier.crash import durlog
from dbtier.crash.states import Builder, Cut
from dbtier.measure import trace as tracefile


def tell(builder: Builder, cut: Cut, rel: str, offset: int, size: int, label: str) -> dict | None:
    """The page at bytes [offset, offset + size) of the state's file `rel` (relative to the state's
    folder), as of `cut` (the builder laid out at it); label: how the server named the page. None: the
    run never wrote that file."""
    index = builder.file_index(rel)
    if index is None:
        return None
    at, tl = cut.at_ns, builder.tl
    e = tl.log.entries
    wrote = np.flatnonzero((e["kind"] == durlog.WRITE) & (e["file"] == index) & (e["t0"] <= at)
                           & (e["off"] < offset + size) & (e["off"] + e["len"] > offset)
                           & ((e["flags"] & durlog.PAUSED) == 0))
    story = {"file": rel, "offset": offset, "bytes": size, "writes": int(len(wrote))}
    name = f"{label} ({os.path.basename(rel)}, bytes {offset:,} to {offset + size - 1:,})"
    if not len(wrote):
        story["text"] = f"{name}: the server did not write it during the run; the media held it as the run found it."
        return story
    last = int(wrote[-1])
    t_write = int(e["t0"][last])
    req = tl.requests
    mine = (req.file == index) & (req.off < offset + size) & (req.off + req.len > offset) & (req.arrival <= at)
    on_media_rows = np.flatnonzero(mine & ((req.durable <= at) | np.isin(np.arange(len(req.file)), cut.kept)))
    carried = np.flatnonzero(mine & (req.arrival >= t_write))  # the requests that carried the last write's bytes
    on_media = bool(np.isin(carried, on_media_rows).any())
    story.update(last_write_ms_before=(at - t_write) / 1e6, on_media=on_media)
    text = [f"{name}: written {len(wrote):,} time{'s' * (len(wrote) != 1)} during the run, the last "
            f"{(at - t_write) / 1e6:,.2f} ms before the cut"]
    if on_media:
        text.append("; that write was on the media at the cut.")
    else:
        if not len(carried):
            where = "still in the page cache: not yet written back"
        else:
            k = int(carried[-1])
            sent = (at - int(req.arrival[k])) / 1e6
            where = (f"in flight to the device, sent {sent:,.2f} ms before the cut" if req.complete[k] > at
                     else f"in the drive's volatile cache, sent {sent:,.2f} ms before the cut")
        text.append(f"; that write was not on the media at the cut ({where}).")
        text.append(" The media held " + _held(tl, cut, req, on_media_rows, offset, size, at, story) + ".")
        story["fsyncs"] = _fsyncs(tl.calls, index, t_write, at, text)
    story["text"] = "".join(text)
    return story


def _held(tl, cut: Cut, req, on_media_rows: np.ndarray, offset: int, size: int, at: int, story: dict) -> str:
    """What the media held of the page at the cut, in words: the last request on it, whole or torn."""
    newest = int(on_media_rows[np.argmax(req.arrival[on_media_rows])]) if len(on_media_rows) else None
    row = cut.torn[0] if cut.torn else None
    if row is not None and req.off[row] < offset + size and req.off[row] + req.len[row] > offset \
            and (newest is None or req.arrival[row] > req.arrival[newest]):
        unit = tl.facts[int(req.dev[row])].atomic_bytes
        first = max(0, offset - int(req.off[row])) // unit
        last = (min(offset + size, int(req.off[row] + req.len[row])) - int(req.off[row]) - 1) // unit
        reached = sum(1 for u in cut.torn[1] if first <= u <= last)
        story["torn"] = {"unit_bytes": unit, "units": last - first + 1, "reached": reached}
        return (f"a torn copy of the write sent {(at - int(req.arrival[row])) / 1e6:,.2f} ms before the cut: "
                f"{reached:,} of the page's {last - first + 1:,} units of {unit:,} bytes reached it, the rest held "
                "what was there before")
    if newest is None:
        return "the page as the run found it"
    return f"the page as sent {(at - int(req.arrival[newest])) / 1e6:,.2f} ms before the cut"


def _fsyncs(calls: np.ndarray, index: int, t_write: int, at: int, text: list[str]) -> dict:
    """The fsyncs of the file around its last write (said into text): one running as it was written,
    and those begun after it before the cut, returned by then or not."""
    flushes = calls[(calls["op"] == tracefile.FLUSH) & (calls["file"] == index) & (calls["submit_ns"] <= at)]
    running = flushes[(flushes["submit_ns"] < t_write) & (flushes["end_ns"] > t_write)]
    after = flushes[flushes["submit_ns"] >= t_write]
    returned = after[after["end_ns"] <= at]
    out = {"running_at_write": int(len(running)), "begun_after": int(len(after)), "returned_after": int(len(returned))}
    if len(running):
        f = running[-1]
        out["running_began_ms_before_write"] = (t_write - int(f["submit_ns"])) / 1e6
        out["running_returned_ms_after_write"] = (int(f["end_ns"]) - t_write) / 1e6
        text.append(f" An fsync of the file was running as it was written: it began "
                    f"{out['running_began_ms_before_write']:,.2f} ms before the write and returned "
                    f"{out['running_returned_ms_after_write']:,.2f} ms after it.")
    if len(returned):
        text.append(f" {len(returned):,} fsync{'s' * (len(returned) != 1)} of the file began after the write and "
                    f"returned before the cut, the first {(int(returned['submit_ns'][0]) - t_write) / 1e6:,.2f} ms "
                    "after the write.")
        return out
    pending = len(after) - len(returned)
    still = (f" ({pending:,} began after it, the first {(at - int(after['submit_ns'][0])) / 1e6:,.2f} ms before the "
             "cut, and had not returned)") if pending else ""
    text.append(f" No fsync of the file begun after the write returned before the cut{still}"
                + (": the only one that returned after the write had begun before it, and an fsync covers only what "
                   "was written before it began." if len(running) else "."))
    return out
