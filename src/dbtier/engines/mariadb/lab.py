"""A MariaDB lab: a server whose InnoDB files lie on emulated devices by role, started, measured and
stopped with nothing left behind (the PostgreSQL lab's pattern, engines/postgres/lab.py).

Each device is a folder. As root the folders are on a tmpfs of the lab's own (mounted in its claim,
unmounted when it ends, by the reaper if the run was killed): InnoDB takes a redo log on /dev/shm for
persistent memory and writes it with stores nobody sees (engines/mariadb/server.py). A normal user's
lab needs its log device's folder given (`-d log=PROFILE:DIR`) on another file system.

    with Lab(devices, placement.parse(["log=ssd"], ["hdd", "ssd"]), LabOptions()) as lab:
        lab.create_table("t", "id INT PRIMARY KEY, ...")
        with lab.measure("load") as m: ...
        m.result["devices"], m.result["object_io"], m.result["innodb_status"], m.result["top_events"]"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from dbtier import lifecycle
from dbtier.devices import native
from dbtier.devices.session import Device, Session
from dbtier.devices.spec import DeviceSpec
from dbtier.engines import osuser
from dbtier.engines.base import LabLifecycle, Measurement
from dbtier.engines.mariadb import binaries, measure, settings
from dbtier.engines.mariadb.placement import Placement
from dbtier.engines.mariadb.server import Folders, Server
from dbtier.measure import collectors, interval
from dbtier.workspace import Claim

DATABASE = "dbtier"
TMPFS_SIZE = 4 << 30  # the lab's own tmpfs (pages are taken only as written)


@dataclass
class LabOptions:
    workspace: Path | None = None
    cache_bytes: int = 128 << 20   # innodb_buffer_pool_size
    sets: dict[str, str] = field(default_factory=dict)  # server settings (mariadbd's option names)
    mariadb_bin: Path | None = None


class Lab(LabLifecycle):
    def __init__(self, requests: list[DeviceSpec], placement: Placement, options: LabOptions | None = None,
                 say: Callable[[str], None] = print):
        self.requests, self.placement, self.options, self.say = requests, placement, options or LabOptions(), say
        self.sets = settings.checked(self.options.sets)  # refused before anything is made
        self.claim: Claim | None = None
        self.lease: osuser.Lease | None = None
        self.session: Session | None = None
        self.server: Server | None = None
        self.devices: list[Device] = []

    def _open(self) -> None:
        opts = self.options
        install = binaries.find(opts.mariadb_bin, self.say)
        self.lease = osuser.lease(self.say)
        self.user = user = self.lease.user
        workspace, self.claim = osuser.lab_claim(self.lease, opts.workspace, self.say)
        base = self.claim.mount_tmpfs("mnt", TMPFS_SIZE) if os.geteuid() == 0 else self.claim.path
        for req in self.requests:
            folder = base / "dev" / req.name if req.directory is None else \
                self.claim.outside(req.directory / self.claim.child_name(req.name))
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            user.give(folder)
            self.devices.append(Device(req.name, folder.resolve(), req.profile))

        def role_dir(role: str, name: str) -> Path:
            path = self.device_dir(self.placement.roles[role]) / name
            path.mkdir(mode=0o700)
            user.give(path)
            return path

        run = self.claim.inside("run", mode=0o700)
        user.give(run)
        folders = Folders(data=role_dir("data", "data"), log=role_dir("log", "log"), undo=role_dir("undo", "undo"),
                          temp=role_dir("temp", "temp"), run=run)
        trace_dir = self.claim.inside("trace", mode=0o700)  # always: the I/O per object comes from it
        user.give(trace_dir)
        iotap = self.claim.inside("iotap", mode=0o700)
        user.give(iotap)
        self.session = Session(self.devices, iotap, trace_dir=trace_dir)
        self.session.create()
        self.session.pause()  # the server's creation and start are no measurement
        if user.switches:
            os.chown(self.session.state_path, user.uid, user.gid)
        runtime = workspace.root / "runtime"
        env = self.session.env()
        lib = native.iotap_path()
        env["LD_PRELOAD"] = str(osuser.reachable_copy(lib.parent, [lib.name], user, runtime) / lib.name)
        sets = {"innodb-buffer-pool-size": str(opts.cache_bytes), **self.sets}
        if self.placement.roles["binlog"] != self.placement.roles["data"]:  # --set log-bin is refused: --place says
            sets["log-bin"] = str(role_dir("binlog", "binlog") / "binlog")
        self.server = Server(install.moved(osuser.reachable_copy(*install.layout(), user, runtime)), user, folders,
                             env, sets)
        self.server.install_db()
        self.server.start()
        self.claim.watch(self.server.proc.pid, user.uid)
        self.execute(f"CREATE DATABASE {DATABASE}")

    def close(self) -> None:
        """Stops the server and removes the lab (its tmpfs unmounted). A second Ctrl-C cannot cut it short."""
        with lifecycle.shielded():
            try:
                if self.server is not None:
                    if self.session is not None:
                        with contextlib.suppress(Exception):
                            self.session.pause()  # the shutdown's writes are no measurement
                    self.server.stop()
            finally:
                try:
                    if self.lease is not None:
                        self.lease.release()
                finally:
                    if self.claim is not None:
                        self.claim.remove()

    # -- use -------------------------------------------------------------------------------------

    def device_dir(self, name: str) -> Path:
        return next(d.directory for d in self.devices if d.name == name)

    def connect(self, database: str | None = DATABASE):
        return self.server.connect(database)

    def execute(self, sql: str, params=None) -> list[tuple]:
        with self.connect(None) as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall())

    def create_table(self, name: str, definition: str) -> None:
        """CREATE TABLE name (definition) in the lab's database, in its device's folder: InnoDB sets a
        table's file apart only as it creates it (DATA DIRECTORY)."""
        device = self.placement.device_for(name, "table")
        where = ""
        if device != self.placement.roles["data"]:
            folder = self.device_dir(device) / "tables"
            if not folder.exists():
                folder.mkdir(mode=0o700)
                self.user.give(folder)
            where = f" DATA DIRECTORY = '{folder}'"
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE TABLE `{name}` ({definition}) ENGINE = InnoDB{where}")

    @contextlib.contextmanager
    def measure(self, label: str = "run"):
        """The measured interval, as PostgreSQL's (measure/interval.py): elapsed, the server's CPU, each
        device's figures and the I/O per object from the emulation (refused if the server did I/O it
        could not see), and InnoDB's own counters, timed waits and I/O per file (measure.py)."""
        m = Measurement()
        parts = [collectors.Emulation(self.session, self.devices, name_of=lambda path: measure.name_of(path, DATABASE)),
                 collectors.ServerCpu(self.server.proc.pid), measure.ServerCounters(self.server.connect)]
        with interval.measured(parts, label) as measured:
            yield m
        m.result = measured.result

    def describe(self) -> dict:
        return {"engine": "mariadb", "server": self.server.install.describe() if self.server else None,
                "devices": [{"name": d.name, "profile": d.profile.name} for d in self.devices],
                "placement": self.placement.describe()}
