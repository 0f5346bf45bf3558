"""The collectors of a measured interval, behind one interface: each is started before the clock
and stopped after it, in the order the interval needs, and each gives its own figures. pg.lab's
measure runs them; a prediction (predict.replay) has only the emulation's, through measure.emulated.

Order matters, and is the caller's: the wait sampler starts first and stops first (its own CPU and
backend are taken out of the server's); the emulation is unpaused before the CPU clock starts and
paused after it stops, so that only the interval is charged."""

from __future__ import annotations

from typing import Protocol

from dbtier.measure import cpu, diskstats, emulated, pgstats, waits
from dbtier.measure.trace import read_records


class Collector(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...


class WaitEvents:
    """pg_stat_activity sampled while the interval runs (or nothing, when sampling is off)."""

    def __init__(self, connect, enabled: bool = True):
        self.sampler = waits.WaitSampler(connect) if enabled else None
        self.sampled = {"events": [], "sampler_server_cpu_s": 0.0, "sampler_client_cpu_s": 0.0, "processes": {}}

    @property
    def backend_pid(self) -> int | None:
        return self.sampler.backend_pid if self.sampler else None

    def start(self) -> None:
        if self.sampler:
            self.sampler.start()

    def stop(self) -> None:
        if self.sampler:
            self.sampled = self.sampler.stop()


class ServerCpu:
    """The server processes' CPU time, the client's own, and the hypervisor's steal, over the interval."""

    def __init__(self, postmaster_pid: int):
        self.pid = postmaster_pid

    def prepare(self) -> None:
        """Before the clock: the server processes there are (stop waits for them to account their CPU)."""
        self.resident = cpu.children(self.pid)

    def start(self) -> None:
        self.server0, self.client0, self.steal0 = cpu.server_cpu_s(self.pid), cpu.own_cpu_s(), cpu.host_steal_s()

    def stop(self, not_ours: set[int] = frozenset()) -> None:
        cpu.settle(self.pid, self.resident - set(not_ours))
        self.server1, self.client1, self.steal1 = cpu.server_cpu_s(self.pid), cpu.own_cpu_s(), cpu.host_steal_s()

    def figures(self, spin_s: float, sampled: dict) -> dict:
        server = max(0.0, self.server1 - self.server0 - spin_s - sampled["sampler_server_cpu_s"])
        return {"server_cpu_s": server,
                "client_cpu_s": max(0.0, self.client1 - self.client0 - sampled["sampler_client_cpu_s"]),
                "host_steal_s": self.steal1 - self.steal0}


class ServerStats:
    """pg_stat_io and pg_stat_wal deltas (read outside the interval: their queries cost no device time)."""

    def __init__(self, connect):
        self.connect = connect
        with connect() as conn:
            self.before = pgstats.snapshot(conn)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        with self.connect() as conn:
            self.delta = pgstats.delta(self.before, pgstats.snapshot(conn))
            self.backend_types = dict(conn.execute("SELECT pid, backend_type FROM pg_stat_activity").fetchall())


class RealDisks:
    """/proc/diskstats of the block devices under `real` devices: the kernel's view beside the interposer's."""

    def __init__(self, devices):
        self.disks = {d.name: diskstats.block_device(d.directory) for d in devices if d.profile.kind == "real"}

    def start(self) -> None:
        self.before = {name: diskstats.read(bd) for name, bd in self.disks.items() if bd}

    def stop(self) -> None:
        self.after = {name: diskstats.read(self.disks[name]) for name in self.before}

    def annotate(self, rows: list[dict], elapsed_s: float) -> None:
        for row in rows:
            if row["device"] in self.before:
                row["diskstats"] = {"block_device": self.disks[row["device"]],
                                    **diskstats.figures(self.before[row["device"]], self.after[row["device"]],
                                                        elapsed_s)}


class Emulation:
    """The emulation's state and trace: charged only between start (unpaused) and stop (paused)."""

    def __init__(self, session, devices):
        self.session, self.devices = session, devices

    def start(self) -> None:
        self.session.pause(False)
        self.before = self.session.snapshot()

    def stop(self) -> None:
        self.after = self.session.snapshot()
        self.session.pause()

    def gaps(self) -> list[str]:
        return self.session.gaps(self.after, self.before)

    def dilation_s(self) -> float:
        """The CPU time the server's processes spent as a slower CPU would (--cpu-scale)."""
        return (int(self.after.get("cpu_dilation_ns", 0)) - int(self.before.get("cpu_dilation_ns", 0))) / 1e9

    def figures(self, elapsed_s: float, t0_ns: int, t1_ns: int, names: dict) -> emulated.EmulatedFigures:
        recs = read_records(self.session.trace_dir)
        recs = recs[(recs["submit_ns"] >= t0_ns) & (recs["submit_ns"] <= t1_ns)]
        files = {int(row[0]): row[2] for row in self.after["files"]}  # [index, device, path, st_dev, st_ino]
        return emulated.figures(self.devices, self.before, self.after, elapsed_s, recs, files, names)
