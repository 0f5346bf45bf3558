"""Reading the interposer's durability log (native/iotap/durlog.h): the bytes of every write to an
emulated device's file, and the changes of the files' sizes and names, one file per process.

The record layout, its kinds and flags come from the native library's description, never a copy."""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dbtier.devices import native
from dbtier.errors import UserError

_LAYOUT = native.layout()
RECORD = _LAYOUT.dtype("durlog_rec")
KIND = _LAYOUT.enum("durlog_kind")
WRITE, TRUNCATE, ALLOCATE, RENAME, UNLINK = (KIND[k] for k in ("write", "truncate", "allocate", "rename", "unlink"))
FLAGS = _LAYOUT.flags("durlog")
PAUSED = FLAGS["paused"]
MAGIC = _LAYOUT.constant("durlog_magic")
FORMAT = _LAYOUT.constant("durlog_format")
HEADER = RECORD.itemsize
#: fallocate's FALLOC_FL_KEEP_SIZE: the size stays (linux/falloc.h, a kernel ABI value)
KEEP_SIZE = 0x01

#: the columns of a read log: the record's fields, its payload's place (log file, offset in it), names
ENTRY = np.dtype([("kind", "u1"), ("dev", "u1"), ("flags", "u1"), ("file", "<i8"), ("off", "<u8"), ("len", "<u8"),
                  ("size", "<u8"), ("aux", "<u4"), ("t0", "<u8"), ("pid", "<u4"), ("seq", "<u8"),
                  ("log", "<u4"), ("at", "<u8")])


@dataclass
class DurabilityLog:
    """Every record of a run's log, in the order the calls began (t0, then each process's own order)."""
    entries: np.ndarray          # ENTRY, sorted
    maps: list[mmap.mmap]        # the log files, mapped: payloads are read from them
    names: dict[int, tuple[str, str]]  # entry index -> (old path, new path or "") for renames and unlinks

    def payload(self, i: int) -> memoryview:
        e = self.entries[i]
        return memoryview(self.maps[int(e["log"])])[int(e["at"]):int(e["at"]) + int(e["len"])]

    def close(self) -> None:
        for m in self.maps:
            m.close()
        self.maps = []


def _walk(path: Path, data: mmap.mmap | bytes, index: int) -> tuple[list, dict[int, tuple[str, str]]]:
    rows, names, pos, size = [], {}, 0, len(data)
    while pos < size:
        if pos + HEADER > size:
            raise UserError(f"{path}: ends inside a record ({size - pos} of {HEADER} bytes); the log is damaged")
        rec = np.frombuffer(data, dtype=RECORD, count=1, offset=pos)[0]
        if int(rec["magic"]) != MAGIC:
            raise UserError(f"{path}: no record at byte {pos:,} (a durability log of format {FORMAT} is expected); "
                            "the log is damaged or not dbtier's")
        n = int(rec["len"])
        if pos + HEADER + n > size:
            raise UserError(f"{path}: a record at byte {pos:,} runs past the end; the log is damaged")
        kind = int(rec["kind"])
        if kind in (RENAME, UNLINK):
            parts = bytes(data[pos + HEADER:pos + HEADER + n]).split(b"\0")
            names[len(rows)] = (parts[0].decode(errors="surrogateescape"),
                                parts[1].decode(errors="surrogateescape") if kind == RENAME and len(parts) > 1 else "")
        rows.append((kind, rec["dev"], rec["flags"], rec["file"], rec["off"], n if kind == WRITE else 0, rec["size"],
                     rec["aux"], rec["t0"], rec["pid"], rec["seq"], index, pos + HEADER))
        pos += HEADER + n
    return rows, names


def read(log_dir: Path) -> DurabilityLog:
    """The log of a run: every dur-*.log in log_dir."""
    files = sorted(p for p in Path(log_dir).glob("dur-*.log") if p.is_file())
    rows, names, maps = [], {}, []
    for path in files:
        with open(path, "rb") as f:
            if path.stat().st_size == 0:
                continue
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        mine, mine_names = _walk(path, m, len(maps))
        names.update({k + len(rows): v for k, v in mine_names.items()})
        rows.extend(mine)
        maps.append(m)
    entries = np.array(rows, dtype=ENTRY) if rows else np.empty(0, dtype=ENTRY)
    order = np.lexsort((entries["seq"], entries["pid"], entries["t0"]))
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    return DurabilityLog(entries[order], maps, {int(position[k]): v for k, v in names.items()})
