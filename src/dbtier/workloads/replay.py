"""`dbtier run replay WORKLOAD_DIR`: a captured production workload (what `dbtier workload import`
wrote) replayed on the virtual devices.

Setup as `run sql` has it (--restore DUMP, then each --setup FILE, the emulation paused; a
statistics capture's parameter values drawn from the restored tables then); the objects placed, the
server restarted cold, and the measured phase is the replay (production/replayer.py): one
connection per recorded session, each session's statements in order, paced as --mode and --speed
say. Beside everything a run reports: per statement class its count, errors and latency
percentiles, and the replay's faithfulness (lag against the schedule, failures production did not
have, stalls, what the capture could not replay)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from dbtier.errors import UserError
from dbtier.production import capture as capture_mod
from dbtier.production import replayer
from dbtier.workloads import restore, sqlfile
from dbtier.workloads.base import Footprint, Param, Phase


def parse_speed(text) -> float | None:
    """--speed: a factor above 0 (0.5 is half as fast as production, 4 four times), or max (None)."""
    if str(text).strip().lower() == "max":
        return None
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = float("nan")
    if not (math.isfinite(value) and 0 < value <= 1e6):
        raise UserError(f"--speed {text}: give a factor above 0 (0.5 replays at half production's pace, 4 at four "
                        "times) or max (no think time)")
    return value


def _note_statements(db, plan, outcome) -> None:
    """Each statement that completed, kept as a transaction of its class ('class 12') on the server
    process it ran on: predictions carry its latency through a replay (a p99 per class)."""
    done = ~np.isnan(outcome.finished) & (outcome.backend_pid > 0)
    done &= np.array([e is None for e in outcome.error_state], bool)
    for cid in np.unique(plan.class_id[done]):
        k = np.flatnonzero(done & (plan.class_id == cid))
        db.note_transactions(f"class {int(cid)}", outcome.backend_pid[k], (outcome.t0_epoch_s + outcome.finished[k]) * 1e6,
                             (outcome.finished[k] - outcome.started[k]) * 1e3, on_backend=True)


def peak_sessions(capture) -> int:
    """The most sessions open at once in the capture (a session without an end stays open)."""
    starts = capture.sessions["start_s"].to_numpy()
    if not len(starts):
        return 0
    ends = capture.sessions["end_s"].to_numpy(zero_copy_only=False).astype(float)
    ends = np.where(np.isnan(ends), np.inf, ends)
    times = np.concatenate([starts, ends])
    steps = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])
    order = np.lexsort((steps, times))  # at a tie, a close before an open
    return int(np.max(np.cumsum(steps[order])))


class Replay(restore.UserWorkload):
    name = "replay"
    seed = "-"
    summary = "a captured production workload (dbtier workload import), replayed session by session"
    description = (
        "WORKLOAD_DIR is what 'dbtier workload import' wrote from production's log (or its pg_stat_statements). "
        "The database comes from --restore DUMP (a dump taken when the capture began) and/or --setup FILE, "
        "loaded with the emulation paused; then objects are placed as --place says, the server restarts with "
        "empty caches, and the replay is measured: one connection per recorded session, opened and closed when "
        "the log says, each session's statements in its order, prepared statements prepared once per session and "
        "executed with their logged values. --mode rate keeps each session's own pacing (its think times); "
        "--mode order also keeps the global order of statement starts across sessions. --speed scales time; "
        "--speed max drops the think time. Statements that failed in production are expected to fail; new "
        "failures are counted and shown, and --max-errors stops a replay gone wrong. A statement running longer "
        "than --stall-timeout while it waits on another session's lock is reported with the statements involved "
        "and cancelled. Reported beside everything a "
        "run reports: per statement class its count, errors and latency (mean, p50, p95, p99), and the replay's "
        "faithfulness: lag against the schedule, new failures, stalled sessions, what was not replayed.")
    params = (
        Param("workload-dir", Path, None, "the captured workload's directory (dbtier workload import wrote it)",
              metavar="WORKLOAD_DIR", positional=True),
        Param("restore", Path, None, "a pg_dump file or folder (custom, directory, tar or plain) restored first, "
              "unmeasured: best one taken when the capture began", metavar="DUMP"),
        Param("setup", Path, (), "a SQL file run before the replay, unmeasured, as a psql script as you "
              "(repeatable, in order)", multiple=True, metavar="FILE"),
        Param("jobs", int, 1, "parallel jobs for --restore of a custom or directory dump", flags=("-j",), maximum=16),
        Param("mode", str, "rate", "rate: each session keeps its own pacing; order: also the global order of "
              "statement starts across sessions", choices=replayer.MODES),
        Param("speed", str, "1", "time's scale: 0.5 half production's pace, 4 four times; max: no think time",
              metavar="F|max"),
        Param("max-errors", int, None, "stop the replay once this many statements failed that had not failed in "
              "production (default: never)"),
        Param("stall-timeout", float, 60.0, "a statement that has run this many seconds and waits on another "
              "session's lock is reported, with the statements involved, and cancelled", minimum=None),
    )

    def __init__(self, **values):
        super().__init__(**values)
        if self.p["workload_dir"] is None:
            raise UserError("give the workload's directory: dbtier run replay WORKLOAD_DIR (dbtier workload import "
                            "makes one)")
        if self.p["restore"] is None and not self.p["setup"]:
            raise UserError("give --restore DUMP (a dump taken when the capture began) or --setup FILE: the database "
                            "the workload runs on")
        self.speed = parse_speed(self.p["speed"])
        stall = self.p["stall_timeout"]
        if not (math.isfinite(stall) and 0 < stall <= 86400):
            raise UserError(f"--stall-timeout {stall}: seconds above 0, at most 86400")
        for path in self.p["setup"]:
            sqlfile.read_text(path, "--setup")  # readable, UTF-8: found now, not after a restore
        if self.p["restore"] is not None:
            restore.dump_format(self.p["restore"])
        self.capture = capture_mod.read(self.p["workload_dir"])
        if not self.capture.statements.num_rows:
            raise UserError(f"{self.p['workload_dir']}: the capture holds no statements; import a log with some")
        self.plan: replayer.Plan | None = None if self.capture.synthetic else replayer.build_plan(self.capture)
        self.outcome: replayer.Outcome | None = None

    @property
    def settings(self) -> replayer.Settings:
        return replayer.Settings(mode=self.p["mode"], speed=self.speed, max_errors=self.p["max_errors"],
                                 stall_timeout_s=self.p["stall_timeout"])

    def footprint(self, cache_state: str = "cold") -> Footprint:
        """As run sql: a dump restores to about its own size in tables and as much in indexes, and its load
        writes as much WAL. The connections: the most sessions open at once (all of them at --speed max),
        and the watchdog's."""
        size = restore.dump_bytes(self.p["restore"])
        sessions = self.capture.sessions.num_rows if self.speed is None else peak_sessions(self.capture)
        return Footprint({"the restored database": 2 * size} if size else {}, wal=2 * size, scratch=size,
                         connections=sessions + 1)

    def prepare(self, db, progress) -> None:
        self.restored = restore.load_user_setup(self, db, self.p["restore"], self.p["jobs"], self.p["setup"],
                                                progress)
        if self.capture.synthetic:
            progress.phase("drawing the statements' parameters from the database")
            with db.connect() as conn:
                drawn = replayer.draw_parameters(conn, self.capture)
            self.plan = replayer.build_plan(self.capture, drawn)

    def phases(self, cache_state: str = "cold") -> list[Phase]:
        return [Phase("replay", self._run)]

    def _run(self, db, progress) -> dict:
        plan, settings = self.plan, self.settings
        with db.connect() as conn:
            conninfo = conn.info.dsn  # the lab's server as its own connections reach it
        speed = "max" if settings.speed is None else f"{settings.speed:g}x"
        progress.phase(f"replaying {plan.statements:,} statements of {plan.sessions:,} sessions ({settings.mode}, "
                       f"{speed})", total=plan.statements)
        done = [0]

        def advance(n: int) -> None:
            progress.advance(n - done[0])
            done[0] = n

        try:
            self.outcome = replayer.replay(plan, conninfo, settings, advance)
        except replayer.ReplayStopped as exc:
            limit = settings.max_errors
            raise UserError(f"{self.p['workload_dir']}: the replay stopped: {exc}"
                            + (f" (--max-errors {limit}); is the database the one the capture ran on?"
                               if limit is not None and "failed" in str(exc) else "")) from None
        _note_statements(db, plan, self.outcome)
        return replayer.summarize(plan, self.outcome, self.capture)

    def notes(self) -> list[str]:
        out = super().notes()
        if self.capture.synthetic:
            out.append("the workload is synthetic: built from pg_stat_statements' counts and means, its parameters "
                       "drawn from the database's own values, not production's")
        return out

    def rates(self, metrics: dict, elapsed_s: float, phase: str = "run", measured: dict | None = None) -> dict:
        return {"statements_per_s": metrics["statements"] / elapsed_s if elapsed_s else 0.0}
