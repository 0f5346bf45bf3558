"""Whether a path is yours: nobody but you (or root) can change it, or anything on the way to it.

dbtier writes results and device folders into folders you name, and runs files a recorded run names
(advise --verify). In a folder another user can write, that user can rename what dbtier made and put
a link in its place between two of dbtier's steps, so that dbtier (root, say) writes, chmods or runs
what that user chose. Such places are refused, with the one that is not yours named. A folder
everyone may write but nobody may rename others' entries in (the sticky bit, as /tmp and /dev/shm)
is fine: what dbtier makes in it stays dbtier's."""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

from dbtier.errors import UserError


def _trusted_owner(uid: int) -> bool:
    return uid in (0, os.geteuid())


def _private_group(gid: int, owner: int) -> bool:
    """A group nobody but the owner is in (a user's own group), or root's."""
    if gid == 0:
        return True
    try:
        group = grp.getgrgid(gid)
        name = pwd.getpwuid(owner).pw_name
    except KeyError:
        return False
    return group.gr_name == name and not set(group.gr_mem) - {name}


def _who(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"uid {uid}"


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def changeable_by_others(path: Path) -> str | None:
    """Why someone else could change path (or swap it, through a folder on the way), or None. The path
    is followed as the system follows it: each link's target is checked too."""
    path = Path(os.path.abspath(path))
    seen = 0
    todo = list(path.parts[1:])
    here = Path("/")
    while True:
        st = os.lstat(here)
        if not _trusted_owner(st.st_uid):
            return f"{here} belongs to {_who(st.st_uid)}"
        if stat.S_ISLNK(st.st_mode):
            seen += 1
            if seen > 40:
                return f"{here}: too many links"
            target = Path(os.readlink(here))
            todo = [*target.parts[1:], *todo] if target.is_absolute() else [*target.parts, *todo]
            here = Path("/") if target.is_absolute() else here.parent
        else:
            writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            sticky = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
            if st.st_mode & stat.S_IWOTH and not sticky:
                return f"every user may write in {here}"
            if writable & stat.S_IWGRP and not sticky and not _private_group(st.st_gid, st.st_uid):
                return f"the group {_group(st.st_gid)} may write in {here}"
        if not todo:
            return None
        part = todo.pop(0)
        here = here.parent if part == ".." else here if part == "." else here / part
        if not os.path.lexists(here):
            return None  # what is missing will be made by dbtier, as its own


def check_yours(path: Path, what: str, doing: str = "") -> None:
    """Refuses a path another user could change (see changeable_by_others)."""
    why = changeable_by_others(path)
    if why:
        raise UserError(f"{what} {path}: {why}, who could swap what dbtier {doing or 'makes there'}; choose a "
                        "folder only you (or root) can change")
