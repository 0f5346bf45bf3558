"""`dbtier run pgbench`: pgbench as DBAs already run it, on the virtual devices.

Its options mean what pgbench's do: -i/--scale for the built-in tables (or --setup/--restore for your
own), -b NAME[@W] and -f FILE[@W] for the scripts, -c, -j, -T or -t, -M, -R/--rate, --latency-limit.
The setup is unmeasured (emulation paused); the run is measured as one phase, and reports tps and the
latency percentiles of each script from pgbench's per-transaction log, beside everything a run reports."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from dbtier.errors import UserError
from dbtier.workloads import pgbench_log, restore, sqlfile
from dbtier.workloads.base import Footprint, Param, Phase, WorkloadError

BUILTINS = ("tpcb-like", "simple-update", "select-only")
_WEIGHT = re.compile(r"^(?P<what>.+?)(?:@(?P<weight>\d+))?$")
_TPS = re.compile(r"^tps = (?P<tps>[\d.]+) \(without initial connection time\)", re.M)
#: pgbench -i: a scale unit is 100,000 accounts (about 15 MB of table and 2 MB of key)
ACCOUNT_BYTES_PER_SCALE = 15_000_000
INDEX_BYTES_PER_SCALE = 2_300_000


def _weighted(text: str, what: str) -> tuple[str, int]:
    m = _WEIGHT.match(text)
    weight = int(m.group("weight")) if m.group("weight") else 1
    if not 0 < weight <= 1000:
        raise UserError(f"{what} {text}: a weight is 1 to 1000")
    return m.group("what"), weight


class UserPgbench(restore.UserWorkload):
    name = "pgbench"
    seed = "-"
    summary = "pgbench, with its own options: built-in or your own scripts, your own tables or a dump"
    description = (
        "pgbench as you run it: -i with --scale makes its tables (or --setup FILE / --restore DUMP loads your "
        "own), unmeasured; then -b NAME[@W] (tpcb-like, simple-update, select-only) and -f FILE[@W] scripts run "
        "with -c clients and -j threads for -T seconds or -t transactions each, -M protocol, -R rate (an open "
        "loop: transactions scheduled at that rate) and --latency-limit. Reported: tps, latency p50/p90/p99/p99.9 "
        "per script from pgbench's per-transaction log, skipped and failed transactions, and everything every "
        "run reports. Without -b or -f, tpcb-like runs. pgbench's -j is its threads here: a custom or "
        "directory dump restores with --restore-jobs.")
    params = (
        Param("init", bool, False, "make pgbench's tables first (pgbench -i), at --scale", flags=("-i",)),
        Param("scale", int, 1, "pgbench -i's scale: 100,000 accounts each", flags=("-s",)),
        Param("setup", Path, (), "a SQL file run first, unmeasured, as a psql script as you (psql's commands run "
              "with your rights; repeatable)", multiple=True,
              metavar="FILE"),
        Param("restore", Path, None, "a pg_dump file or folder restored first, unmeasured (as the server's user; "
              "psql commands in a plain dump are refused)", metavar="DUMP"),
        Param("restore-jobs", int, 1, "parallel jobs for --restore of a custom or directory dump", maximum=16),
        Param("builtin", str, (), "a built-in script, NAME[@WEIGHT] (repeatable)", multiple=True, flags=("-b",),
              metavar="NAME[@W]"),
        Param("file", Path, (), "a script file of yours, FILE[@WEIGHT] (repeatable; pgbench runs it as you, its \\shell "
              "commands with your rights)", multiple=True, flags=("-f",),
              metavar="FILE[@W]"),
        Param("client", int, 1, "concurrent clients (sessions)", flags=("-c",), maximum=1000),
        Param("jobs", int, 1, "pgbench's threads", flags=("-j",), maximum=64),
        Param("time", int, None, "run this many seconds (the default: 60, unless -t)", flags=("-T",),
              maximum=86400),
        Param("transactions", int, None, "transactions each client runs, instead of -T", flags=("-t",)),
        Param("protocol", str, "simple", "how queries are sent", flags=("-M",),
              choices=("simple", "extended", "prepared")),
        Param("rate", float, None, "transactions per second in all, scheduled (an open loop)", flags=("-R",),
              minimum=None),
        Param("latency-limit", float, None, "ms: transactions slower count as late; with --rate, ones that "
              "cannot start in time are skipped", minimum=None),
    )

    def __init__(self, **values):
        super().__init__(**values)
        p = self.p
        if p["time"] is not None and p["transactions"] is not None:
            raise UserError("give -T (seconds) or -t (transactions per client), not both")
        if p["time"] is None and p["transactions"] is None:
            p["time"] = 60
        if p["jobs"] > p["client"]:
            raise UserError(f"-j {p['jobs']}: at most one thread per client (-c {p['client']})")
        for key, what in (("rate", "-R/--rate"), ("latency_limit", "--latency-limit")):
            v = p[key]
            if v is not None and not (v == v and 0 < v < 1e9):
                raise UserError(f"{what} {v}: give a positive number")
        if p["init"] and (p["setup"] or p["restore"] is not None):
            raise UserError("-i makes pgbench's own tables; with --setup or --restore, leave it out")
        for path in p["setup"]:
            sqlfile.read_text(path, "--setup")  # readable, UTF-8: found now, not after the load
        if p["restore"] is not None:
            restore.dump_format(p["restore"])
        self.scripts: list[tuple[str, list[str], int]] = []  # name, pgbench arguments, weight
        for text in p["builtin"]:
            name, weight = _weighted(text, "-b")
            full = [b for b in BUILTINS if b.startswith(name)]
            if len(full) != 1:
                raise UserError(f"-b {text}: choose one of {', '.join(BUILTINS)} (a prefix will do)")
            self.scripts.append((full[0], ["-b", f"{full[0]}@{weight}"], weight))
        for text in p["file"]:
            name, weight = _weighted(str(text), "-f")
            path = Path(name).expanduser()
            if not path.is_file():
                raise UserError(f"-f {text}: no such script file")
            self.scripts.append((path.name, ["-f", f"{path.resolve()}@{weight}"], weight))
        if not self.scripts:
            self.scripts.append(("tpcb-like", ["-b", "tpcb-like@1"], 1))

    def use_script(self, name: str, path: Path) -> None:
        """Runs this file in place of every script, under the name given (a crash test's ledger script
        in place of the built-in it equals)."""
        self.scripts = [(name, ["-f", f"{path}@1"], 1)]

    def user_files(self) -> list[tuple[str, Path]]:
        return [(option, Path(_weighted(str(path), "-f")[0]) if option == "file" else path)
                for option, path in super().user_files()]

    @property
    def seconds(self) -> int | None:
        return self.p["time"]

    def footprint(self, cache_state: str = "cold") -> Footprint:
        scale = self.p["scale"] if self.p["init"] else 0
        objects = ({"pgbench_accounts": ACCOUNT_BYTES_PER_SCALE * scale,
                    "pgbench_accounts_pkey": INDEX_BYTES_PER_SCALE * scale} if scale else {})
        size = restore.dump_bytes(self.p["restore"])
        if size:
            objects["the restored database"] = 2 * size
        # each transaction of tpcb-like logs about 500 bytes (an update of three rows and an insert)
        txns = (self.p["transactions"] or 0) * self.p["client"] or 20_000 * (self.seconds or 0)
        return Footprint(objects, wal=2 * sum(objects.values()) + 500 * txns, scratch=64 * txns + size,
                         connections=self.p["client"], connections_option="client")

    def load_identity(self) -> dict | None:
        """pgbench -i's tables at their scale, or the dump and setup files; all vacuumed."""
        base = super().load_identity() or ({"workload": self.name} if self.p["init"] else None)
        return {**base, "init_scale": self.p["scale"] if self.p["init"] else None, "vacuum": True} if base else None

    def prepare(self, db, progress) -> None:
        if self.p["init"]:
            progress.phase(f"pgbench -i -s {self.p['scale']}")
            proc = db.client("pgbench", "-i", "-q", "-s", str(self.p["scale"]), db.database, as_me=True).run()
            if proc.returncode != 0:
                raise UserError(f"pgbench -i failed: {_last_line(proc.stderr)}")
        self.restored = restore.load_user_setup(self, db, self.p["restore"], self.p["restore_jobs"],
                                                self.p["setup"], progress)

    def phases(self, cache_state: str = "cold") -> list[Phase]:
        return [Phase("pgbench", self._run)]

    def _args(self, prefix: Path) -> list[str]:
        p = self.p
        args = ["-n", "-c", str(p["client"]), "-j", str(p["jobs"]), "-M", p["protocol"], "-l",
                f"--log-prefix={prefix}", "-P", "1"]
        args += ["-T", str(p["time"])] if p["time"] is not None else ["-t", str(p["transactions"])]
        if p["rate"] is not None:
            args += ["-R", f"{p['rate']:g}"]
        if p["latency_limit"] is not None:
            args += ["--latency-limit", f"{p['latency_limit']:g}"]
        for _name, script, _weight in self.scripts:
            args += script
        return args

    def _run(self, db, progress) -> dict:
        prefix = db.client_dir("pgbench") / f"log{time.monotonic_ns()}"  # pgbench runs as us: our folder
        args = self._args(prefix)
        progress.phase(f"pgbench {' '.join(args[:-2])}", total=self.seconds)
        t0 = time.monotonic()
        proc = db.client("pgbench", *args, db.database, as_me=True).popen(stdout=subprocess.PIPE,
                                                                          stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate()
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
        elapsed = time.monotonic() - t0
        if proc.returncode != 0:
            pgbench_log.read(prefix)  # its partial logs go
            script_error = self._script_error(err)
            if script_error:
                raise UserError(script_error)
            raise WorkloadError(f"pgbench failed ({proc.returncode}): {_first_error(err)}")
        logs = pgbench_log.read(prefix)
        pgbench_log.note_transactions(db, logs, [name for name, _args, _weight in self.scripts])
        scripts = {}
        for i, (name, _args, weight) in enumerate(self.scripts):
            log = logs.get(i, pgbench_log.ScriptLog())
            if self.p["latency_limit"] is not None:
                log.late = sum(1 for v in log.latency_ms if v > self.p["latency_limit"])
            scripts[name] = {"weight": weight, **pgbench_log.summary(log), "late": log.late}
        m = _TPS.search(out)
        done = sum(s["count"] for s in scripts.values())
        return {"tps": float(m.group("tps")) if m else done / elapsed, "transactions": done,
                "skipped": sum(s["skipped"] for s in scripts.values()),
                "failed": sum(s["failed"] for s in scripts.values()), "scripts": scripts,
                "transactions_per_s": pgbench_log.per_second([e for log in logs.values() for e in log.ends_us]),
                "pgbench": {"args": args, "output": out.strip().splitlines()}}


    def _script_error(self, stderr: str) -> str | None:
        """A script's mistake, as FILE:LINE: message. pgbench names the line of a script it cannot parse,
        and only the script's number and the command's for one that fails as it runs: the line is found
        by splitting the script as pgbench does (each SQL statement and each backslash command one)."""
        for line in stderr.splitlines():
            m = _PARSE_ERROR.match(line.strip())
            if m:
                return f"-f {m.group('file')}:{m.group('line')}: {m.group('msg')}"
            m = _ABORTED.search(line)
            if not m or int(m.group("script")) >= len(self.scripts):
                continue
            name, args, _weight = self.scripts[int(m.group("script"))]
            if args[0] != "-f":
                return f"-b {name}: {m.group('msg')}"
            path = args[1].rsplit("@", 1)[0]
            try:
                commands = sqlfile.split(sqlfile.read_text(Path(path), "-f"), path, meta_commands=True)
                where = f"{path}:{commands[int(m.group('command'))][0]}"
            except (UserError, IndexError):
                where = f"{path}, command {int(m.group('command')) + 1}"
            return f"-f {where}: {m.group('msg')}"
        return None

    def rates(self, metrics: dict, elapsed_s: float, phase: str = "run", measured: dict | None = None) -> dict:
        return {"tps": metrics["tps"]}  # each script's latency percentiles: metrics["scripts"]


_PARSE_ERROR = re.compile(r"^pgbench: error: (?P<file>/.+?):(?P<line>\d+): (?P<msg>.+)$")
_ABORTED = re.compile(r"script (?P<script>\d+) aborted in command (?P<command>\d+) query \d+: "
                      r"(?:ERROR|FATAL):\s+(?P<msg>.*)$")


def _first_error(text: str) -> str:
    errors = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("pgbench: error:")]
    return errors[0] if errors else _last_line(text)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"
