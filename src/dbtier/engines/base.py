"""What an experiment asks of a database engine: the contract every engine implements.

An engine lays a server's files over the experiment's devices by *roles* (PostgreSQL: data,
indexes, wal, temp, dump; InnoDB would have data, redo log, undo, temp, doublewrite, binlog) and
moves named objects between them; it knows its settings and what the lab must refuse of them; it
runs a lab (a server over the devices, started, measured, stopped: engines/postgres/lab.py is the
pattern); and it says where a run's WAL-like log, temp files and dumps go, so that the preflight can
count their room. A workload says which engines it runs on (`Workload.engines`): its SQL is an
engine's. Nothing above this seam names an engine's modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager, Protocol

from dbtier.devices.spec import DeviceSpec
from dbtier.errors import UserError


#: the loaded-once cluster's one device (compare's seed lab): a name no layout may use
SEED_DEVICE = "dbtier-seed"


def seed_device() -> DeviceSpec:
    """A seed lab's one device: a load there runs with the emulation paused, so its model costs nothing."""
    from dbtier.devices.profile import load
    return DeviceSpec(SEED_DEVICE, load("ram-san"), spec="ram-san")


class Engine(Protocol):
    name: str
    title: str                    # as people write it: "PostgreSQL"
    cache_setting: str            # the database cache --cache sets ("shared_buffers")
    min_cache: int                # its least, in bytes
    #: the memory settings a scale model divides: name -> (its default text, its least in bytes, and
    #: why a run's is no less, when that is not the engine's own minimum)
    scaled_settings: dict[str, tuple]
    #: the placement roles, the first being where everything not placed goes
    roles: tuple[str, ...]
    #: where an index goes unless placed by name (None: with its table, in its table's file)
    index_role: str | None
    #: the roles of a run's log (PostgreSQL's WAL), temp files and dumps: where the preflight counts them
    log_role: str
    temp_role: str
    dump_role: str
    #: advise's name for what follows the data role and no placement names (PostgreSQL's catalogs,
    #: InnoDB's system tablespace)
    system_part: str
    io_modes: tuple[str, ...]
    default_io_mode: str
    #: whether one load can be shared by several layouts (a seed lab copied into each: compare, verify)
    shares_loads: bool
    #: whether a user's load can also be kept in the workspace for later runs (kept_clusters)
    keeps_loads: bool

    def parse_placement(self, texts, devices: list[str]) -> Any:
        """--place texts over the device names: a Placement of this engine's roles."""

    def make_placement(self, roles: dict[str, str], objects: dict[str, str]) -> Any:
        """A Placement of this engine's from every role's device and the objects placed by name."""

    def parse_settings(self, texts) -> dict[str, str]:
        """--set NAME=VALUE texts, checked (what the lab owns refused): name -> value."""

    def lab_options(self, **options) -> Any:
        """The lab's options (sizes in bytes, the I/O mode, settings, CPU scale, workspace...)."""

    def check_lab(self, options, devices: list[DeviceSpec]) -> Any:
        """What its lab would refuse, before anything is made; the sizes it will use (cache, page cache)."""

    def connection_limit(self, settings: dict[str, str]) -> int:
        """The server connections a lab allows with these settings."""

    def log_kept(self, settings: dict[str, str], generated: int) -> int:
        """The bytes of log a run that generates `generated` keeps on its log device at most."""

    def lab(self, devices: list[DeviceSpec], placement, options, say: Callable[[str], None]) -> ContextManager:
        """A server over the devices (see engines/postgres/lab.py): entered, it runs; left, it is gone."""

    def seed_lab(self, options, say: Callable[[str], None]) -> ContextManager:
        """A lab of one device where a workload's data is loaded once, to be copied into others (compare)."""

    def settings_from(self, path) -> dict:
        """Production's settings from a snapshot file, checked: {file, server, settings (as shown), applied
        (name -> the lab's text), cache_bytes (its database cache, or None)}."""

    def version(self, options) -> str:
        """The server's version its lab would run: part of what a kept loaded cluster is keyed by."""

    def kept_clusters(self, workspace_root) -> Any:
        """Its loaded clusters kept in the workspace: keep(lab, seed, key, record), use(key), entries(),
        remove(key) (engines/postgres/kept.py)."""

    def describe(self) -> dict:
        """The engine as a result records it."""


def read_settings_file(path: Path, max_bytes: int, refuse: Callable[[Path, str], Exception]) -> str:
    """Production's settings file (--settings-from), content dbtier did not write: its text, or refused
    in one line naming it (refuse(path, what) makes the error)."""
    try:
        if not path.is_file():
            raise refuse(path, "no such file")
        if path.stat().st_size > max_bytes:
            raise refuse(path, f"larger than {max_bytes >> 20} MB, not a settings file")
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise UserError(f"--settings-from {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise refuse(path, "not UTF-8 text") from None


@dataclass
class Sizes:
    """What a lab's memory takes, as check_lab works it out."""
    cache: int        # the database cache (shared_buffers, innodb_buffer_pool_size), bytes
    page_cache: int   # the emulated OS page cache, bytes


@dataclass
class Measurement:
    """What a lab's measure() block yields: its result, filled when the block ends."""
    result: dict = field(default_factory=dict)


class LabLifecycle:
    """A lab as a context: entered, it opens (and closes what it had made if opening fails, Ctrl-C
    included); left, it closes. A lab implements _open and close, and holds its workspace as `claim`
    (None until made), what its SQL may leave running as `lease`, its options (`keep`) and `say`."""

    def _open(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def _release_workspace(self, keeping: Callable[[], None] = lambda: None) -> None:
        """The lab's hold on its workspace ended (its server already stopped): what the run's SQL started
        and left running goes too; the workspace is removed, or with --keep kept (keeping(): what keeping
        it takes first) and said where."""
        keep = self.claim is not None and self.options.keep
        try:
            if self.lease is not None:
                self.lease.release(keep=[self.claim.path, *map(Path, self.claim.record.get("folders", []))]
                                   if keep else [])
        finally:
            if keep:
                keeping()
                self.claim.keep()
                self.say(f"workspace kept: {self.claim.path} (remove it when done)")
            elif self.claim is not None:
                self.claim.remove()

    def __enter__(self):
        try:
            self._open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

