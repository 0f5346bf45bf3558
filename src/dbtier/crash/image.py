"""The base image and what a crash run keeps to build its states: the devices' folders copied before
the durability log begins (with the live files' inodes, which the emulation knows files by), and,
after the run, the log, the trace and the file table, opened together as a state builder."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from dbtier.crash import durlog, timeline
from dbtier.crash.devices import of as durability_of
from dbtier.crash.states import Builder
from dbtier.devices import profile as profiles
from dbtier.devices.session import Device, Session
from dbtier.errors import UserError


def take_base(devices: list[Device], out: Path) -> dict[str, tuple[int, int]]:
    """Copies each device's folder to out/<device number>/ (links kept as links) and returns each
    copied file's live (st_dev, st_ino), by its path relative to `out`."""
    inodes: dict[str, tuple[int, int]] = {}
    out.mkdir(exist_ok=True)
    for n, dev in enumerate(devices):
        dst = out / str(n)
        shutil.copytree(dev.directory, dst, symlinks=True)
        for root, _dirs, files in os.walk(dev.directory):
            for name in files:
                path = Path(root) / name
                st = path.lstat()
                if path.is_symlink():
                    continue
                inodes[str(Path(str(n)) / path.relative_to(dev.directory))] = (st.st_dev, st.st_ino)
    return inodes


@dataclass
class Material:
    """Everything a run's crash states are built from: kept in a run directory with a finding, so that
    `dbtier crash --rebuild` builds any of its states again, bit for bit."""
    base: Path                                  # the base image: base/<device number>/...
    log_dir: Path                               # the durability log's files
    trace_dir: Path                             # the trace's record files
    rows: list                                  # the state's file table: [index, device, path, st_dev, st_ino, class]
    base_inodes: dict[str, tuple[int, int]]
    devices: list[tuple[str, str, str]]         # (name, profile spec, its live folder) by device number
    failed: tuple[int, int] | None = None       # (file index, when) of an fsync that failed (timeline.py)

    def builder(self, scratch: Path) -> Builder:
        files = {int(r[0]): (int(r[1]), str(r[2]), str(r[5])) for r in self.rows}
        file_inodes = {int(r[0]): (int(r[3]), int(r[4])) for r in self.rows}
        by_inode = {ino: rel for rel, ino in self.base_inodes.items()}
        base_files = {index: self.base / by_inode[ino] for index, ino in file_inodes.items() if ino in by_inode}
        facts = [durability_of(name, profiles.load(spec)) for name, spec, _dir in self.devices]
        tl = timeline.build(durlog.read(self.log_dir), self.trace_dir, files, base_files, facts, scratch, self.failed)
        return Builder(tl, self.base, [Path(d) for _n, _s, d in self.devices], self.base_inodes, file_inodes,
                       scratch)

    def keep(self, folder: Path) -> "Material":
        """A copy in `folder` (made new), with what the copy needs to be found again (material.json)."""
        folder.mkdir(mode=0o700)
        shutil.copytree(self.base, folder / "base", symlinks=True)
        shutil.copytree(self.log_dir, folder / "durlog")
        shutil.copytree(self.trace_dir, folder / "trace", ignore=shutil.ignore_patterns("*.json"))
        (folder / MATERIAL_FILE).write_text(json.dumps({
            "rows": self.rows, "base_inodes": {k: list(v) for k, v in self.base_inodes.items()},
            "devices": [list(d) for d in self.devices],
            "failed": list(self.failed) if self.failed else None}))
        return load(folder)


MATERIAL_FILE = "material.json"


def load(folder: Path) -> Material:
    """The material kept in a run directory's folder."""
    try:
        doc = json.loads((folder / MATERIAL_FILE).read_text())
        return Material(folder / "base", folder / "durlog", folder / "trace", doc["rows"],
                        {k: (int(v[0]), int(v[1])) for k, v in doc["base_inodes"].items()},
                        [(str(n), str(s), str(d)) for n, s, d in doc["devices"]],
                        tuple(int(x) for x in doc["failed"]) if doc.get("failed") else None)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        raise UserError(f"{folder} does not hold a crash run's material ({MATERIAL_FILE} is missing or damaged); "
                        "only a crash run with a finding keeps it") from None


def material(session: Session, base: Path, base_inodes: dict[str, tuple[int, int]]) -> Material:
    """A finished run's material, where its lab left it (with the fsync its session failed, if any)."""
    state = session.snapshot()
    fault = state.get("fault", {})
    return Material(base, session.durlog_dir, session.trace_dir, state["files"], base_inodes,
                    [(d.name, d.profile.name, str(d.directory)) for d in session.devices],
                    (int(fault["file"]), int(fault["at_ns"])) if fault.get("fired") else None)


def builder(session: Session, base: Path, base_inodes: dict[str, tuple[int, int]], scratch: Path) -> Builder:
    """The states of a finished run: its session's durability log and trace, joined (timeline.py)."""
    return material(session, base, base_inodes).builder(scratch)
