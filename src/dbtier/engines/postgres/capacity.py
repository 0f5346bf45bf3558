"""Before a lab starts: will it accept its options (sizes, the I/O mode, the workspace, the PostgreSQL
install, the device folders)? Everything here only reads, so a lab refused has made nothing.
What a whole run needs (room for its data, connections) is dbtier.experiments.preflight's."""

from __future__ import annotations

import os
from dbtier.engines.base import Sizes

from dbtier import ownership, units
from dbtier.devices import hostfs, session
from dbtier.devices.pagecache import check_page_cache
from dbtier.errors import UserError
from dbtier.units import fmt_bytes
from dbtier.engines import osuser
from dbtier.engines.postgres import settings
from dbtier.workspace import Workspace, check_not_pseudo

MIB = 1 << 20
#: PostgreSQL's least shared_buffers (16 buffers)
MIN_CACHE = 128 << 10
SOCKET_TAIL = len("/lab-00000000/sock")


def set_size(sets: dict[str, str], name: str, bare_unit: int) -> int | None:
    """A size given with --set (PostgreSQL's syntax: a bare number is in the setting's own unit)."""
    text = sets.get(name)
    if text is None:
        return None
    text = text.strip().strip("'\"").strip()
    try:
        if text.isdigit():
            return int(text) * bare_unit
        return units.parse_size(text, f"--set {name}")
    except UserError:
        return None  # the server will say what is wrong with it


def check_sizes(cache_bytes: int, page_cache_bytes: int | None, sets: dict[str, str] | None = None) -> Sizes:
    """The database cache (--cache) and the emulated page cache (--page-cache), in bytes: at least what
    PostgreSQL and the emulation need, and within this machine's memory."""
    shown = f"--cache {units.size_text(cache_bytes)}"
    if cache_bytes < MIN_CACHE:
        raise UserError(f"{shown}: PostgreSQL needs at least 128kB of shared buffers")
    shared = set_size(sets or {}, "shared_buffers", 8192) or cache_bytes
    available = hostfs.mem_available()
    if available is not None and shared > hostfs.MEMORY_SHARE * available:
        what = "--set shared_buffers" if shared != cache_bytes else shown
        raise UserError(f"{what}: the database cache would take {fmt_bytes(shared)}, more than the "
                        f"{fmt_bytes(hostfs.MEMORY_SHARE * available)} of memory this machine can give now; give a smaller one")
    if page_cache_bytes:
        pc_bytes = check_page_cache(page_cache_bytes)
    else:  # three times the cache, by default
        pc_bytes = check_page_cache(3 * cache_bytes, f"{shown} (the page cache is three times it by default)")
    return Sizes(shared, pc_bytes)


def check_lab_options(options, requests) -> Sizes:
    """What Lab() and Lab._open() would refuse, checked before anything is made: sizes, the I/O mode,
    the workspace's folder, the PostgreSQL install, the device folders."""
    from dbtier.engines.postgres import binaries
    from dbtier.engines.postgres.cluster import SOCKET_PATH_MAX

    if options.io_mode not in settings.IO_MODES:
        raise UserError(f"--io-mode {options.io_mode}: choose one of {', '.join(settings.IO_MODES)}")
    session.check_cpu_scale(options.cpu_scale)
    sizes = check_sizes(options.cache_bytes, options.page_cache_bytes, options.sets)
    root = Workspace.locate(options.workspace)
    base = root.parent
    if len(str(root)) + SOCKET_TAIL > SOCKET_PATH_MAX:
        raise UserError(f"--workspace {base}: too deep for a unix socket path ({len(str(root)) + SOCKET_TAIL} of "
                        f"{SOCKET_PATH_MAX} characters); choose a shorter --workspace")
    binaries.find(options.pg_bin)
    user = osuser.prospective()
    if user.switches and not user.can_read(base):
        raise UserError(f"the server user {user.name} cannot pass through {base}; choose a --workspace it can enter")
    for req in requests:
        if req.directory is None:
            continue
        check_not_pseudo(req.directory, f"device {req.name}'s folder")
        # dbtier makes the device's folder there and hands it to the servers' user: nobody else may swap it
        ownership.check_yours(req.directory, f"device {req.name}'s folder")
        if not os.access(req.directory, os.W_OK | os.X_OK):
            raise UserError(f"--device {req.name}: you cannot write in {req.directory}; choose a folder of yours")
        if user.switches and not user.can_read(req.directory):
            raise UserError(f"device {req.name}: the server user {user.name} cannot reach {req.directory}; choose "
                            "a folder it can enter")
    return sizes


