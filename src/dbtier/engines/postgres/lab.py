"""The lab: a PostgreSQL cluster laid out over emulated (or real) devices.

    with Lab(devices, placement, options) as lab:   # workspace, devices, initdb, tablespaces, start
        ... load data (emulation paused: setup costs no device time) ...
        lab.restart_cold()                          # an empty database cache
        with lab.measure() as m:                    # device time charged, counted, traced
            ... the workload ...
        m.result                                     # elapsed, CPU vs I/O wait, per-device iostat

Everything it starts it stops, on success, error, Ctrl-C and SIGTERM; a server left by a run that
was killed outright is stopped by the next run (dbtier.workspace: the lab is a claim in it).

A lab's folder (a claim in the workspace):
    owner.json   what the reaper needs: our pid, the server's, its shared memory, folders made elsewhere
    dev/NAME/    each device's folder (or DIR/dbtier-lab-TOKEN-NAME on the user's own folder)
    sock/        the server's unix socket, private to the servers' user
    iotap/       the emulation's shared state, private to the servers' user
    trace/       the I/O trace, private to the servers' user
    dynshmem/    the server's dynamic shared memory (outside every device)
    scratch/     bulk-load input and client logs: outside every device
    server.log"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psycopg
from psycopg import sql

from dbtier import lifecycle
from dbtier.devices import hostfs, native
from dbtier.devices.pagecache import PageCache
from dbtier.devices.session import Device, Session, host_floor_warnings
from dbtier.devices.spec import DeviceSpec
from dbtier.errors import UserError
from dbtier.measure import collectors, interval
from dbtier.measure.recording import RunRecording
from dbtier.engines import osuser
from dbtier.engines.base import LabLifecycle, Measurement
from dbtier.engines.postgres import binaries, capacity, settings
from dbtier.engines.postgres.cluster import DATABASE, SOCKET_PATH_MAX, Cluster, Seed
from dbtier.engines.postgres.handle import LabHandle
from dbtier.engines.postgres.placement import Placement, tablespace_of
from dbtier.workspace import Claim



@dataclass
class LabOptions:
    cache_bytes: int = 32 << 20  # shared_buffers: the database cache
    io_mode: str = settings.DEFAULT_IO_MODE
    page_cache_bytes: int | None = None  # the emulated OS page cache; default: three times the database cache
    sets: dict[str, str] = field(default_factory=dict)
    pg_bin: Path | None = None
    workspace: Path | None = None
    trace: bool = False
    keep: bool = False           # leave the workspace (cluster, server log) for inspection
    seed: Seed | None = None     # a loaded cluster to copy instead of a new one (dbtier compare)
    cpu_scale: float = 1.0       # the server's CPU K times slower (CPU time dilation; clients unchanged)
    scale_model: dict | None = None  # set by scale_model.apply: the sizes above are 1/F of the system's
    production: dict | None = None   # production's settings (--settings-from): applied ones are in sets
    credits: float = 1.0             # capped volumes' burst credits when the first measured interval begins
    durability_log: bool = False     # the servers may keep a durability log (crash states: src/dbtier/crash)


class Lab(LabLifecycle):
    def __init__(self, requests: list[DeviceSpec], placement: Placement, options: LabOptions | None = None,
                 say: Callable[[str], None] = print):
        self.requests = requests
        self.placement = placement
        self.options = options or LabOptions()
        self.say = say
        # Everything that can be refused is refused here, before anything is made. The page cache is
        # three times the database cache by default: PostgreSQL's rule of thumb gives shared_buffers a
        # quarter of the memory and leaves most of the rest to the OS page cache.
        sizes = capacity.check_lab_options(self.options, requests)
        self.cache_bytes = self.options.cache_bytes
        self.page_cache = PageCache(sizes.page_cache, dsync_data=self.options.io_mode == "dsync")
        self.claim: Claim | None = None
        self.lease: osuser.Lease | None = None
        self.tablespace_aliases: dict[str, str] = {}
        self.handle = LabHandle(self)  # what workloads are given
        self.session: Session | None = None
        self.cluster: Cluster | None = None
        self.devices: list[Device] = []
        self.recording = RunRecording()  # what a replay needs of the run's course, written beside its trace
        self._measured_once = False  # --credits applies when the first measured interval begins

    # -- lifecycle -------------------------------------------------------------------------------

    def _open(self) -> None:
        opts = self.options
        self.install = binaries.find(opts.pg_bin)
        self.lease = osuser.lease(self.say)
        self.user = self.lease.user
        workspace, self.claim = osuser.lab_claim(self.lease, opts.workspace, self.say)
        socket_dir = self.claim.path / "sock"
        if len(str(socket_dir)) > SOCKET_PATH_MAX:
            raise UserError(f"workspace {workspace.root} is too deep for a unix socket path; choose a shorter "
                            "--workspace")
        self._make_devices()
        iotap, trace = self.private_folder("iotap"), self.private_folder("trace")
        # Always traced (only the emulated intervals record anything): per-object I/O comes from it.
        self.session = Session(self.devices, iotap, trace_dir=trace, page_cache=self.page_cache,
                               durlog_dir=self.private_folder("durlog") if opts.durability_log else None)
        self.session.create()
        self.session.pause()
        if self.user.switches:
            os.chown(self.session.state_path, self.user.uid, self.user.gid)
        for warning in host_floor_warnings(self.devices):
            self.say(f"warning: {warning}")
        runtime = workspace.root / "runtime"
        install = self.install.moved(osuser.reachable_copy(*self.install.layout(), self.user, runtime))
        env = self.session.env()
        iotap_lib = native.iotap_path()
        env["LD_PRELOAD"] = str(osuser.reachable_copy(iotap_lib.parent, [iotap_lib.name], self.user, runtime)
                                / iotap_lib.name)
        env.pop("PGDATA", None)
        pgdata = self.device_dir(self.placement.roles["data"]) / "pgdata"
        waldir = self.device_dir(self.placement.roles["wal"]) / "pg_wal"
        self.cluster = Cluster(install, self.user, pgdata, waldir, self.private_folder("sock"),
                               self.claim.path / "server.log", env, self.claim, self.private_folder("dynshmem"),
                               cpu_scale=opts.cpu_scale)
        if opts.seed is None:
            self.cluster.initdb(templates=runtime)
        else:
            data_dir = self.device_dir(self.placement.roles["data"])
            self.cluster.adopt(opts.seed, data_dir / "ts-seed")
            self.tablespace_aliases[opts.seed.tablespace] = self.placement.roles["data"]
        self.server_settings = settings.server_settings(self.cache_bytes, opts.io_mode, str(self.cluster.socket_dir),
                                                        opts.sets)
        self.cluster.configure(self.server_settings)
        self.cluster.start()
        self._create_tablespaces()
        if opts.seed is None:
            with self.cluster.connect("postgres") as conn:
                conn.execute(sql.SQL("CREATE DATABASE {} TABLESPACE {}").format(
                    sql.Identifier(DATABASE), sql.Identifier(tablespace_of(self.placement.roles["data"]))))
        self._set_temp_tablespaces()

    def startable_folder(self, name: str) -> Path:
        """A folder in which copies of the server's files can be started (a crash test's states), which
        the servers' user passes through."""
        return self.claim.inside(name)

    def private_folder(self, name: str) -> Path:
        """A folder of the lab's that only the servers' user (and dbtier) may enter."""
        path = self.claim.inside(name, mode=0o700)
        self.user.give(path)
        return path

    def _make_devices(self) -> None:
        devices_dir = self.claim.inside("dev")
        for req in self.requests:
            if req.directory is None:
                folder = devices_dir / req.name
                folder.mkdir(mode=0o700)
            else:
                if not self.user.can_read(req.directory):
                    raise UserError(f"device {req.name}: the server user {self.user.name} cannot reach "
                                    f"{req.directory}; choose a folder it can enter")
                folder = self.claim.outside(req.directory / self.claim.child_name(req.name))
            self.user.give(folder)
            self.devices.append(Device(req.name, folder.resolve(), req.profile))

    def device_dir(self, name: str) -> Path:
        return next(d.directory for d in self.devices if d.name == name)

    def _create_tablespaces(self) -> None:
        """One tablespace per device, in its folder."""
        with self.cluster.connect("postgres") as conn:
            for dev in self.devices:
                location = dev.directory / "ts"
                location.mkdir(mode=0o700)
                self.user.give(location)
                conn.execute(sql.SQL("CREATE TABLESPACE {} LOCATION {}").format(
                    sql.Identifier(tablespace_of(dev.name)), sql.Literal(str(location))))

    def _set_temp_tablespaces(self) -> None:
        """Temp files where `temp` goes, in every database but the templates."""
        with self.cluster.connect("postgres") as conn:
            names = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE NOT datistemplate "
                                                "AND datname <> 'postgres'")]
            for name in names:
                conn.execute(sql.SQL("ALTER DATABASE {} SET temp_tablespaces = {}").format(
                    sql.Identifier(name), sql.Literal(tablespace_of(self.placement.roles["temp"]))))

    def tablespace_devices(self) -> dict[str, str]:
        """tablespace -> device, with a copied cluster's own tablespace as the data device's."""
        return {**{tablespace_of(d.name): d.name for d in self.devices}, **self.tablespace_aliases}

    def seed(self) -> Seed:
        """Stops the server (a checkpoint first) and returns this cluster as a Seed other labs copy. The
        lab must have one device: its tablespace holds the data."""
        (dev,) = self.devices
        with self.connect() as conn:
            conn.execute("CHECKPOINT")
            oid = conn.execute("SELECT oid FROM pg_tablespace WHERE spcname = %s",
                               (tablespace_of(dev.name),)).fetchone()[0]
        self.session.pause()
        self.cluster.stop()
        # Other labs copy it: nothing the load started may still be changing it, and its configuration
        # must be dbtier's own before any other server reads it.
        if self.lease is not None and self.lease.owned:
            osuser.stop_every_process(self.user)
        self.cluster.check_config()
        outside = self.tablespaces_outside()
        if outside:
            raise UserError(f"the load made a tablespace at {outside[0]} (CREATE TABLESPACE), outside the lab; it "
                            "cannot be copied into the other layouts: leave it out and place objects with --place")
        seed = Seed(self.cluster.pgdata, self.cluster.waldir, tablespace_of(dev.name), int(oid), dev.directory / "ts")
        for folder, link in ((seed.pgdata, None), (seed.waldir, seed.pgdata / "pg_wal"),
                             (seed.tablespace_dir, seed.pgdata / "pg_tblspc" / str(oid))):
            try:
                kept = stat.S_ISDIR(os.lstat(folder).st_mode) and (link is None or os.readlink(link) == str(folder))
            except OSError:
                kept = False
            if not kept:
                raise UserError(f"the loaded cluster was changed by the run's own SQL ({folder} is not the folder "
                                "dbtier made); it cannot be copied into the other layouts")
        return seed

    def close(self) -> None:
        """Stops the server and removes the lab's folders. A second Ctrl-C or SIGTERM cannot cut this short."""
        with lifecycle.shielded():
            try:
                if self.cluster is not None:
                    if self.session is not None:
                        with contextlib.suppress(Exception):
                            self.session.pause()  # the shutdown checkpoint is not part of any measurement
                    self.cluster.stop()
                    for folder in self.tablespaces_outside():
                        _remove_made_by_server(folder)
            finally:
                self._log_text = self.server_log()
                self._release_workspace()

    def tablespaces_outside(self) -> list[Path]:
        """The folders of the tablespaces the run's own SQL made outside every device's folder (CREATE
        TABLESPACE ... LOCATION): what they hold is on no emulated device."""
        out = []
        for link in sorted((self.cluster.pgdata / "pg_tblspc").glob("*")):
            if link.is_symlink():  # an in-place tablespace is a folder of the data directory
                target = os.readlink(link)
                if not any(target == str(d.directory) or target.startswith(f"{d.directory}/") for d in self.devices):
                    out.append(Path(target))
        return out

    # -- use -------------------------------------------------------------------------------------

    def connect(self, dbname: str = DATABASE, **kw) -> psycopg.Connection:
        return self.cluster.connect(dbname, **kw)

    def create_database(self, name: str) -> None:
        """Another database, on the data device (seed 002 and 004 time its creation)."""
        with self.connect() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {} TABLESPACE {}").format(
                sql.Identifier(name), sql.Identifier(tablespace_of(self.placement.roles["data"]))))
            conn.execute(sql.SQL("ALTER DATABASE {} SET temp_tablespaces = {}").format(
                sql.Identifier(name), sql.Literal(tablespace_of(self.placement.roles["temp"]))))

    def scratch_dir(self, sub: str | None = None) -> Path:
        """A folder outside every device that the server may write and read: a bulk load's input
        files there cost no device time, as a loader's input on other disks. `sub`: one inside it."""
        path = self.claim.path / "scratch"
        if not path.exists():
            self.private_folder("scratch")
        if sub:
            path = path / sub
            if not path.exists():
                path.mkdir(mode=0o700)
                self.user.give(path)
        return path

    def client_dir(self, sub: str | None = None) -> Path:
        """A folder of dbtier's own user alone, outside every device: where client programs that run
        as that user (to read the user's own files) work and write their logs. The servers' user,
        which the run's SQL acts as, can neither enter it nor plant a link in it."""
        path = self.claim.path / "client"
        if not path.exists():
            self.claim.inside("client", mode=0o700)
        if sub:
            path = path / sub
            if not path.exists():
                path.mkdir(mode=0o700)
        return path

    def handover_dir(self, sub: str) -> Path:
        """A folder of dbtier's own user whose files the servers' user may read, not change (0750 with
        its group): what dbtier prepares for a client that runs as the servers' user."""
        path = self.claim.path / sub
        if not path.exists():
            self.claim.inside(sub, mode=0o700)
            if self.user.switches:
                os.chown(path, -1, self.user.gid)
                os.chmod(path, 0o750)
        return path

    def handover_file(self, path: Path) -> int:
        """A new file in a handover_dir, open for writing (0640 with the servers' group)."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        if self.user.switches:
            os.fchown(fd, -1, self.user.gid)
            os.fchmod(fd, 0o640)
        return fd

    def recycle_wal(self, nbytes: int) -> int:
        """Leaves about `nbytes` of WAL segments (at most min_wal_size) made and recycled ahead of the
        insert position, unmeasured, as a production server's pg_wal holds them: the measured part
        writes into them instead of creating and zero-filling new segments. Returns the segments
        made ready."""
        with self.connect() as conn:
            segment, keep = conn.execute("SELECT pg_size_bytes(current_setting('wal_segment_size')), "
                                         "pg_size_bytes(current_setting('min_wal_size'))").fetchone()
            wanted = min(-(-nbytes // segment), keep // segment - 1)
            for _ in range(max(wanted, 0)):  # each switch makes (and zero-fills) the next segment
                conn.execute("SELECT pg_logical_emit_message(false, 'dbtier', 'recycled WAL')")
                conn.execute("SELECT pg_switch_wal()")
            conn.execute("CHECKPOINT")  # the segments behind the redo point are renamed ahead of it
            ahead = conn.execute("SELECT count(*) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$' "
                                 "AND name > pg_walfile_name(pg_current_wal_lsn())").fetchone()[0]
        return int(ahead)

    def end_figures(self) -> dict:
        """What a run's result records of the server at its end: what pg_wal holds (a device given the
        WAL needs this much, and room up to max_wal_size) and the system catalogs' size (with their
        indexes and TOAST), which go where `data` goes."""
        with self.connect() as conn:
            wal = conn.execute("SELECT coalesce(sum(size), 0) FROM pg_ls_waldir()").fetchone()[0]
            catalogs = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname IN ('pg_catalog', 'information_schema') AND c.relkind IN ('r', 'm')").fetchone()[0]
        return {"wal_bytes": int(wal), "catalog_bytes": int(catalogs)}

    def restart_cold(self) -> None:
        """Empty caches: the server restarts, and the OS page cache is emptied (as after
        `sync; echo 3 > /proc/sys/vm/drop_caches`)."""
        self.session.pause()
        self.cluster.stop()
        self.session.clear_page_cache()
        self.recording.event("page cache emptied")
        for dev in self.devices:  # a real device's files leave the host's own page cache
            if dev.profile.kind == "real":
                hostfs.evict_from_page_cache(dev.directory)
        self.cluster.start()

    def stop_server(self) -> None:
        """A clean shutdown, for good (a crash test's end), with the emulation paused."""
        self.session.pause()
        self.cluster.stop()

    def while_stopped(self, action: Callable[[], object]) -> object:
        """`action` run with the server stopped by a clean shutdown (everything it wrote flushed), and
        the emulation paused; the server started again after it. Returns what action returned."""
        self.session.pause()
        self.cluster.stop()
        try:
            return action()
        finally:
            self.cluster.start()

    @contextlib.contextmanager
    def warm(self):
        """An unmeasured interval with the emulation on, so that caches fill as they would."""
        self.session.pause(False)
        t0 = time.monotonic_ns()
        try:
            yield
        finally:
            self.session.pause()
            self.recording.interval("warm", t0, time.monotonic_ns())

    @contextlib.contextmanager
    def measure(self, sample_waits: bool = True, label: str = "run"):
        """The measured interval: device time is charged, counted and traced only inside it. Besides
        elapsed, CPU and per-device figures, the result has the top wait events (sampled), the
        pg_stat_io and pg_stat_wal deltas, and the I/O of every object (from the trace). Its
        collectors (measure/collectors.py) are run by measure/interval.py."""
        m = Measurement()
        parts = [collectors.ObjectNames(self.connect, DATABASE),
                 collectors.Emulation(self.session, self.devices, dilated=self.options.cpu_scale != 1.0,
                                      credits=None if self._measured_once else self.options.credits),
                 collectors.RealDisks(self.devices), collectors.ServerStats(self.connect),
                 collectors.ServerCpu(self.cluster.server_pid()), collectors.WaitEvents(self.connect, sample_waits)]
        self._measured_once = True  # the run's first measured interval starts with --credits, the rest as left
        with interval.measured(parts, label) as measured:
            yield m
        outside = self.tablespaces_outside()
        if outside:
            raise UserError(f"the run's SQL made a tablespace at {outside[0]} (CREATE TABLESPACE), outside the "
                            "emulated devices, so what it holds was not emulated; leave it out and place objects "
                            "with --place instead")
        self.recording.measured(measured)
        m.result = measured.result

    def object_placement(self, names: list[str]) -> list[dict]:
        """Where each named table or index is (pg_relation_filepath, mapped to its device)."""
        found = {o.qualified: o for o in self.handle.objects()}
        return [found[name].describe() for name in names if name in found]

    def place_objects(self) -> list[dict]:
        """Moves each table, index and materialized view to the device the placement gives it, after a
        user's setup made them (with the emulation paused: moving costs no device time). A name --place
        gives that the database lacks is refused, with the nearest one it has."""
        objects = self.handle.objects()
        self.placement.check_objects({o.qualified: o.kind for o in objects}, "the database after the setup")
        moves = []
        with self.connect() as conn:
            for o in objects:
                if not o.path:
                    continue  # no storage of its own: a partitioned table or index (its partitions move)
                target = self.placement.device_for(o.qualified, "index" if o.kind == "index" else "table")
                if o.device == target:
                    continue
                what = {"table": "TABLE", "index": "INDEX", "materialized view": "MATERIALIZED VIEW"}[o.kind]
                conn.execute(sql.SQL("ALTER {} {} SET TABLESPACE {}").format(
                    sql.SQL(what), sql.Identifier(o.schema, o.name), sql.Identifier(tablespace_of(target))))
                moves.append({"object": o.qualified, "kind": o.kind, "from": o.device, "to": target, "bytes": o.bytes})
        return moves

    def dump_dir(self) -> Path:
        """A folder on the device dumps are placed on (seed 002's dump file system)."""
        path = self.device_dir(self.placement.roles["dump"]) / "dump"
        if not path.exists():
            path.mkdir(mode=0o700)
            self.user.give(path)
        return path

    def server_log(self) -> str:
        """The server's log so far; after close, as it was when the server stopped."""
        if getattr(self, "_log_text", None) is not None:
            return self._log_text
        try:
            return (self.claim.path / "server.log").read_text(errors="replace")
        except (OSError, AttributeError):
            return ""

    def note_transactions(self, script: str, clients, ends_epoch_us, latency_ms, on_backend: bool = False) -> None:
        """Transactions a client timed (pgbench's log: its clock is the epoch), for a replay;
        on_backend: each client is the server process it ran on."""
        self.recording.transactions_timed(script, clients, ends_epoch_us, latency_ms, on_backend)

    def save_trace(self, out: Path, meta: dict) -> Path | None:
        """The run's trace (with --trace) as Parquet at `out`, with what a replay needs of its course."""
        return self.recording.save(self.session, out, meta) if self.options.trace else None

    def settings_compared(self) -> list[dict]:
        """The settings this run used where they differ from PostgreSQL's defaults or production's
        (engines/postgres/production.py), read from the server itself; [] once it has stopped."""
        from dbtier.engines.postgres import production
        if self.cluster is None or not self.cluster.running:
            return []
        prod = self.options.production
        names = sorted({*production.APPLIED, *settings.PRESET, *self.options.sets, "shared_buffers", "debug_io_direct",
                        "wal_sync_method"})
        with self.connect() as conn:
            rows = conn.execute("SELECT name, setting, unit, boot_val, source FROM pg_settings "
                                "WHERE name = ANY(%s) OR name LIKE 'enable\\_%%' ORDER BY name", (names,)).fetchall()
        given = {k: v for k, v in self.options.sets.items() if not prod or prod["applied"].get(k) != v}
        return production.compared(rows, prod, given)

    def describe(self) -> dict:
        return {
            "postgres": {"version": self.install.version, "bin": str(self.install.bin_dir), "user": self.user.name},
            "host": {"cpus": os.cpu_count()},
            "cache_bytes": self.cache_bytes,
            "io_mode": self.options.io_mode,
            "cpu_scale": self.options.cpu_scale,
            "credits": self.options.credits,
            "scale_model": self.options.scale_model,
            "page_cache": self.page_cache.describe(),
            "settings": {k: v for k, v in getattr(self, "server_settings", {}).items()
                         if k != "unix_socket_directories"},
            "user_settings": dict(self.options.sets),
            **({"production": {k: self.options.production[k] for k in ("file", "server", "applied")}}
               if self.options.production else {}),
            "settings_compared": self.settings_compared(),
            "placement": self.placement.describe(),
            "devices": self.session.describe() if self.session else [],
        }


def _remove_made_by_server(location: Path) -> None:
    """What the server made in a tablespace's folder outside the lab (its PG_<version> folder: the
    folder had to be empty): nothing of the run stays behind."""
    for made in location.glob("PG_*"):
        shutil.rmtree(made, ignore_errors=True)
