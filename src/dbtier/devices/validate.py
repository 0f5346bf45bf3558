"""`dbtier devices validate`: a real drive's measured service times against the model's, as DiskSim's
validation does it.

A trace in DiskSim's "validate" format holds, per request, what a real drive did: R or W, the drive
buffer's action (Hit, Miss, Doub, Trip; informational), the block number and size in 512-byte
sectors, the measured service time (us) and the time to the next request (us). It is replayed as
DiskSim replays it (disksim_iodriver.c, iotrace_validate_get_ioreq_event): one request at a time,
each issued that long after the previous one completed. The figure of merit is DiskSim's demerit
(src/rms.c): both service-time distributions are binned as its statdefs bin "Physical access time"
(1,750 buckets from 0, 1 us wide, each 1% wider than the last), printed to 6 decimals as its
report does, and the RMS of the horizontal distance between the two cumulative curves is taken at
every 0.0001 of probability. Recomputed here step for step, so our figure sits beside DiskSim's own."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dbtier.devices import native
from dbtier.devices.profile import Profile
from dbtier.errors import UserError

SECTOR = 512
BUFFER_ACTIONS = ("Hit", "Miss", "Doub", "Trip")
#: DiskSim's statdefs, "Physical access time": Distribution size 1750, Scale 1000, Start 0 step 1 grow 1
BUCKETS, SCALE, STEP, GROW = 1750, 1000, 1, 1
#: src/rms.c: RMS_INCR
RMS_INCR = 0.0001
MAX_TRACE_BYTES = 256 << 20


@dataclass(frozen=True)
class Trace:
    ops: np.ndarray        # native.OP_READ / OP_WRITE
    blocks: np.ndarray     # first sector
    sectors: np.ndarray
    service_ms: np.ndarray  # the real drive's measured service time
    next_us: np.ndarray    # think time before the next request


def read_trace(path: Path) -> Trace:
    try:
        if path.stat().st_size > MAX_TRACE_BYTES:
            raise UserError(f"trace {path} is larger than {MAX_TRACE_BYTES >> 20} MiB; give a validate-format trace")
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read trace {path}: {getattr(exc, 'strerror', None) or exc}") from None
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        f = line.split()
        try:
            if len(f) != 6 or f[0] not in ("R", "W") or f[1] not in BUFFER_ACTIONS:
                raise ValueError
            row = (native.OP_READ if f[0] == "R" else native.OP_WRITE, int(f[2]), int(f[3]), float(f[4]), float(f[5]))
            if row[1] < 0 or row[2] <= 0 or not (math.isfinite(row[3]) and math.isfinite(row[4])) or row[3] < 0 \
                    or row[4] < 0:
                raise ValueError
        except ValueError:
            raise UserError(f"{path}:{n}: not a DiskSim validate line (R|W, Hit|Miss|Doub|Trip, block, sectors, "
                            f"service us, next us): {line.strip()[:80]!r}") from None
        rows.append(row)
    if not rows:
        raise UserError(f"trace {path} holds no requests")
    a = np.array(rows, dtype=float)
    return Trace(a[:, 0].astype(np.uint8), a[:, 1].astype(np.uint64), a[:, 2].astype(np.uint32), a[:, 3] / 1e3,
                 a[:, 4])


def replay(profile: Profile, trace: Trace) -> np.ndarray:
    """The model's service time (ms) of each request, issued as DiskSim issues them."""
    lengths = trace.sectors.astype(np.uint64) * SECTOR
    if int(lengths.max()) > 0xFFFFFFFF:
        raise UserError("a request in the trace is larger than 4 GiB")
    addrs = trace.blocks * np.uint64(SECTOR)
    capacity = profile.params.get("capacity_gb", 0) * 1e9 * profile.params.get("members", 1)
    if capacity and float(addrs.max() + lengths.max()) > capacity:
        raise UserError(f"the trace reaches block {int(trace.blocks.max()):,}, beyond {profile.name}'s "
                        f"{profile.params['capacity_gb']:g} GB: give the profile of the drive it was measured on")
    issue, done = profile.model().closed(trace.ops, addrs, lengths.astype(np.uint32),
                                         np.round(trace.next_us * 1e3), jobs=1)
    return (done - issue).astype(float) / 1e6


def bucket_starts() -> np.ndarray:
    starts, b = [], 0
    for _ in range(BUCKETS):
        starts.append(b)
        b += STEP + int(abs(b) * GROW / 100)
    return np.array(starts)


def distribution(ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DiskSim's printed distribution: (bucket start in ms, cumulative fraction, to 6 decimals), up to
    the first row that reaches 1, as rms.c reads it back."""
    starts = bucket_starts()
    intval = (ms * SCALE).astype(np.int64)  # (int) (value * scale)
    # stat_update: a value in [starts[k], starts[k+1]) is counted in row k + 1 (the last row takes the rest)
    rows = np.minimum(np.searchsorted(starts, intval, side="right"), BUCKETS - 1)
    counts = np.bincount(rows, minlength=BUCKETS)
    xs, ys, dist = [], [], 0.0
    for start, c in zip(starts, counts):
        dist += c / len(ms)
        y = float(f"{dist:f}")
        xs.append(float(f"{start / SCALE:6.3f}"))
        ys.append(y)
        if y >= 1.0:
            break
    return np.array(xs), np.array(ys)


def demerit(measured_ms: np.ndarray, modelled_ms: np.ndarray) -> float:
    """src/rms.c, compute_rms: the RMS horizontal distance (ms) between the two cumulative curves."""
    x1, y1 = distribution(modelled_ms)
    x2, y2 = distribution(measured_ms)
    squares, count, i1, i2, pnt = 0.0, 0, 0, 0, RMS_INCR
    while pnt <= 1.0:
        while y1[i1] < pnt:
            i1 += 1
        while y2[i2] < pnt:
            i2 += 1
        p1 = x1[i1 - 1] + (pnt - y1[i1 - 1]) / (y1[i1] - y1[i1 - 1]) * (x1[i1] - x1[i1 - 1])
        p2 = x2[i2 - 1] + (pnt - y2[i2 - 1]) / (y2[i2] - y2[i2 - 1]) * (x2[i2] - x2[i2 - 1])
        squares += (p1 - p2) ** 2
        count += 1
        pnt += RMS_INCR
    return math.sqrt(squares / count)


def validate(profile: Profile, path: Path) -> dict:
    if profile.kind != "hdd":
        raise UserError(f"{profile.name} is not a disk (its kind is {profile.kind}); validation traces are of real "
                        "disks: give an hdd profile")
    trace = read_trace(path)
    modelled = replay(profile, trace)
    measured = trace.service_ms
    reads = trace.ops == native.OP_READ
    return {
        "profile": profile.name, "trace": str(path), "requests": int(len(measured)),
        "reads": int(reads.sum()), "writes": int((~reads).sum()),
        "measured_mean_ms": float(measured.mean()), "modelled_mean_ms": float(modelled.mean()),
        "measured_read_mean_ms": float(measured[reads].mean()) if reads.any() else None,
        "modelled_read_mean_ms": float(modelled[reads].mean()) if reads.any() else None,
        "measured_write_mean_ms": float(measured[~reads].mean()) if (~reads).any() else None,
        "modelled_write_mean_ms": float(modelled[~reads].mean()) if (~reads).any() else None,
        "demerit_ms": demerit(measured, modelled),
    }
