"""The collectors of a measured interval (driven by measure/interval.py): each declares when it
starts and stops among the others, and contributes its own figures afterwards. pg.lab's measure
builds the list; a prediction (predict.replay) has only the emulation's figures, through
measure.emulated.

The order a measurement needs: the wait sampler starts first and stops first (its own CPU and
backend are taken out of the server's); the emulation is unpaused before the CPU clock starts and
paused after it stops, so that only the interval is charged; the CPU clock starts last and stops
right after the sampler, and marks the trace's window. Figures are contributed in the list's order:
object names before the emulation's per-object I/O, the emulation's spin before the server's CPU,
the CPU and pg_stat_io before the top wait events."""

from __future__ import annotations

import time

from dbtier.errors import UserError
from dbtier.measure import cpu, diskstats, emulated, objects, pgstats, waits
from dbtier.measure.trace import read_records


class _Base:
    start_rank = stop_rank = 50

    def prepare(self) -> None:
        pass

    def start(self, interval) -> None:
        pass

    def stop(self, interval) -> None:
        pass

    def contribute(self, interval, figures: dict) -> None:
        pass


class ObjectNames(_Base):
    """The database's object names by (database, relfilenode), read before the clock and again after
    (a phase may create objects): what the trace's files are called."""

    def __init__(self, connect, database: str):
        self.connect, self.database = connect, database

    def prepare(self) -> None:
        self.names = objects.cluster_names(self.connect, self.database)  # catalog reads cost no device time

    def contribute(self, interval, figures: dict) -> None:
        self.names.update(objects.cluster_names(self.connect, self.database))
        interval.notes["names"] = self.names


class WaitEvents(_Base):
    """pg_stat_activity sampled while the interval runs (or nothing, when sampling is off); then the
    top timed events, from the samples, the server's CPU and pg_stat_io."""
    start_rank, stop_rank = 0, 0

    def __init__(self, connect, enabled: bool = True):
        self.sampler = waits.WaitSampler(connect) if enabled else None
        self.sampled = {"events": [], "sampler_server_cpu_s": 0.0, "sampler_client_cpu_s": 0.0, "processes": {}}

    @property
    def backend_pid(self) -> int | None:
        return self.sampler.backend_pid if self.sampler else None

    def start(self, interval) -> None:
        if self.sampler:
            self.sampler.start()
            if self.backend_pid is not None:
                interval.not_ours.add(self.backend_pid)
        interval.notes["sampled"] = self.sampled

    def stop(self, interval) -> None:
        if self.sampler:
            self.sampled = self.sampler.stop()
        interval.notes["sampled"] = self.sampled
        if self.backend_pid is not None:
            interval.notes.setdefault("processes", {})[self.backend_pid] = "dbtier wait sampler"

    def contribute(self, interval, figures: dict) -> None:
        processes = interval.notes.setdefault("processes", {})  # what the server said of a pid comes first
        processes.update({pid: kind for pid, kind in self.sampled.pop("processes", {}).items() if pid not in processes})
        figures["wait_events"] = self.sampled
        figures["top_events"] = waits.top_events(self.sampled, figures["server_cpu_s"], interval.elapsed_s,
                                                 figures.get("pg_stat_io"))


class ServerCpu(_Base):
    """The server processes' CPU time, the client's own, and the hypervisor's steal, over the interval:
    the clock, which also marks the trace's window."""
    start_rank, stop_rank = 99, 1

    def __init__(self, server_pid: int):
        self.pid = server_pid  # PostgreSQL's postmaster (its children are the server), or mariadbd

    def prepare(self) -> None:
        """Before the clock: the server processes there are (stop waits for them to account their CPU)."""
        self.resident = cpu.children(self.pid)

    def start(self, interval) -> None:
        interval.t0_ns = time.monotonic_ns()
        self.server0, self.client0, self.steal0 = cpu.server_cpu_s(self.pid), cpu.own_cpu_s(), cpu.host_steal_s()

    def stop(self, interval) -> None:
        cpu.settle(self.pid, self.resident - set(interval.not_ours))
        self.server1, self.client1, self.steal1 = cpu.server_cpu_s(self.pid), cpu.own_cpu_s(), cpu.host_steal_s()
        interval.t1_ns = time.monotonic_ns()
        interval.notes.setdefault("processes", {})[self.pid] = "postmaster"

    def contribute(self, interval, figures: dict) -> None:
        sampled = interval.notes.get("sampled", {})  # no wait sampler (MariaDB's waits are its own counters)
        server = self.server1 - self.server0 - figures["emulation_spin_s"] - sampled.get("sampler_server_cpu_s", 0.0)
        figures.update(server_cpu_s=max(0.0, server),
                       client_cpu_s=max(0.0, self.client1 - self.client0 - sampled.get("sampler_client_cpu_s", 0.0)),
                       host_steal_s=self.steal1 - self.steal0)


class ServerStats(_Base):
    """pg_stat_io and pg_stat_wal deltas (read outside the interval: their queries cost no device
    time), and which server process was which."""

    def __init__(self, connect):
        self.connect = connect

    def prepare(self) -> None:
        with self.connect() as conn:
            self.before = pgstats.snapshot(conn)

    def contribute(self, interval, figures: dict) -> None:
        with self.connect() as conn:
            delta = pgstats.delta(self.before, pgstats.snapshot(conn))
            types = dict(conn.execute("SELECT pid, backend_type FROM pg_stat_activity").fetchall())
        processes = interval.notes.setdefault("processes", {})
        processes.update({pid: kind for pid, kind in types.items() if pid not in processes})
        figures.update(pg_stat_io=delta["io"], pg_stat_wal=delta["wal"])


class RealDisks(_Base):
    """/proc/diskstats of the block devices under `real` devices: the kernel's view beside the interposer's."""
    start_rank, stop_rank = 20, 20

    def __init__(self, devices):
        self.disks = {d.name: diskstats.block_device(d.directory) for d in devices if d.profile.kind == "real"}

    def start(self, interval) -> None:
        self.before = {name: diskstats.read(bd) for name, bd in self.disks.items() if bd}

    def stop(self, interval) -> None:
        self.after = {name: diskstats.read(self.disks[name]) for name in self.before}

    def contribute(self, interval, figures: dict) -> None:
        for row in figures["devices"]:
            if row["device"] in self.before:
                row["diskstats"] = {"block_device": self.disks[row["device"]],
                                    **diskstats.figures(self.before[row["device"]], self.after[row["device"]],
                                                        interval.elapsed_s)}


class Emulation(_Base):
    """The emulation's state and trace: charged only between start (unpaused) and stop (paused). A
    measurement it could not cover whole (I/O it could not see) is refused."""
    start_rank, stop_rank = 10, 30

    def __init__(self, session, devices, dilated: bool = False, credits: float | None = None, name_of=None):
        self.session, self.devices, self.dilated = session, devices, dilated
        self.credits = credits  # capped volumes' burst credits as the interval starts; None: as they are
        self.name_of = name_of  # the engine's naming of its files (None: PostgreSQL's, by its catalog)

    def start(self, interval) -> None:
        if self.dilated:  # the wait sampler (started before) is the measurement's, not the slower server's
            self.session.spare_from_dilation(next(iter(interval.not_ours), None))
        self.session.pause(False)
        if self.credits is not None:  # as late as can be: what the run's load before this spent is not counted
            self.session.set_credits(self.credits)
        self.before = self.session.snapshot()

    def stop(self, interval) -> None:
        self.after = self.session.snapshot()
        self.session.pause()

    def gaps(self) -> list[str]:
        return self.session.gaps(self.after, self.before)

    def dilation_s(self) -> float:
        """The CPU time the server's processes spent as a slower CPU would (--cpu-scale)."""
        return (int(self.after.get("cpu_dilation_ns", 0)) - int(self.before.get("cpu_dilation_ns", 0))) / 1e9

    def contribute(self, interval, figures: dict) -> None:
        gaps = self.gaps()
        if gaps:
            raise UserError(f"the measurement would be incomplete: {'; '.join(gaps)} (the server log says more)")
        recs = read_records(self.session.trace_dir)
        recs = recs[(recs["submit_ns"] >= interval.t0_ns) & (recs["submit_ns"] <= interval.t1_ns)]
        files = {int(row[0]): row[2] for row in self.after["files"]}  # [index, device, path, st_dev, st_ino]
        emu = emulated.figures(self.devices, self.before, self.after, interval.elapsed_s, recs, files,
                               interval.notes.get("names", {}), name_of=self.name_of)
        figures.update(io_wait_s=emu.io_wait_s, devices=emu.devices, object_io=emu.object_io,
                       emulation_spin_s=emu.spin_s, cpu_dilation_s=self.dilation_s() if self.dilated else None)
