"""Before anything starts: will the run's data fit, and will its lab accept it?

Everything here only reads (the file systems' free space, /proc/meminfo, the options), so a run
refused for a bad option or for want of room has made nothing: no workspace, no run directory, no
folder on a device. The CLI calls it before `Workspace.open` and `run_dir`:

    check_run(workload, requests, placement, options)    the lab's options, the placement,
                                                         connections, and room for the data

A workload's data is estimated from its parameters (`Workload.footprint`): tables and indexes on the
devices placement gives them, the WAL (what stays of it is capped by max_wal_size), temp files and
dumps on theirs, load files, the emulation's state and the trace in the workspace. Each file system
must have the room; what lands on tmpfs, with the database cache and the emulation's state, must also
fit in the memory available."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from dbtier import engines
from dbtier.devices import hostfs, native
from dbtier.errors import UserError
from dbtier.units import fmt_bytes
from dbtier.workloads.base import PAGE, Footprint, Workload, check_cache_state
from dbtier.workspace import Workspace

MIB = 1 << 20

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


def check_engine(workload: Workload, engine: str) -> None:
    if engine not in workload.engines:
        raise UserError(f"{workload.name} runs on {', '.join(workload.engines)}, not {engine}: its SQL is "
                        f"{'theirs' if len(workload.engines) > 1 else 'its'}")
    workload.for_engine(engine)


def _options_hint(workload: Workload) -> str:
    names = [f"--{n}" for n in workload.size_options]
    if not names:
        return "a smaller run"
    return "lower " + (names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1])


def check_run(workload: Workload, requests, placement, options, cache_state: str = "cold",
              engine: str = "postgres", seeded: bool = False) -> Footprint:
    """Everything a run of `workload` would refuse, and whether its data fits, before anything starts.
    seeded: the data is loaded first into a seed lab in the workspace, which stays beside the run's
    copy of it (a comparison's, a verification's, or a load kept for later runs)."""
    db = engines.get(engine)
    check_engine(workload, db.name)
    if not workload.user_objects:  # a user's objects exist only after the setup: checked then
        placement.check_objects(workload.objects, f"workload {workload.name}")
    check_cache_state(workload, cache_state)
    sizes = db.check_lab(options, requests)
    foot = workload.footprint(cache_state)
    limit = db.connection_limit(options.sets)
    if foot.connections + 1 > limit and not foot.connections_option:  # a number the workload's input fixes
        raise UserError(f"{workload.name} needs {foot.connections + 1} server connections at once and the lab's "
                        f"server takes {limit} (max_connections); raise it with --set max_connections="
                        f"{foot.connections + 1}")
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
    data_dev = placement.roles[db.roles[0]]
    device_place[data_dev].add(f"the cluster on {data_dev}", CLUSTER_BYTES + DATABASE_BYTES * foot.databases)
    for name, n in foot.objects.items():
        dev = placement.device_for(name, workload.objects.get(name, "table"))
        device_place[dev].add(f"{name} on {dev}", n)
    wal = db.log_kept(options.sets, foot.wal)
    for role, what, n in ((db.log_role, "WAL", wal), (db.temp_role, "temp files", foot.temp),
                          (db.dump_role, "the dump", foot.dump)):
        device_place[placement.roles[role]].add(f"{what} on {placement.roles[role]}", n)
    ws.add("load files", foot.scratch)
    if seeded:
        ws.add("the loaded cluster the run copies",
               CLUSTER_BYTES + DATABASE_BYTES * foot.databases + foot.data + wal)
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
    available = hostfs.mem_available()  # looked up here: a test makes this machine small
    if available is not None:
        in_ram = sum(p.need for p in places.values() if p.ram)
        memory = {"files on tmpfs": in_ram, "the database cache": sizes.cache,
                  "the server's other memory": SERVER_MEMORY + foot.server_memory,
                  "dbtier's own": foot.client_memory}
        need = sum(memory.values())
        if need > hostfs.MEMORY_SHARE * available:
            top = max(memory, key=memory.get)
            remedy = {"files on tmpfs": f"{hint}, or put the devices on a disk (--device NAME=PROFILE:DIR, --workspace)",
                      "the database cache": "give a smaller --cache",
                      "the server's other memory": (f"give a smaller --{foot.memory_option}" if foot.memory_option
                                                    else hint),
                      "dbtier's own": hint}[top]
            raise UserError(f"{workload.name} would not fit in memory: it needs about {fmt_bytes(need)} (the most: "
                            f"{top}, {fmt_bytes(memory[top])}) and this machine can give "
                            f"{fmt_bytes(hostfs.MEMORY_SHARE * available)}; {remedy}")
    return foot
