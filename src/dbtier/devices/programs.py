"""Programs the interposer cannot enter, and files the emulation did not see change.

The interposer is a shared library that ld.so loads (LD_PRELOAD) into every dynamically linked program
of the machine's own architecture. A static program, or one built for another machine, runs without it:
`dbtier exec` refuses one as its command before anything runs (the interposer finds the ones a program
starts itself). And whatever a program writes to a device folder without a call the interposer sees
(through a mapping, or from a process it is not in) shows afterwards as a file created or changed that
the emulation's file table never registered."""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path

from dbtier.devices import native

PT_INTERP = 3
#: e_machine numbers named in messages (elf.h)
MACHINES = {3: "x86", 8: "MIPS", 20: "PowerPC", 21: "PowerPC", 22: "s390", 40: "ARM",
            62: "x86-64", 183: "AArch64", 243: "RISC-V"}


@dataclass(frozen=True)
class Elf:
    bits: int          # 32 or 64
    little: bool
    machine: int
    interpreted: bool  # it has a PT_INTERP program header: ld.so runs it, and loads LD_PRELOAD


def read_elf(path: Path) -> Elf | None:
    """The ELF facts that decide whether ld.so runs a program; None for anything else, or unreadable."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
                return None
            bits, end = (32 if head[4] == 1 else 64), ("<" if head[5] == 1 else ">")
            machine = struct.unpack_from(end + "H", head, 18)[0]
            if bits == 64:
                if len(head) < 64:
                    return None
                phoff, = struct.unpack_from(end + "Q", head, 32)
                phentsize, phnum = struct.unpack_from(end + "HH", head, 54)
            else:
                phoff, = struct.unpack_from(end + "I", head, 28)
                phentsize, phnum = struct.unpack_from(end + "HH", head, 42)
            if phentsize < 4 or phnum > 4096:
                return None
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            types = [struct.unpack_from(end + "I", table, i * phentsize)[0]
                     for i in range(phnum) if (i + 1) * phentsize <= len(table)]
            return Elf(bits, head[5] == 1, machine, PT_INTERP in types)
    except OSError:
        return None


def interpreter(path: Path) -> Path | None:
    """A `#!` script's interpreter (the kernel reads its first 256 bytes)."""
    try:
        with open(path, "rb") as f:
            line = f.read(256)
    except OSError:
        return None
    if not line.startswith(b"#!"):
        return None
    words = line[2:].split(b"\n", 1)[0].split()
    return Path(os.fsdecode(words[0])) if words else None


def why_not_enterable(program: Path, depth: int = 0) -> str | None:
    """Why the interposer cannot run inside this program ('statically linked', 'built for ...'), or None
    when it can or nothing certain is known (a script is judged by its interpreter)."""
    elf = read_elf(program)
    if elf is None:
        inner = interpreter(program) if depth < 4 else None
        if inner is None:
            return None
        why = why_not_enterable(inner, depth + 1)
        return f"a script run by {inner}, which is {why}" if why else None
    ours = read_elf(native.iotap_path())
    if ours and (elf.bits, elf.little, elf.machine) != (ours.bits, ours.little, ours.machine):
        return (f"built for {MACHINES.get(elf.machine, f'machine {elf.machine}')} ({elf.bits}-bit), and the "
                f"interposer for {MACHINES.get(ours.machine, f'machine {ours.machine}')} ({ours.bits}-bit)")
    if not elf.interpreted:
        return "statically linked"
    return None


#: at most this many entries are walked in the device folders, before and after a program
WALK_CAP = 100_000


@dataclass
class FolderFiles:
    """The regular files under the device folders: path -> (st_dev, st_ino, size, mtime_ns)."""
    files: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    capped: list[str] = field(default_factory=list)  # folders with more entries than the walk takes


def folder_files(folders: list[Path], exclude: list[Path], cap: int = WALK_CAP) -> FolderFiles:
    """Walks the folders (symbolic links are not followed), leaving out `exclude` (dbtier's own files),
    WALK_CAP entries in all at most: a folder the cap cut short is named in `capped`."""
    out = FolderFiles()
    skip = {os.path.realpath(p) for p in exclude}
    walked = 0
    for folder in folders:
        stack = [str(folder)]
        while stack:
            try:
                entries = list(os.scandir(stack.pop()))
            except OSError:
                continue
            for entry in entries:
                walked += 1
                if walked > cap:
                    out.capped.append(str(folder))
                    break
                if entry.path in skip:
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
                elif stat.S_ISREG(st.st_mode):
                    out.files[entry.path] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if walked > cap:
                break
    return out


def unseen_writes(before: FolderFiles, after: FolderFiles, state: dict, folders: list[Path]) -> list[str]:
    """Files created or changed (size or modification time) between the walks, holding data, that the
    interposer never registered: written where the emulation did not see it. `folders` are the
    devices' in the state's order. Left out: folders a walk cut short (the walks need not cover the
    same files) and devices whose share of the file table is full (a file beyond it is emulated but
    not registered)."""
    rows = [row for row in state.get("files", []) if len(row) >= 5]
    cap = int(state.get("file_cap_per_device", 0))
    per_device = [sum(1 for row in rows if row[1] == i) for i in range(len(folders))]
    unsure = before.capped + after.capped + [str(f) for f, n in zip(folders, per_device) if cap and n >= cap]
    seen = {(int(row[3]), int(row[4])) for row in rows}
    changed = []
    for path, now in after.files.items():
        if before.files.get(path) == now or now[2] == 0 or (now[0], now[1]) in seen:
            continue  # unchanged, empty (nothing written), or registered
        if any(path.startswith(folder.rstrip("/") + "/") for folder in unsure):
            continue
        changed.append(path)
    return sorted(changed)
