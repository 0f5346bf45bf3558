"""Where results may go, checked before any work starts: a run that ends in "cannot write" after
minutes of measuring has wasted them. Nothing here creates anything."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from dbtier import ownership
from dbtier.errors import UserError
from dbtier.workspace import check_not_pseudo


def refuse_foreign_link(path: Path, what: str) -> None:
    """A link another user made where we are to write (in a shared folder such as /tmp) is refused:
    following it would write where that user chose."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode) and st.st_uid != os.geteuid():
        raise UserError(f"{what} {path}: a link made by another user (uid {st.st_uid}); choose another path")


def _nearest_existing(path: Path) -> Path:
    probe = path
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    return probe


def _refuse_dead_link(path: Path, target: Path, what: str) -> None:
    """A link on the way that leads nowhere (or round in a circle): nothing can be made through it."""
    if os.path.islink(path) and not path.exists():
        raise UserError(f"{what} {target}: {path} is a link that leads nowhere; remove it or choose another path")


def check_dir(path: Path, what: str) -> Path:
    """A folder results go into: it exists and is writable, or it can be made (every part of it that
    exists is a folder we can write into). Returns it absolute."""
    path = Path(path).expanduser()
    check_not_pseudo(path, what)
    path = Path(os.path.abspath(path))
    refuse_foreign_link(path, what)
    if path.exists():
        if not path.is_dir():
            raise UserError(f"{what} {path}: a file is there, not a folder; choose a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise UserError(f"{what} {path}: you cannot write there; choose a folder of yours")
    else:
        base = _nearest_existing(path)
        _refuse_dead_link(base, path, what)
        if not base.is_dir():
            raise UserError(f"{what} {path}: {base} is a file, so no folder can be made under it")
        if not os.access(base, os.W_OK | os.X_OK):
            raise UserError(f"{what} {path}: cannot make it, {base} is not writable for you")
    # results are built in a folder there and renamed into place: nobody else may swap it meanwhile
    ownership.check_yours(path, what, "writes there")
    return path


def check_file(path: Path, what: str) -> Path:
    """A file a result is written to: its folder exists and is writable (it is not made for you), and the
    path is not a folder. Returns it absolute."""
    path = Path(path).expanduser()
    check_not_pseudo(path, what)
    path = Path(os.path.abspath(path))
    refuse_foreign_link(path, what)
    if path.is_dir():
        raise UserError(f"{what} {path}: a folder is there; give a file name")
    parent = path.parent
    _refuse_dead_link(_nearest_existing(parent), path, what)
    if not parent.exists():
        raise UserError(f"{what} {path}: the folder {parent} does not exist; create it first")
    if not parent.is_dir():
        raise UserError(f"{what} {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{what} {path}: you cannot write into {parent}")
    if path.exists() and not os.access(path, os.W_OK):
        raise UserError(f"{what} {path}: the file is there and not writable for you")
    return path


def make_dirs(path: Path) -> list[Path]:
    """Makes path and its missing parents; returns those it made, deepest first (to undo on failure)."""
    made = []
    probe = path
    while not probe.exists():
        made.append(probe)
        probe = probe.parent
    for folder in reversed(made):
        folder.mkdir()
    return made


def remove_if_empty(made: list[Path]) -> None:
    for folder in made:
        try:
            folder.rmdir()
        except OSError:
            return
