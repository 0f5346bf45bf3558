"""An emulation session: directories mapped to device profiles, the shared state the interposer
attaches to, and the environment a program needs to run on the virtual devices."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dbtier.devices import hostfs, native
from dbtier.devices.pagecache import PageCache
from dbtier.devices.patterns import STANDARD, expected
from dbtier.devices.profile import Profile
from dbtier.errors import UserError
from dbtier.workspace import write_private

@dataclass(frozen=True)
class Device:
    name: str
    directory: Path  # resolved, absolute
    profile: Profile


def check_distinct(devices: list[Device]) -> None:
    seen: dict[Path, str] = {}
    for d in devices:
        if d.directory in seen:
            raise UserError(f"devices {seen[d.directory]} and {d.name} are the same directory {d.directory}")
        seen[d.directory] = d.name


def host_floor_warnings(devices: list[Device]) -> list[str]:
    """Devices faster than the host's own storage under them can only be emulated from RAM."""
    out = []
    for d in devices:
        if d.profile.kind == "real":
            continue
        fastest = min(expected(d.profile, p).mean_us for p in STANDARD)
        if fastest < hostfs.FAST_DEVICE_US and not hostfs.is_ram(d.directory):
            fs = hostfs.mount_of(d.directory)[1]
            out.append(
                f"device {d.name} ({d.profile.name}) models I/Os of {fastest:.0f} us, but {d.directory} is on "
                f"{fs}, whose own latency may exceed that; put it on tmpfs (e.g. under /dev/shm) for faithful "
                "timing. Overruns are counted and reported."
            )
    return out


#: the interposer's CPU time dilation factor, for the processes that run as on a slower CPU
#: (native/iotap/interpose.c: cpu_dilate)
CPU_SCALE_ENV = "DBTIER_IOTAP_CPU_SCALE"


def check_cpu_scale(k: float) -> None:
    """A live run can make the server's CPU slower, not faster (a prediction can do both)."""
    if not (1.0 <= k <= 1000.0):
        raise UserError(f"--cpu-scale {k:g}: give a factor from 1 to 1000 (2: a server CPU twice as slow as this "
                        "machine's); a faster CPU can only be predicted: dbtier predict RUN_DIR --cpu-scale K")


#: what each bypass the interposer counts (native/iotap/state.h, dbt_bypass_kind) is, and what to use
#: instead; {path} is the device file or the program started
_IO_INSTEAD = "use read and write calls or libaio instead (fio: --ioengine=psync, pvsync2 or libaio)"
BYPASSES = {
    "mmap": ("mapped a device file into memory (mmap), whose reads and writes the emulation cannot see ({path})",
             _IO_INSTEAD),
    "libaio": ("did I/O on a device file through io_submit (libaio) asking to be told of its completion through "
               "an eventfd, which the emulation does not do ({path})", "leave out IOCB_FLAG_RESFD and reap with "
               "io_getevents"),
    "posix_aio": ("did I/O on a device file through POSIX AIO (aio_read, aio_write, lio_listio), which the "
                  "emulation cannot see ({path})", _IO_INSTEAD),
    "io_uring": ("set up io_uring, whose I/O the emulation cannot see", _IO_INSTEAD),
    "splice": ("moved a device file's data with splice, inside the kernel where the emulation cannot see it "
               "({path})", _IO_INSTEAD),
    "sendfile": ("moved a device file's data with sendfile, inside the kernel where the emulation cannot see it "
                 "({path})", _IO_INSTEAD),
    "exec_env": ("started {path} without the interposer (LD_PRELOAD or DBTIER_IOTAP taken out of its "
                 "environment), so its I/O went unseen", "keep both in the environment of the programs it starts"),
    "exec_static": ("started {path}, a statically linked program, which the interposer (LD_PRELOAD) cannot enter, "
                    "so its I/O went unseen", "run a dynamically linked build of it"),
    "exec_foreign": ("started {path}, a program built for another architecture, which the interposer cannot "
                     "enter, so its I/O went unseen", "run a build of it for this machine"),
}


def bypass_gaps(after: dict, before: dict | None = None) -> list[str]:
    """One phrase per kind of bypass that grew between two snapshots, naming the process and the file or
    program of the first of its kind, with what to use instead."""
    out = []
    earlier = (before or {}).get("bypasses", {})
    for kind, record in after.get("bypasses", {}).items():
        n = int(record.get("count", 0)) - int(earlier.get(kind, {}).get("count", 0))
        if n <= 0:
            continue
        what, instead = BYPASSES.get(kind, (f"bypassed the emulation ({kind})", "run it without that"))
        program = record.get("program") or "a process"
        path = record.get("path") or "a file it had open"
        times = (f" ({n} programs)" if kind.startswith("exec") else f" ({n} calls)") if n > 1 else ""
        out.append(f"{program} {what.format(path=path)}{times}; {instead}")
    return out


class Session:
    """Creates the state in `workdir`; programs started with `env()` run on the devices."""

    def __init__(self, devices: list[Device], workdir: Path, trace_dir: Path | None = None,
                 page_cache: PageCache | None = None, durlog_dir: Path | None = None):
        if not devices:
            raise UserError("no devices: give at least one --device NAME=PROFILE:DIR")
        check_distinct(devices)
        self.devices = devices
        self.workdir = workdir
        self.trace_dir = trace_dir
        self.page_cache = page_cache
        self.durlog_dir = durlog_dir  # a durability log (native/iotap/durlog.h), for crash states
        self.state_path = workdir / "iotap.state"

    def create(self) -> None:
        for d in self.devices:  # said here as the command line would say it; the library refuses them too
            for what, text in (("name", d.name), ("folder", str(d.directory))):
                if any(ord(c) < 0x20 or ord(c) == 0x7f for c in text):
                    raise UserError(f"device {what} {text!r} holds a control character; rename it, or give another "
                                    "folder")
        self.workdir.mkdir(parents=True, exist_ok=True)
        native.create_state(self.state_path,
                            [(d.name, d.profile.kind, str(d.directory), d.profile.params) for d in self.devices],
                            self.page_cache)
        if self.trace_dir:
            self.trace_dir.mkdir(exist_ok=True)  # its mode is whoever made it's: never widened here
        if self.durlog_dir:
            self.durlog_dir.mkdir(exist_ok=True)

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        preload = str(native.iotap_path())
        env["LD_PRELOAD"] = f"{preload} {env['LD_PRELOAD']}" if env.get("LD_PRELOAD") else preload
        env["DBTIER_IOTAP"] = str(self.state_path)
        if self.trace_dir:
            env["DBTIER_IOTAP_TRACE"] = str(self.trace_dir)
        else:
            env.pop("DBTIER_IOTAP_TRACE", None)
        if self.durlog_dir:
            env["DBTIER_IOTAP_DURLOG"] = str(self.durlog_dir)
        else:
            env.pop("DBTIER_IOTAP_DURLOG", None)
        return env

    def pause(self, paused: bool = True) -> None:
        native.set_paused(self.state_path, paused)

    def keep_durability_log(self, on: bool = True) -> None:
        """From now, the processes started with env() log every write's bytes (crash states)."""
        native.set_durability_log(self.state_path, on)

    def spare_from_dilation(self, pid: int | None) -> None:
        """The measurement's own server process (the wait sampler's backend) keeps this machine's CPU
        under --cpu-scale: its CPU time is taken out of the server's, so its dilation must be too."""
        native.set_undilated(self.state_path, pid or 0)

    def clear_page_cache(self) -> None:
        native.clear_page_cache(self.state_path)

    def fail_fsync(self, device: int, nth: int = 1, pg_class: str | None = None, suffix: str = "") -> None:
        """The nth fsync of a file on device `device` (its index; of pg_class, as pgpath.h names them,
        if given; whose path ends with suffix, if given) from now fails with EIO, its dirty pages
        marked clean, as Linux leaves them; snapshot()["fault"] says when and what it failed. Device -1
        disarms it."""
        native.set_fsync_error(self.state_path, device, nth, pg_class, suffix)

    def set_credits(self, fraction: float, at_ns: int = 0) -> None:
        """Capped volumes' burst credits: `fraction` of a full bucket from at_ns (0: now)."""
        native.set_credits(self.state_path, fraction, at_ns)

    def snapshot(self) -> dict:
        return native.dump_state(self.state_path)

    def gaps(self, after: dict, before: dict | None = None) -> list[str]:
        """What the emulation could not cover between two snapshots: I/O on file descriptors beyond the
        interposer's reach (neither delayed nor counted), processes whose trace could not be written, and
        bypasses (I/O the interposer saw go around it: a device file mapped into memory, asynchronous or
        in-kernel I/O, a program started without it). Any makes the figures incomplete, so a command
        that finds one fails rather than report them."""
        def grown(key: str) -> int:
            return int(after.get(key, 0)) - int((before or {}).get(key, 0))
        out = []
        if grown("untracked_calls"):
            out.append(f"{grown('untracked_calls')} I/O calls on file descriptors beyond the interposer's reach "
                       "were neither emulated nor counted")
        if self.trace_dir and grown("trace_failures"):
            out.append(f"{grown('trace_failures')} process(es) could not write their trace into {self.trace_dir}")
        if self.durlog_dir and grown("durlog_failures"):
            out.append(f"{grown('durlog_failures')} process(es) could not write their durability log into "
                       f"{self.durlog_dir}")
        return out + bypass_gaps(after, before)

    def describe(self) -> list[dict]:
        return [
            {"name": d.name, "dir": str(d.directory), "profile": d.profile.name, "kind": d.profile.kind,
             "params": d.profile.params}
            for d in self.devices
        ]

    def save_trace_meta(self, meta: dict) -> None:
        """Beside the trace records: the file table and the run's facts, for `dbtier trace`."""
        if not self.trace_dir:
            return
        state = self.snapshot()
        chunks, cursors = native.chunk_map(self.state_path)
        # the trace's file table is [index, device, path]; the inode the state keeps besides is this host's
        write_private(self.trace_dir / "files.json", json.dumps([row[:3] for row in state["files"]]), mode=0o644)
        write_private(self.trace_dir / "layout.json",
                      json.dumps({"chunk_bytes": native.chunk_bytes(), "chunks": chunks.tolist(),
                                  "cursors": cursors[:len(self.devices)]}), mode=0o644)
        write_private(self.trace_dir / "meta.json",
                      json.dumps({**meta, "trace_format": native.trace_format(),
                                  "sync_coverage": native.sync_coverage(), "devices": self.describe()},
                                 indent=1), mode=0o644)

    def remove(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


def run_on_device(profile: Profile, directory: Path, cmd: list[str], name: str = "dev") -> tuple[str, dict]:
    """Runs cmd with `directory` on a fresh emulated device; returns its stdout and the device's
    counters. The session's state is removed afterwards, whatever happens."""
    session = Session([Device(name, Path(directory).resolve(), profile)], Path(tempfile.mkdtemp(prefix="dbtier-run-")))
    try:
        session.create()
        out = subprocess.run(cmd, env=session.env(), capture_output=True, text=True, check=True).stdout
        return out, session.snapshot()["devices"][0]
    finally:
        session.remove()
