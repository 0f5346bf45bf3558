"""The base image and what a crash run keeps to build its states: the devices' folders copied before
the durability log begins (with the live files' inodes, which the emulation knows files by), and,
after the run, the log, the trace and the file table, opened together as a state builder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from dbtier.crash import durlog, timeline
from dbtier.crash.devices import of as durability_of
from dbtier.crash.states import Builder
from dbtier.devices.session import Device, Session


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


def builder(session: Session, base: Path, base_inodes: dict[str, tuple[int, int]], scratch: Path) -> Builder:
    """The states of a finished run: its session's durability log and trace, joined (timeline.py)."""
    state = session.snapshot()
    files = {int(row[0]): (int(row[1]), str(row[2]), str(row[5])) for row in state["files"]}
    file_inodes = {int(row[0]): (int(row[3]), int(row[4])) for row in state["files"]}
    by_inode = {ino: rel for rel, ino in base_inodes.items()}
    base_files = {index: base / by_inode[ino] for index, ino in file_inodes.items() if ino in by_inode}
    facts = [durability_of(d.name, d.profile) for d in session.devices]
    log = durlog.read(session.durlog_dir)
    tl = timeline.build(log, session.trace_dir, files, base_files, facts, scratch)
    return Builder(tl, base, [d.directory for d in session.devices], base_inodes, file_inodes, scratch)
