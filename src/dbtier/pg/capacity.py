"""Before anything starts: will the lab accept its options, and will the run's data fit?

Everything here only reads (the file systems' free space, /proc/meminfo, the options), so a run
refused for a bad option or for want of room has made nothing: no workspace, no run directory, no
folder on a device. The CLI calls it before `Workspace.open` and `run_dir`:

    check_lab_options(options, requests)                 sizes, workspace, PostgreSQL, device folders
    check_run(workload, requests, placement, options)    the above, the placement, connections, and room

A workload's data is estimated from its parameters (`Workload.footprint`): tables and indexes on the
devices placement gives them, the WAL (what stays of it is capped by max_wal_size), temp files and
dumps on theirs, load files, the emulation's state and the trace in the workspace. Each file system
must have the room; what lands on tmpfs, with the database cache and the emulation's state, must also
fit in the memory available."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from dbtier import ownership
from dbtier.devices import hostfs, native, session
from dbtier.errors import UserError
from dbtier.pg import osuser, settings
from dbtier.pg.placement import Placement
from dbtier.workloads.base import PAGE, Footprint, Workload
from dbtier.workspace import Workspace, check_not_pseudo

MIB = 1 << 20
MEMINFO = Path("/proc/meminfo")
#: PostgreSQL's least shared_buffers (16 buffers), and the page cache's least (the lab's rule)
MIN_CACHE = 128 << 10
MIN_PAGE_CACHE = 64 << 10
#: the cluster initdb makes, with the lab's own database (each database a copy of template1, ~8 MB)
CLUSTER_BYTES = 64 * MIB
DATABASE_BYTES = 8 * MIB
#: the workspace beside the data: the server's log, socket and dynamic shared memory, and (as root)
#: the copy of PostgreSQL the servers' user can reach (about 41 MB)
WORKSPACE_BYTES = 96 * MIB
#: the server's memory beyond shared_buffers: wal_buffers, its processes, the lab's clients
SERVER_MEMORY = 128 * MIB
#: the trace: 64 bytes an I/O, at most an I/O per 8 KiB moved, about four times over the data (loads are
#: not traced, but warm-ups and repeated phases are); and each traced process's first segment
TRACE_FIXED = 64 * MIB
#: share of the memory available a run may plan to use (the host and its other processes keep the rest)
MEMORY_SHARE = 0.9
SOCKET_TAIL = len("/lab-00000000/sock")


def fmt_bytes(n: float) -> str:
    """1536 -> '1.5 kB', PostgreSQL's unit names, binary multiples."""
    for unit in ("bytes", "kB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1024 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PB"


def _meminfo(key: str) -> int | None:
    try:
        for line in MEMINFO.read_text().splitlines():
            name, _, rest = line.partition(":")
            if name == key:
                return int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def mem_available() -> int | None:
    """Memory the kernel can give without swapping (MemAvailable), or None where unknown."""
    return _meminfo("MemAvailable")


def mem_total() -> int | None:
    return _meminfo("MemTotal")


@dataclass
class Place:
    """A file system that will hold part of a run."""
    path: Path          # the folder the run uses (it may not exist yet)
    dev: int
    free: int
    ram: bool
    mount: str
    need: int = 0
    parts: dict[str, int] = field(default_factory=dict)

    def add(self, what: str, n: int) -> None:
        if n > 0:
            self.need += n
            self.parts[what] = self.parts.get(what, 0) + n

    def describe(self) -> str:
        return f"{self.mount} ({'tmpfs, in memory' if self.ram else 'disk'})"


def _existing(path: Path) -> Path:
    probe = Path(os.path.abspath(path))
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def place_of(path: Path) -> Place:
    """The file system holding path (or the folder it would be made in), with its free space."""
    probe = _existing(path)
    st = os.statvfs(probe)
    return Place(Path(path), os.stat(probe).st_dev, st.f_bavail * st.f_frsize, hostfs.is_ram(probe),
                 hostfs.mount_of(probe)[0])


@dataclass
class Sizes:
    cache: int        # shared_buffers, bytes
    page_cache: int   # the emulated OS page cache, bytes


def _set_size(sets: dict[str, str], name: str, bare_unit: int) -> int | None:
    """A size given with --set (PostgreSQL's syntax: a bare number is in the setting's own unit)."""
    text = sets.get(name)
    if text is None:
        return None
    text = text.strip().strip("'\"").strip()
    try:
        if text.isdigit():
            return int(text) * bare_unit
        return settings.parse_size(text, f"--set {name}")
    except UserError:
        return None  # the server will say what is wrong with it


def check_page_cache(text: str, derived_from: str = "") -> int:
    """--page-cache SIZE: a size with its unit, at least 64kB, no larger than this machine's memory (an OS
    page cache is part of it). `derived_from` names the option it was derived from, when it was."""
    pc_bytes = settings.parse_option_size(text, "--page-cache")
    if pc_bytes < MIN_PAGE_CACHE:
        raise UserError(f"--page-cache {text}: give at least 64kB")
    total = mem_total()
    if total is not None and pc_bytes > total:
        what = derived_from or f"--page-cache {text}"
        raise UserError(f"{what}: an emulated OS page cache of {fmt_bytes(pc_bytes)} is larger than this machine's "
                        f"{fmt_bytes(total)} of memory; give a smaller --page-cache")
    return pc_bytes


def check_sizes(cache: str, page_cache: str | None, sets: dict[str, str] | None = None) -> Sizes:
    """--cache and --page-cache: sizes with a unit, at least what PostgreSQL and the emulation need, and
    within this machine's memory."""
    cache_bytes = settings.parse_option_size(cache, "--cache")
    if cache_bytes < MIN_CACHE:
        raise UserError(f"--cache {cache}: PostgreSQL needs at least 128kB of shared buffers")
    shared = _set_size(sets or {}, "shared_buffers", 8192) or cache_bytes
    available = mem_available()
    if available is not None and shared > MEMORY_SHARE * available:
        what = "--set shared_buffers" if shared != cache_bytes else f"--cache {cache}"
        raise UserError(f"{what}: the database cache would take {fmt_bytes(shared)}, more than the "
                        f"{fmt_bytes(MEMORY_SHARE * available)} of memory this machine can give now; give a smaller one")
    if page_cache:
        pc_bytes = check_page_cache(page_cache)
    else:  # three times the cache, by default
        pc_bytes = check_page_cache(f"{3 * cache_bytes // 1024}kB",
                                    f"--cache {cache} (the page cache is three times it by default)")
    return Sizes(shared, pc_bytes)


def check_lab_options(options, requests) -> Sizes:
    """What Lab() and Lab._open() would refuse, checked before anything is made: sizes, the I/O mode,
    the workspace's folder, the PostgreSQL install, the device folders."""
    from dbtier.pg import binaries
    from dbtier.pg.lab import SOCKET_PATH_MAX

    if options.io_mode not in settings.IO_MODES:
        raise UserError(f"--io-mode {options.io_mode}: choose one of {', '.join(settings.IO_MODES)}")
    session.check_cpu_scale(options.cpu_scale)
    sizes = check_sizes(options.cache, options.page_cache, options.sets)
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


def _wal_kept(sets: dict[str, str], generated: int) -> int:
    """The WAL on disk at most: what a run generates, but no more than max_wal_size (a soft limit: half
    again is allowed for) and at least a few segments."""
    cap = _set_size(sets, "max_wal_size", MIB) or settings.parse_size(settings.PRESET["max_wal_size"], "max_wal_size")
    return max(min(generated, int(1.5 * cap)), 0) + 48 * MIB


def _options_hint(workload: Workload) -> str:
    names = [f"--{n}" for n in workload.size_options]
    if not names:
        return "a smaller run"
    return "lower " + (names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1])


def check_run(workload: Workload, requests, placement: Placement, options, cache_state: str = "cold") -> Footprint:
    """Everything a run of `workload` would refuse, and whether its data fits, before anything starts."""
    from dbtier.workloads.runner import check_cache_state

    if not workload.user_objects:  # a user's objects exist only after the setup: checked then
        placement.check_objects(workload.objects, f"workload {workload.name}")
    check_cache_state(workload, cache_state)
    sizes = check_lab_options(options, requests)
    foot = workload.footprint(cache_state)
    limit = _set_size(options.sets, "max_connections", 1)
    if limit is None:
        limit = int(settings.PRESET["max_connections"])
    if foot.connections + 1 > limit:  # and the lab's wait sampler
        option = foot.connections_option
        most = max(limit - 1 - (foot.connections - workload.p.get(option.replace("-", "_"), 0)), 0) if option else 0
        raise UserError(f"--{option} {workload.p.get(option.replace('-', '_'))}: the run needs {foot.connections + 1} "
                        f"server connections and the lab's server takes {limit} (max_connections); give at most {most}, "
                        f"or raise it with --set max_connections=N")
    workspace = Workspace.locate(options.workspace)
    places: dict[int, Place] = {}

    def at(path: Path) -> Place:
        p = place_of(path)
        return places.setdefault(p.dev, p)

    device_place = {r.name: at(r.directory if r.directory is not None else workspace) for r in requests}
    ws = at(workspace)
    data_dev = placement.roles["data"]
    device_place[data_dev].add(f"the cluster on {data_dev}", CLUSTER_BYTES + DATABASE_BYTES * foot.databases)
    for name, n in foot.objects.items():
        dev = placement.device_for(name, workload.objects.get(name, "table"))
        device_place[dev].add(f"{name} on {dev}", n)
    wal = _wal_kept(options.sets, foot.wal)
    device_place[placement.roles["wal"]].add(f"WAL on {placement.roles['wal']}", wal)
    device_place[placement.roles["temp"]].add(f"temp files on {placement.roles['temp']}", foot.temp)
    device_place[placement.roles["dump"]].add(f"the dump on {placement.roles['dump']}", foot.dump)
    ws.add("load files", foot.scratch)
    ws.add("the emulation's state", native.state_bytes(sizes.page_cache))
    ws.add("the trace", TRACE_FIXED + 4 * 64 * (foot.data + wal + foot.temp) // PAGE)
    ws.add("the workspace", WORKSPACE_BYTES)
    hint = _options_hint(workload)
    for place in places.values():
        if place.need > place.free:
            top = max(place.parts, key=place.parts.get)
            raise UserError(f"{workload.name} would not fit: it needs about {fmt_bytes(place.need)} on "
                            f"{place.describe()}, which has {fmt_bytes(place.free)} free (the most: {top}, "
                            f"{fmt_bytes(place.parts[top])}); {hint}, or put the devices on a larger file system "
                            "(--device NAME=PROFILE:DIR, --workspace)")
    available = mem_available()
    if available is not None:
        in_ram = sum(p.need for p in places.values() if p.ram)
        memory = {"files on tmpfs": in_ram, "the database cache": sizes.cache,
                  "the server's other memory": SERVER_MEMORY + foot.server_memory,
                  "dbtier's own": foot.client_memory}
        need = sum(memory.values())
        if need > MEMORY_SHARE * available:
            top = max(memory, key=memory.get)
            remedy = {"files on tmpfs": f"{hint}, or put the devices on a disk (--device NAME=PROFILE:DIR, --workspace)",
                      "the database cache": "give a smaller --cache",
                      "the server's other memory": (f"give a smaller --{foot.memory_option}" if foot.memory_option
                                                    else hint),
                      "dbtier's own": hint}[top]
            raise UserError(f"{workload.name} would not fit in memory: it needs about {fmt_bytes(need)} (the most: "
                            f"{top}, {fmt_bytes(memory[top])}) and this machine can give "
                            f"{fmt_bytes(MEMORY_SHARE * available)}; {remedy}")
    return foot
