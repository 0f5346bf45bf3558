"""Crash states: the devices' files as a power cut at one instant left them, built from the base image
(the devices' folders copied before the log began) and the timeline (timeline.py).

Each state is named by (seed, index): its kind and instant, and any choice it makes, come from a
generator seeded with both, so any one state is rebuilt bit for bit by itself. Kinds:
- flush: just after a device flush completed (every k-th flush, k spreading the cuts over the run; a
  run that never flushed, after its writes);
- random: at an instant drawn uniformly over the run;
- torn: while one write was not yet durable (in flight or in a volatile cache), part of it persisted
  in units of its device's atomic write (each unit kept or lost at random);
- reorder: at a random instant, some of the writes a volatile cache held persisted and the rest lost
  (at most REORDER_CAP of them), as a drive that destages out of order would leave them.
What was not durable at the instant is lost, except what a torn or reorder state keeps of it."""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dbtier.crash import durlog
from dbtier.devices import native
from dbtier.crash.timeline import INF, Timeline
from dbtier.measure import trace as tracefile
from dbtier.errors import UserError

KINDS = ("flush", "random", "torn", "reorder")
#: a table's or index's file (native/iotap/pgpath.h's class names), whose pages a torn cut prefers
RELATION = next(name for name in native.layout().enum("pg_class") if name == "relation")
#: a reorder state keeps at most this many of the cached writes
REORDER_CAP = 16


@dataclass(frozen=True)
class Cut:
    seed: int
    index: int
    kind: str
    at_ns: int
    torn: tuple[int, tuple[int, ...]] | None = None  # (request row, the atomic units kept)
    kept: tuple[int, ...] = ()                       # reorder: the cached requests kept

    def describe(self) -> str:
        return f"{self.kind} cut {self.index} (seed {self.seed})"


@dataclass
class Pending:
    """What was not on the media at the cut: per file, byte ranges and where they were; and the calls
    just before it."""
    in_page_cache: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # written, not yet sent
    in_flight: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    in_device_cache: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    calls: list[dict] = field(default_factory=list)

#: the calls before a cut a finding shows
CALLS_SHOWN = 8


def plan(tl: Timeline, kinds: tuple[str, ...], seed: int, index: int, count: int, after_ns: int | None = None) -> Cut:
    """Cut `index` of `count`, its kind by turn among `kinds`; after_ns: only at or after that instant
    (what followed an injected fsync error; its first cut is at the end, where all it did is done)."""
    kind = kinds[index % len(kinds)]
    rng = np.random.default_rng([seed, index])
    start = max(tl.start_ns, after_ns or 0)
    end = max(tl.end_ns, start + 1)
    if after_ns is not None and index == 0:
        return Cut(seed, index, "end", end)
    if kind == "flush":  # a run that never flushed (fsync = off): after its writes instead
        points = tl.flushes if len(tl.flushes) else np.sort(tl.requests.complete)
        points = points[points >= start]
        n = len(points)
        if not n:
            raise UserError("the run wrote nothing to its devices, so there is nothing to cut")
        per_kind = max(1, -(-count // len(kinds)))
        step = max(1, n // per_kind)
        k = (index // len(kinds)) * step % n
        return Cut(seed, index, kind, int(points[k]))
    if kind == "random":
        return Cut(seed, index, kind, int(rng.integers(start, end)))
    req = tl.requests
    if kind == "torn":
        unit = np.array([tl.facts[d].atomic_bytes for d in req.dev], dtype=np.uint64)
        tearable = np.flatnonzero((req.len > unit) & (req.arrival >= start))
        if not len(tearable):
            raise UserError("no write of the run was larger than its device's atomic write, so none can be torn")
        # three tears in four are of a table's or index's pages, if the run wrote any: the log's far more
        # numerous writes are guarded by their records' CRCs, the pages only by full_page_writes (InnoDB's
        # by its doublewrite buffer)
        relation = np.array([_holds_pages(*tl.files.get(int(f), (0, "", ""))[1:]) for f in req.file[tearable]])
        pool = tearable[relation] if relation.any() and rng.random() < 0.75 else tearable
        row = int(pool[rng.integers(len(pool))])
        until = min(int(req.durable[row]), end) if req.durable[row] != INF else end
        at = int(rng.integers(int(req.arrival[row]), max(until, int(req.arrival[row]) + 1)))
        units = int(-(-int(req.len[row]) // int(unit[row])))
        keep = rng.random(units) < 0.5
        if keep.all() or not keep.any():  # a tear keeps some and loses some
            keep[rng.integers(units)] = not keep[0] if units > 1 else False
        return Cut(seed, index, kind, at, torn=(row, tuple(int(u) for u in np.flatnonzero(keep))))
    if kind == "reorder":
        at = int(rng.integers(start, end))
        cached = np.flatnonzero((req.complete <= at) & (req.durable > at))
        kept = cached[rng.random(len(cached)) < 0.5][:REORDER_CAP] if len(cached) else cached
        return Cut(seed, index, kind, at, kept=tuple(int(k) for k in kept))
    raise UserError(f"unknown kind of cut {kind!r}: one of {', '.join(KINDS)}")


def _holds_pages(path: str, kind: str) -> bool:
    """A file of a table's or index's pages: PostgreSQL's relation files (the interposer's class), or
    InnoDB's tablespaces (a table's .ibd, the system tablespace, the undo tablespaces), which the
    interposer classes as no relation."""
    name = os.path.basename(path)
    return kind == RELATION or name.endswith(".ibd") or name.startswith(("ibdata", "undo"))


class Builder:
    """Lays states out one after another in time order: the media image moves forward with the cuts
    (a state at an earlier instant than the last starts the media again from the base)."""

    def __init__(self, tl: Timeline, base: Path, device_dirs: list[Path], base_inodes: dict[str, tuple[int, int]],
                 file_inodes: dict[int, tuple[int, int]], scratch: Path):
        self.tl = tl
        self.base = base                       # base/<device number>/..., each device's folder as it was
        self.device_dirs = device_dirs         # the live folders the log's paths are in, by device number
        self.scratch = scratch
        by_inode = {ino: index for index, ino in file_inodes.items()}
        #: base-relative path -> the file index it is (when the run touched it), and back
        self.base_index = {rel: by_inode[ino] for rel, ino in base_inodes.items() if ino in by_inode}
        self.base_of = {index: base / rel for rel, index in self.base_index.items()}
        self._rel_of: dict[str, str | None] = {}   # live path -> its place in a state (_mapped's answers)
        self._skeleton = self._base_skeleton()
        self.spool = open(tl.spool, "rb")
        self._reset()

    def close(self) -> None:
        self.spool.close()

    def _reset(self) -> None:
        media = self.scratch / "media"
        shutil.rmtree(media, ignore_errors=True)
        media.mkdir()
        self.media = media
        self.made: set[int] = set()
        self.names: dict[str, tuple[str, object]] = {}   # live path -> ("index", i) | ("base", base path)
        for rel in self._base_files():
            live = self._live(rel)
            index = self.base_index.get(rel)
            self.names[live] = ("index", index) if index is not None else ("base", self.base / rel)
        self.where = {v[1]: k for k, v in self.names.items() if v[0] == "index"}  # index -> its live path
        self.next_event = 0
        self.at = -1

    def _base_files(self):
        for root, _dirs, files in os.walk(self.base):
            for name in files:
                path = Path(root) / name
                if not path.is_symlink():
                    yield str(path.relative_to(self.base))

    def _live(self, rel: str) -> str:
        dev, _, rest = rel.partition(os.sep)
        return str(self.device_dirs[int(dev)] / rest) if rest else str(self.device_dirs[int(dev)])

    def _mapped(self, live: str) -> str | None:
        """A live path's place in a state folder, relative to it (None: outside every device)."""
        try:
            return self._rel_of[live]
        except KeyError:
            pass
        rel = None
        for dev, folder in enumerate(self.device_dirs):
            try:
                rel = os.path.join(str(dev), str(Path(live).relative_to(folder)))
                break
            except ValueError:
                continue
        self._rel_of[live] = rel = os.path.normpath(rel) if rel is not None else None
        return rel

    def file_index(self, rel: str) -> int | None:
        """The run's file whose place in a state is `rel` (relative to the state's folder), as laid out
        at the instant last built (None: none the run touched)."""
        rel = os.path.normpath(rel)
        return next((index for index, live in self.where.items() if self._mapped(live) == rel), None)

    def _base_skeleton(self) -> list[tuple[str, str, object]]:
        """The base's folders and links, in the order to make them: ("dir", rel, mode) or ("link", rel,
        (its target's place in a state, or None, and the target as it was)). The same in every state."""
        out = []
        for root, dirs, files in os.walk(self.base):
            rel = os.path.relpath(root, self.base)
            for name in dirs + files:
                src = os.path.join(root, name)
                dst = os.path.normpath(os.path.join(rel, name))
                if os.path.islink(src):
                    target = os.readlink(src)
                    out.append(("link", dst, (self._mapped(target), target)))
                elif os.path.isdir(src):
                    out.append(("dir", dst, os.stat(src).st_mode & 0o7777))
        return out

    def _media(self, index: int) -> int:
        path = self.media / str(index)
        if index not in self.made:
            self.made.add(index)
            if index in self.base_of and not path.exists():
                shutil.copyfile(self.base_of[index], path)
            if index not in self.where:  # a file made during the run appears where it was first seen
                live = self.tl.files.get(index, (0, "", ""))[1]
                if live:
                    self.names[live] = ("index", index)
                    self.where[index] = live
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    def _advance(self, at: int) -> None:
        if at < self.at:
            self._reset()
        events, log, req = self.tl.events, self.tl.log, self.tl.requests
        while self.next_event < len(events) and events[self.next_event].t <= at:
            ev = events[self.next_event]
            self.next_event += 1
            if ev.kind == "appear":
                os.close(self._media(ev.index))
                continue
            if ev.kind == "request":
                k = ev.index
                self.spool.seek(int(req.spool_at[k]))
                fd = self._media(int(req.file[k]))
                try:
                    os.pwrite(fd, self.spool.read(int(req.spool_len[k])), int(req.off[k]))
                finally:
                    os.close(fd)
                continue
            e = log.entries[ev.index]
            if ev.kind in ("write", "size"):
                fd = self._media(int(e["file"]))
                try:
                    if ev.kind == "write":
                        os.pwrite(fd, log.payload(ev.index), int(e["off"]))
                    elif e["kind"] == durlog.TRUNCATE:
                        os.ftruncate(fd, int(e["off"]))
                    elif not int(e["aux"]) & durlog.KEEP_SIZE and os.fstat(fd).st_size < int(e["off"] + e["size"]):
                        os.ftruncate(fd, int(e["off"] + e["size"]))
                finally:
                    os.close(fd)
            else:
                old, new = log.names[ev.index]
                index = int(e["file"])
                entry = self.names.pop(old, None)
                if entry and entry[0] == "index":
                    self.where.pop(entry[1], None)
                if ev.kind == "rename" and new:
                    replaced = self.names.get(new)
                    if replaced and replaced[0] == "index":
                        self.where.pop(replaced[1], None)
                    self.names[new] = entry if entry else ("index", index)
                    if self.names[new][0] == "index":
                        self.where[self.names[new][1]] = new
        self.at = at

    def build(self, cut: Cut, out: Path) -> Path:
        """The state at `cut`, as a folder per device number under `out` (made new)."""
        self._advance(cut.at_ns)
        out.mkdir()
        root = str(out)
        made = {root}
        # the folders and links as the base had them (a link into a device's folder points into the state's)
        for what, rel, extra in self._skeleton:
            dst = os.path.join(root, rel)
            if what == "link":
                mapped, target = extra
                os.symlink(os.path.join(root, mapped) if mapped is not None else target, dst)
            else:
                os.mkdir(dst, extra)
                made.add(dst)
        for live, (what, source) in self.names.items():
            rel = self._mapped(live)
            if rel is None:
                continue
            if what == "base":
                src = source
            elif source in self.made:
                src = os.path.join(self.media, str(source))
            elif source in self.base_of:  # touched by the run, nothing of it durable yet
                src = self.base_of[source]
            else:
                continue
            dst = os.path.join(root, rel)
            parent = os.path.dirname(dst)
            if parent not in made:
                os.makedirs(parent, exist_ok=True)
                made.add(parent)
            _copy(src, dst)
        self._perturb(cut, out)
        return out

    def _perturb(self, cut: Cut, out: Path) -> None:
        req = self.tl.requests
        pieces: list[tuple[int, int, int]] = []  # (request row, offset within it, length)
        if cut.torn:
            row, units = cut.torn
            unit = self.tl.facts[int(req.dev[row])].atomic_bytes
            for u in units:
                lo = u * unit
                pieces.append((row, lo, min(unit, int(req.len[row]) - lo)))
        for row in cut.kept:
            pieces.append((row, 0, int(req.len[row])))
        for row, lo, n in pieces:
            live = self.where.get(int(req.file[row]))
            rel = self._mapped(live) if live else None
            if rel is None or not (out / rel).exists():
                continue
            fd = os.open(out / rel, os.O_RDWR)
            try:
                # a write not yet durable never grows its file: the size a journaling file system
                # commits comes after the data it covers
                at = int(req.off[row]) + lo
                n = max(0, min(n, os.fstat(fd).st_size - at, int(req.spool_len[row]) - lo))
                self.spool.seek(int(req.spool_at[row]) + lo)
                os.pwrite(fd, self.spool.read(n), at)
            finally:
                os.close(fd)

    def digest(self, out: Path) -> str:
        """A state's fingerprint: every path under it, what it is, and its bytes (a link's target said
        relative to the state, wherever the state was built)."""
        h = hashlib.sha256()
        for root, dirs, files in sorted(os.walk(out)):
            dirs.sort()
            for name in sorted(dirs + files):
                path = Path(root) / name
                rel = str(path.relative_to(out)).encode()
                if path.is_symlink():
                    h.update(b"L" + rel + b"\0" + os.readlink(path).replace(str(out), "<state>").encode() + b"\0")
                elif path.is_file():
                    h.update(b"F" + rel + b"\0")
                    with open(path, "rb") as f:
                        for chunk in iter(lambda: f.read(1 << 20), b""):
                            h.update(chunk)
                else:
                    h.update(b"D" + rel + b"\0")
        return h.hexdigest()

    def never_written(self, file: int, by_ns: int) -> int:
        """Bytes of `file` the program wrote by `by_ns` that were on no media at the run's end: no
        request sent since covered them (their pages marked clean by a failed fsync), or the request
        that did never became durable. Ranges written twice count once."""
        req, e, end = self.tl.requests, self.tl.log.entries, self.tl.end_ns
        mine = np.flatnonzero((e["kind"] == durlog.WRITE) & (e["file"] == file) & (e["t0"] <= by_ns)
                              & ((e["flags"] & durlog.PAUSED) == 0))
        done = np.flatnonzero((req.file == file) & (req.arrival <= end) & (req.durable <= end))
        arrival, start, stop = req.arrival[done], req.off[done], req.off[done] + req.len[done]
        lost = []
        for i in mine:
            lo, hi, t0 = int(e["off"][i]), int(e["off"][i] + e["len"][i]), int(e["t0"][i])
            if not ((arrival >= t0) & (start <= lo) & (stop >= hi)).any():
                lost.append((lo, hi))
        total, reach = 0, 0
        for lo, hi in sorted(lost):
            total += max(0, hi - max(lo, reach))
            reach = max(reach, hi)
        return total

    def pending(self, at: int) -> Pending:
        """What the cut at `at` found not yet on the media, by file."""
        req, p = self.tl.requests, Pending()
        self._advance(at)

        def name(f: int) -> str:
            return self.where.get(f) or self.tl.files.get(f, (0, str(f), ""))[1]

        for k in np.flatnonzero((req.arrival <= at) & (req.durable > at)):
            where = p.in_flight if req.complete[k] > at else p.in_device_cache
            where.setdefault(name(int(req.file[k])), []).append((int(req.off[k]), int(req.len[k])))
        # written by the program, and no request for those bytes issued since: still in the page cache
        e = self.tl.log.entries
        writes = np.flatnonzero((e["kind"] == durlog.WRITE) & (e["t0"] <= at) & (e["file"] >= 0)
                                & ((e["flags"] & durlog.PAUSED) == 0))
        sent = (req.arrival <= at)
        for i in writes:
            f, lo, hi, t0 = int(e["file"][i]), int(e["off"][i]), int(e["off"][i] + e["len"][i]), int(e["t0"][i])
            mine = sent & (req.file == f) & (req.arrival >= t0) & (req.off <= lo) & (req.off + req.len >= hi)
            if not mine.any():
                p.in_page_cache.setdefault(name(f), []).append((lo, hi - lo))
        calls = self.tl.calls
        last = int(np.searchsorted(calls["submit_ns"], at, side="right"))
        ops = tracefile.OPS
        for c in calls[max(0, last - CALLS_SHOWN):last]:
            p.calls.append({"before_ms": (at - int(c["submit_ns"])) / 1e6, "pid": int(c["pid"]),
                            "call": ops.get(int(c["op"]), f"op {int(c['op'])}"),
                            "file": name(int(c["file"])) if c["file"] >= 0 else "", "offset": int(c["offset"]),
                            "bytes": int(c["len"])})
        return p


def _copy(src, dst: str) -> None:
    """src's bytes into a new file dst (shutil.copyfile without its checks: a state is a thousand files)."""
    fin = os.open(src, os.O_RDONLY)
    try:
        fout = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            left, at = os.fstat(fin).st_size, 0
            while left > 0:
                n = os.sendfile(fout, fin, at, min(left, 1 << 30))
                if n == 0:  # the file shrank as it was read: what there was is what is copied
                    break
                at, left = at + n, left - n
        finally:
            os.close(fout)
    finally:
        os.close(fin)
