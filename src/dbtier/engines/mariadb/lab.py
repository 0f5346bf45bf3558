"""A MariaDB lab: a server whose InnoDB files lie on emulated devices by role, started, measured and
stopped with nothing left behind (the PostgreSQL lab's pattern, engines/postgres/lab.py).

Each device is a folder. As root the folders are on a tmpfs of the lab's own (mounted in its claim,
unmounted when it ends, by the reaper if the run was killed): InnoDB takes a redo log on /dev/shm for
persistent memory and writes it with stores nobody sees (engines/mariadb/server.py). A normal user's
lab needs its log device's folder given (`-d log=PROFILE:DIR`) on another file system.

    with Lab(devices, placement.parse(["log=ssd"], ["hdd", "ssd"]), LabOptions()) as lab:
        lab.create_table("t", "id INT PRIMARY KEY, ...")
        with lab.measure("load") as m: ...
        m.result["devices"], m.result["object_io"], m.result["innodb_status"], m.result["top_events"]

The runner (experiments/runner.py) uses it as it uses PostgreSQL's: lab.handle for the workload,
place_objects() after a setup, restart_cold(), warm(), measure(label=...), object_placement(),
end_figures(), server_log()."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from dbtier import lifecycle
from dbtier.devices import native
from dbtier.devices.pagecache import PageCache, check_page_cache
from dbtier.devices.session import Device, Session
from dbtier.devices.spec import DeviceSpec
from dbtier.engines import osuser
from dbtier.engines.base import LabLifecycle, Measurement
from dbtier.engines.mariadb import PAGE_BYTES, binaries, measure, production, settings
from dbtier.engines.mariadb.handle import MariaHandle
from dbtier.engines.mariadb.placement import Placement
from dbtier.engines.mariadb.server import OWN_DATA_DIRECTORY, PLACES, Folders, Server
from dbtier.errors import UserError
from dbtier.measure import collectors, interval
from dbtier.measure.recording import RunRecording
from dbtier.workspace import Claim

DATABASE = "dbtier"
TMPFS_SIZE = 4 << 30  # the lab's own tmpfs (pages are taken only as written)


#: --io-mode as innodb_flush_method says it (seed 004's directio against dsync, and buffered writes
#: flushed by fsync)
FLUSH_METHODS = {"direct": "O_DIRECT", "dsync": "O_DSYNC", "buffered": "fsync"}


def _adopt(seed: Seed, folders: Folders, user: osuser.ServerUser) -> None:
    """A copy of a stopped, loaded server's files instead of a new data directory (`dbtier compare` loads
    once): its data directory, redo log and undo tablespaces each into the folder of its role's device
    (the temporary tablespace is made again as the server starts). Copied by dbtier itself, outside the
    emulation: a copy costs no device time, as a load with the emulation paused costs none."""
    for source, target in ((seed.data, folders.data), (seed.log, folders.log), (seed.undo, folders.undo)):
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        user.give(target)


def lru_scan_depth(pool_bytes: int) -> int:
    """innodb_lru_scan_depth for a buffer pool of this size. InnoDB's page cleaner keeps about this many
    pages free, whatever the pool's size: 1,024 by default, 1.6% of a 1 GiB pool but most of a lab's
    small one (measured: a cold random-index in a 12 MB pool read 838 pages for a 501-page table, 506
    with the lab's depth; docs/mariadb.md).
    A lab's pool keeps the share a production pool of 1 GiB or more keeps: a 64th, at least InnoDB's 100."""
    return max(100, min(1024, pool_bytes // PAGE_BYTES // 64))


@dataclass(frozen=True)
class Seed:
    """A stopped server with a workload's data loaded (its buffer pool's pages written, its redo log
    checkpointed at shutdown), to be copied into other layouts' labs: its folders."""
    data: Path
    log: Path
    undo: Path


@dataclass
class LabOptions:
    workspace: Path | None = None
    cache_bytes: int = 128 << 20   # innodb_buffer_pool_size
    sets: dict[str, str] = field(default_factory=dict)  # server settings (mariadbd's option names)
    mariadb_bin: Path | None = None
    io_mode: str = "direct"        # innodb_flush_method (FLUSH_METHODS); MariaDB's own default is O_DIRECT
    page_cache_bytes: int | None = None  # the emulated OS page cache; default: three times the buffer pool
    trace: bool = False
    durability_log: bool = False   # the server may keep a durability log (crash states: src/dbtier/crash)
    keep: bool = False
    seed: Seed | None = None       # a loaded, stopped server to copy instead of a new one (dbtier compare)
    cpu_scale: float = 1.0
    scale_model: dict | None = None
    production: dict | None = None
    credits: float = 1.0           # capped volumes' burst credits when the first measured interval begins


class Lab(LabLifecycle):
    def __init__(self, requests: list[DeviceSpec], placement: Placement, options: LabOptions | None = None,
                 say: Callable[[str], None] = print):
        self.requests, self.placement, self.options, self.say = requests, placement, options or LabOptions(), say
        self.sets = settings.checked(self.options.sets)  # refused before anything is made
        self.claim: Claim | None = None
        self._base: Path | None = None  # where the devices' folders are: the lab's own tmpfs as root
        self.lease: osuser.Lease | None = None
        self.session: Session | None = None
        self.server: Server | None = None
        self.devices: list[Device] = []
        self.database = DATABASE
        self.handle = MariaHandle(self)
        self._measured_once = False
        self.recording = RunRecording()  # the run's course, written beside its trace (--trace)
        self._backup_user = False  # the account mariadb-backup logs in with, made on its first use
        self._log_text: str | None = None
        pc = self.options.page_cache_bytes or 3 * self.options.cache_bytes
        self.page_cache = PageCache(check_page_cache(pc), dsync_data=self.options.io_mode == "dsync")

    def _open(self) -> None:
        opts = self.options
        install = binaries.find(opts.mariadb_bin, self.say)
        self.lease = osuser.lease(self.say)
        self.user = user = self.lease.user
        workspace, self.claim = osuser.lab_claim(self.lease, opts.workspace, self.say)
        self._base = base = self.claim.mount_tmpfs("mnt", TMPFS_SIZE) if os.geteuid() == 0 else self.claim.path
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

        run = self.private_folder("run")
        folders = Folders(data=role_dir("data", "data"), log=role_dir("log", "log"), undo=role_dir("undo", "undo"),
                          temp=role_dir("temp", "temp"), run=run)
        trace_dir = self.private_folder("trace")  # always: the I/O per object comes from it
        iotap = self.private_folder("iotap")
        self.session = Session(self.devices, iotap, trace_dir=trace_dir, page_cache=self.page_cache,
                               durlog_dir=self.private_folder("durlog") if opts.durability_log else None)
        self.session.create()
        self.session.pause()  # the server's creation and start are no measurement
        if user.switches:
            os.chown(self.session.state_path, user.uid, user.gid)
        runtime = workspace.root / "runtime"
        env = self.session.env()
        lib = native.iotap_path()
        env["LD_PRELOAD"] = str(osuser.reachable_copy(lib.parent, [lib.name], user, runtime) / lib.name)
        sets = {"innodb-buffer-pool-size": str(opts.cache_bytes),
                "innodb-lru-scan-depth": str(lru_scan_depth(opts.cache_bytes)),
                "innodb-flush-method": FLUSH_METHODS[opts.io_mode], **self.sets}
        if self.placement.roles["binlog"] != self.placement.roles["data"]:  # --set log-bin is refused: --place says
            sets["log-bin"] = str(role_dir("binlog", "binlog") / "binlog")
        self.server = Server(install.moved(osuser.reachable_copy(*install.layout(), user, runtime)), user, folders,
                             env, sets, cpu_scale=opts.cpu_scale)
        if opts.seed is None:
            self.server.install_db()
        else:
            _adopt(opts.seed, folders, user)
        self._start()
        if opts.seed is None:
            self.execute(f"CREATE DATABASE {DATABASE}")

    def seed(self) -> Seed:
        """Stops the server and returns its folders as a Seed other labs copy. The lab must have one
        device, where every file is: a table the run's own SQL put elsewhere (DATA DIRECTORY) is refused,
        since a copy would leave it behind."""
        (_dev,) = self.devices
        self.session.pause()
        self.server.stop()
        if self.lease is not None and self.lease.owned:  # nothing the load started may still change it
            osuser.stop_every_process(self.user)
        folders = self.server.folders
        apart = next(folders.data.rglob("*.isl"), None)  # InnoDB's link to a table's file elsewhere
        if apart is not None:
            raise UserError(f"the load put table {apart.parent.name}.{apart.stem} outside the data directory (DATA "
                            "DIRECTORY); it cannot be copied into the other layouts: place it with --place instead")
        return Seed(folders.data, folders.log, folders.undo)

    def _start(self) -> None:
        self.server.start()
        self.claim.watch(self.server.proc.pid, self.user.uid)

    def close(self) -> None:
        """Stops the server and removes the lab (its tmpfs unmounted), or with --keep leaves its files
        (copied off the tmpfs first: a mount would outlive the run). A second Ctrl-C cannot cut it short."""
        with lifecycle.shielded():
            try:
                if self.server is not None:
                    if self.session is not None:
                        with contextlib.suppress(Exception):
                            self.session.pause()  # the shutdown's writes are no measurement
                    self.server.stop()
                    self._log_text = self.server_log()
                    for _table, path in self.tables_outside():
                        _remove_made_file(path)
            finally:
                self._release_workspace(self._off_the_tmpfs)

    def tables_outside(self) -> list[tuple[str, Path]]:
        """The tables whose file InnoDB keeps outside every device's folder, where the run's own SQL put
        it (DATA DIRECTORY): (database.table, its file). Their I/O is no device's."""
        out = []
        for isl in self.server.folders.data.rglob("*.isl"):  # InnoDB's link to a table's file elsewhere
            try:
                path = self.file_path(isl.read_text(errors="replace").strip())
            except OSError:
                continue
            if self.device_of_path(path) is None:
                out.append((f"{isl.parent.name}.{isl.stem}", Path(path)))
        return out

    def _refuse_tables_outside(self) -> None:
        found = self.tables_outside()
        if found:
            (table, path), *_ = found
            raise UserError(f"the run's SQL put table {table} at {path} (DATA DIRECTORY), outside the emulated "
                            "devices, so its I/O was not emulated; leave DATA DIRECTORY out and place the table "
                            "with --place instead")

    def _off_the_tmpfs(self) -> None:
        """A kept lab's files copied off its own tmpfs, which is unmounted: no mount outlives the run."""
        if self._base is not None and self._base != self.claim.path:
            self.claim.unmount_keeping(self._base.name)

    def start_again(self) -> None:
        """The server started again after it stopped by itself (InnoDB ends the server on a failed flush):
        it recovers from its redo log, emulated or not as the session is now."""
        self.server.proc = None
        self._start()

    def stop_server(self) -> None:
        """A clean shutdown, for good (a crash test's end), with the emulation paused."""
        self.session.pause()
        self.server.stop()

    def while_stopped(self, action: Callable[[], object]) -> object:
        """`action` run with the server stopped by a clean shutdown (its pages written, its redo log
        checkpointed), and the emulation paused; the server started again after it. Returns what action
        returned."""
        self.stop_server()
        try:
            return action()
        finally:
            self._start()

    # -- use -------------------------------------------------------------------------------------

    def startable_folder(self, name: str) -> Path:
        """A folder of dbtier's own in which copies of the server's files can be started (a crash test's
        states): beside the log device's folder, off /dev/shm (where InnoDB would map its redo log)."""
        log = next(r for r in self.requests if r.name == self.placement.roles["log"])
        if log.directory is not None:
            path = self.claim.outside(log.directory / self.claim.child_name(name))
        else:
            path = self._base / name  # the lab's own tmpfs as root
            path.mkdir(mode=0o700)
        self.user.give(path)
        return path

    def private_folder(self, name: str) -> Path:
        """A folder of the lab's that only the server's user (and dbtier) may enter."""
        path = self.claim.inside(name, mode=0o700)
        self.user.give(path)
        return path

    def device_dir(self, name: str) -> Path:
        return next(d.directory for d in self.devices if d.name == name)

    def file_path(self, filename: str) -> str:
        """An InnoDB file name as information_schema gives it (relative to the data directory, to the
        server's own data directory as a placed table's is, or absolute), as a path."""
        if filename.startswith(OWN_DATA_DIRECTORY + "/"):
            filename = filename[len(OWN_DATA_DIRECTORY) + 1:]
        return str(Path(self.server.folders.data, filename).resolve()) if not filename.startswith("/") else filename

    def device_of_path(self, path: str) -> str | None:
        """The device whose folder holds path."""
        for d in self.devices:
            if path == str(d.directory) or path.startswith(str(d.directory) + "/"):
                return d.name
        return None

    def client_dir(self, sub: str | None = None) -> Path:
        """A folder of dbtier's own user (a client program's output), which nobody else may enter."""
        path = self.claim.path / "client"
        if not path.exists():
            self.claim.inside("client", mode=0o700)
        if sub:
            path = path / sub
            path.mkdir(mode=0o700, exist_ok=True)
        return path

    def dump_dir(self) -> Path:
        """A folder for dumps on the data's device (MariaDB has no dump role), the server's user's."""
        path = self.device_dir(self.placement.roles["data"]) / "dump"
        if not path.exists():
            path.mkdir(mode=0o700)
            self.user.give(path)
        return path

    def sync_files(self, paths: list[Path]) -> None:
        """Each file's dirty pages written to its device, waited for, as its writer's fsync would (the
        server writes some files and never syncs them: mariadb-dump --tab's rows): coreutils' `sync
        --data` under the interposer, as the server's user, so that the emulated devices do the work."""
        sync = shutil.which("sync") or "/bin/sync"
        run = subprocess.run([sync, "--data", *map(str, paths)], env=self.server.env, capture_output=True, text=True,
                             timeout=600, **self.user.popen_kwargs())
        if run.returncode != 0:
            raise UserError(f"sync of {len(paths)} file(s) failed: {run.stderr.strip()[-200:]}")

    def physical_backup(self, step: str, target: Path) -> str:
        """mariadb-backup --backup (the running server's files copied into target, its redo log followed
        as it copies) or --prepare (InnoDB's recovery applied to that copy, as a restore needs): run as
        the server's user, which reads its files, under the interposer, so that its reads and writes are
        the devices'. Its InnoDB does libaio, as the server's (its default, io_uring, goes round every
        interposer). It logs in through unix_socket as that user, with a backup's privileges. Returns
        its last line."""
        exe = self.server.install.exe("mariadb-backup")
        if not exe.is_file():
            raise UserError(f"no mariadb-backup under {self.server.install.basedir}; dbtier's own download has it "
                            "(give no --mariadb-bin), or install the mariadb-backup package")
        f = self.server.folders
        if step == "backup":
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.user.name):  # it goes into SQL as an account's name
                raise UserError(f"the server's user {self.user.name!r} cannot be a MariaDB account's name here; "
                                "run mariadb-backup as a user with a plain name")
            if not self._backup_user:
                self.execute(f"CREATE USER IF NOT EXISTS '{self.user.name}'@'localhost' IDENTIFIED VIA unix_socket")
                self.execute(f"GRANT RELOAD, PROCESS, LOCK TABLES, BINLOG MONITOR, SELECT ON *.* "
                             f"TO '{self.user.name}'@'localhost'")
                self._backup_user = True
            args = ["--backup", f"--socket={self.server.socket}", f"--user={self.user.name}", f"--datadir={f.data}",
                    f"--innodb-log-group-home-dir={f.log}", f"--innodb-undo-directory={f.undo}"]
        else:
            args = ["--prepare", f"--use-memory={self.options.cache_bytes}"]
        run = subprocess.run([str(exe), "--no-defaults", *args, f"--target-dir={target}", "--innodb-linux-aio=aio",
                              f"--tmpdir={f.temp}"], env=self.server.env, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, **self.user.popen_kwargs())
        lines = run.stderr.strip().splitlines()
        if run.returncode != 0 or not lines or not lines[-1].endswith("completed OK!"):
            said = [ln for ln in lines if "[ERROR]" in ln or "error" in ln.lower()] or lines[-1:]
            raise UserError(f"mariadb-backup --{step} failed: {said[0].strip()[:300] if said else 'no message'}")
        return lines[-1]

    def connect(self, database: str | None = DATABASE, local_infile: bool = False):
        return self.server.connect(database, local_infile=local_infile)

    def execute(self, sql: str, params=None) -> list[tuple]:
        with self.connect(None) as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall())

    def _data_directory(self, device: str) -> str:
        """The DATA DIRECTORY clause that puts a table's file on `device` (none: the data directory's).
        InnoDB keeps the path it is given, in its redo log too, so it is one each server resolves by its
        own data directory (its working directory): a link there to the device's folder. A copy of the
        folders (a crash state) then recovers its own table files, not the lab's."""
        if device == self.placement.roles["data"]:
            return ""
        folder = self.device_dir(device) / "tables"
        links = self.server.folders.data / PLACES
        for path in (folder, links):
            if not path.exists():
                path.mkdir(mode=0o700)
                self.user.give(path)
        link = links / device
        if not link.is_symlink():
            link.symlink_to(folder)
            self.user.give(link)
        return f" DATA DIRECTORY = '{OWN_DATA_DIRECTORY}/{PLACES}/{device}'"

    def create_table(self, name: str, definition: str, options: str = "") -> None:
        """CREATE TABLE name (definition) [options] in the lab's database, in its device's folder: InnoDB
        sets a table's file apart only as it creates it (DATA DIRECTORY)."""
        where = self._data_directory(self.placement.device_for(name, "table"))
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE TABLE `{name}` ({definition}) ENGINE = InnoDB {options}{where}")

    def place_objects(self) -> list[dict]:
        """Each table on the device the placement gives it, after a setup made them. InnoDB sets a
        table's file apart only as it creates it (ALTER TABLE ignores DATA DIRECTORY), so a misplaced
        table is rebuilt: created again where it goes, its rows copied, the two swapped by name, with
        the emulation paused (moving costs no device time). A name --place gives that the database
        lacks is refused, with the nearest one it has."""
        tables = self.handle.objects()
        indexes = self.execute("SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s "
                               "AND INDEX_NAME <> 'PRIMARY'", (DATABASE,))
        known = {**{name.lower(): "index" for (name,) in indexes}, **{t.qualified: t.kind for t in tables}}
        self.placement.check_objects(known, "the database after the setup")
        moves = []
        for t in tables:
            target = self.placement.device_for(t.qualified, "table")
            if t.device == target:
                continue
            self._rebuild(t.database, t.name, self._data_directory(target))
            moves.append({"object": t.qualified, "kind": "table", "from": t.device, "to": target, "bytes": t.bytes})
        return moves

    def _rebuild(self, database: str, name: str, where: str) -> None:
        with self.connect(database) as conn, conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = %s "
                        "AND (TABLE_NAME = %s OR REFERENCED_TABLE_NAME = %s)", (database, name, name))
            if cur.fetchone()[0]:
                raise UserError(f"--place {name}=...: {name} has foreign keys, and InnoDB moves a table only by "
                                "rebuilding it; create it where it goes instead (dbtier's own workloads do), or place "
                                "it with the rest (data=...)")
            cur.execute(f"SHOW CREATE TABLE `{name}`")
            ddl = cur.fetchone()[1]
            ddl = re.sub(r"\s*DATA DIRECTORY\s*=\s*'[^']*'", "", ddl, flags=re.IGNORECASE)
            # the old one renamed first: the new file is made under the table's name, the one the
            # trace's per-object I/O knows it by (a file keeps the name it was first opened under)
            old = f"{name}__dbtier_moved"
            cur.execute(f"RENAME TABLE `{name}` TO `{old}`")
            cur.execute(f"{ddl}{where}")
            cur.execute(f"INSERT INTO `{name}` SELECT * FROM `{old}`")
            cur.execute(f"DROP TABLE `{old}`")

    def object_placement(self, names: list[str]) -> list[dict]:
        """Where each named table is (its file, mapped to its device)."""
        found = {t.qualified: t for t in self.handle.objects()}
        return [found[name].describe() for name in names if name in found]

    def recycle_wal(self, nbytes: int) -> int:
        """Nothing to make ahead: InnoDB's redo log is one file of fixed size, made with the data
        directory and written round. Returns the files made ready: none."""
        return 0

    def restart_cold(self) -> None:
        """Empty caches: the server restarts (its buffer pool empty), and the OS page cache is emptied."""
        self.session.pause()
        self.server.stop()
        self.session.clear_page_cache()
        self.recording.event("page cache emptied")
        self._start()

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

    def end_figures(self) -> dict:
        """What a run's result records of the server at its end: the redo log's size (InnoDB's log
        device holds this much, whatever the run wrote)."""
        size = self.execute("SELECT @@innodb_log_file_size")[0][0]
        return {"redo_log_bytes": int(size)}

    def server_log(self) -> str:
        """The server's error log so far; after close, as it was when the server stopped."""
        if self._log_text is not None:
            return self._log_text
        try:
            return self.server.error_log.read_text(errors="replace")
        except (OSError, AttributeError):
            return ""

    def note_transactions(self, script: str, clients, ends_epoch_us, latency_ms, on_backend: bool = False) -> None:
        """Transactions a client timed (the epoch's clock), kept beside the trace: a crash test's
        acknowledged commits."""
        self.recording.transactions_timed(script, clients, ends_epoch_us, latency_ms, on_backend)

    def save_trace(self, out: Path, meta: dict) -> Path | None:
        """The run's trace (with --trace) as Parquet at `out`, with its course (measured, warm and cold
        intervals) and which server thread served the clients, as PostgreSQL's: what predict replays."""
        return self.recording.save(self.session, out, meta) if self.options.trace else None

    @contextlib.contextmanager
    def measure(self, label: str = "run"):
        """The measured interval, as PostgreSQL's (measure/interval.py): elapsed, the server's CPU, each
        device's figures and the I/O per object from the emulation (refused if the server did I/O it
        could not see), and InnoDB's own counters, timed waits and I/O per file (measure.py)."""
        m = Measurement()
        dumps = str(self.device_dir(self.placement.roles["data"]) / "dump")  # dump_dir(), made or not
        parts = [collectors.Emulation(self.session, self.devices, name_of=lambda path: measure.name_of(path, DATABASE, dumps),
                                      dilated=self.options.cpu_scale != 1.0,
                                      credits=None if self._measured_once else self.options.credits),
                 collectors.ServerCpu(self.server.proc.pid), measure.ServerCounters(self.server.connect),
                 measure.ServerThreads(self.server.connect)]
        self._measured_once = True  # the run's first measured interval starts with --credits, the rest as left
        with interval.measured(parts, label) as measured:
            yield m
        self._refuse_tables_outside()
        self.recording.measured(measured)
        m.result = measured.result

    def settings_compared(self) -> list[dict]:
        """The variables this run used where they differ from MariaDB's defaults or production's
        (engines/mariadb/production.py), read from the server itself; [] once it has stopped."""
        if self.server is None or self.server.proc is None:
            return []
        prod = self.options.production
        names = sorted({*production.APPLIED, *production.COMPARED, *(k.replace("-", "_") for k in self.sets)})
        rows = self.execute("SELECT VARIABLE_NAME, GLOBAL_VALUE, DEFAULT_VALUE, GLOBAL_VALUE_ORIGIN FROM "
                            "information_schema.SYSTEM_VARIABLES WHERE LOWER(VARIABLE_NAME) IN ("
                            + ", ".join(["%s"] * len(names)) + ") ORDER BY VARIABLE_NAME", names)
        given = {k: v for k, v in self.sets.items() if not prod or prod["applied"].get(k) != v}
        return production.compared(rows, prod, given)

    def describe(self) -> dict:
        return {
            "engine": "mariadb",
            "mariadb": self.server.install.describe() if self.server else None,
            "host": {"cpus": os.cpu_count()},
            "cache_bytes": self.options.cache_bytes,
            "io_mode": self.options.io_mode,
            "innodb_flush_method": FLUSH_METHODS[self.options.io_mode],
            "cpu_scale": self.options.cpu_scale,
            "credits": self.options.credits,
            "scale_model": self.options.scale_model,
            "page_cache": self.page_cache.describe(),
            "settings": dict(self.server.settings) if self.server else {},
            "user_settings": dict(self.sets),
            **({"production": {k: self.options.production[k] for k in ("file", "server", "applied")}}
               if self.options.production else {}),
            "settings_compared": self.settings_compared(),
            "placement": self.placement.describe(),
            "devices": self.session.describe() if self.session else [],
        }


def _remove_made_file(path: Path) -> None:
    """A table's file the server made outside the lab (InnoDB makes it new, never over a file that was
    there), and its database's folder if that is left empty: nothing of the run stays behind."""
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)
        path.parent.rmdir()
