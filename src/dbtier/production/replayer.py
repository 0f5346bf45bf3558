"""A captured workload (production/capture.py) sent again to a server, session by session, as its
clients sent it. A library: it takes a capture and a connection string, and knows no command line.

    drawn = draw_parameters(conn, capture)          # a statistics capture: values from the database
    plan = build_plan(capture, drawn)               # the schedule, in arrays
    outcome = replay(plan, conninfo, Settings(mode="rate", speed=1.0))
    metrics = summarize(plan, outcome, capture)     # per class, and the replay's faithfulness

One connection per recorded session, opened at the session's start and closed at its end (times
from the replay's start, divided by the speed), each session's statements in its own order:

- mode "rate": each session keeps its own pacing. A statement starts at its recorded offset, or
  straight after the session's previous one returns if that is later (the think time is kept, a slow
  statement is not made up for).
- mode "order": as rate, and also the global order of statement starts across sessions: a
  statement waits until every statement that started before it in production (in any session) has
  at least started here. What this does to lock waits: a statement queued behind another session's
  statement that is itself waiting on a lock waits with it, so a lock wait that production never
  saw can hold every session (the holder's COMMIT is queued behind the waiter). The watchdog below
  reports and ends such a stall.
- speed F scales every time by 1/F; speed None ("max") drops the schedule: every session opens at
  the start and sends each statement as soon as its previous one returned (no think time).

Statements go out as production's client sent them: `simple` by the simple query protocol, `execute`
by the extended protocol with their logged values as text, every parameter's type left to the
server (OID 0: from the catalog, as for an untyped literal). A named statement is prepared once per
session (again only if the log shows the name given to another text).

Concurrency: one thread drives every session through libpq's asynchronous calls (send, then read
when the socket is readable, selectors/epoll), so no session waits on another's client work and no
GIL is fought over; that reaches several thousand statements a second per process.

A watchdog thread looks every interval for statements in flight longer than `stall_timeout_s`; for
those it asks the server (pg_stat_activity, pg_blocking_pids, on a connection it opens only then)
whether they wait on another session's lock. One that does is reported with the statements involved
and cancelled (pg_cancel_backend), and counted as a stall, never a silent hang. PostgreSQL ends a true deadlock itself (deadlock_timeout), as an error.

Interrupted (KeyboardInterrupt), every statement in flight is cancelled and every connection closed
before the exception goes on."""

from __future__ import annotations

import heapq
import selectors
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from psycopg import pq
from psycopg.conninfo import make_conninfo

from dbtier.errors import UserError

MODES = ("rate", "order")
#: how many failures a summary lists
FIRST_FAILURES = 5
#: a statement started later than this after its scheduled time counts as late
LATE_S = 0.010
#: the statement's text kept in a stall's or failure's report
SHOWN_CHARS = 160
_CANCELLED = "57014"

_OPEN, _SEND, _CLOSE = 0, 1, 2


class ReplayStopped(Exception):
    """The replay stopped itself: too many new failures, or a session could not connect."""


@dataclass(frozen=True)
class Settings:
    mode: str = "rate"
    speed: float | None = 1.0        # None: as fast as the server answers, no think time
    max_errors: int | None = None    # new failures that stop the replay (None: never)
    stall_timeout_s: float = 60.0    # a lock wait this long is reported and cancelled
    watch_interval_s: float | None = None  # the watchdog's look; default: a quarter of the stall timeout, at most 1 s

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r}: one of {', '.join(MODES)}")
        if self.speed is not None and not (self.speed > 0 and np.isfinite(self.speed)):
            raise ValueError(f"speed {self.speed!r}: a number above 0, or None for as fast as possible")
        if not self.stall_timeout_s > 0:
            raise ValueError("stall_timeout_s must be above 0")


@dataclass
class Plan:
    """The capture as arrays the replay indexes by statement number (0..n-1, each session's in order)."""
    session_start_s: list[float]
    session_end_s: list[float | None]
    first: list[int]                   # each session's first statement
    stop: list[int]                    # one past its last
    start_s: np.ndarray                # each statement's recorded start
    execute: list[bool]
    name: list[bytes | None]
    text: list[bytes]
    params: list[list[bytes | None] | None]
    class_id: np.ndarray
    expected_error: list[str | None]   # the SQLSTATE production answered
    rank: np.ndarray                   # its place in the global order of starts
    duration_s: np.ndarray | None = None  # how long production took; nan where its log did not say
    application: list[str | None] = field(default_factory=list)  # each session's application_name

    @property
    def statements(self) -> int:
        return len(self.text)

    @property
    def sessions(self) -> int:
        return len(self.first)


@dataclass
class Outcome:
    elapsed_s: float
    started: np.ndarray                # seconds from the replay's start; nan: not sent
    finished: np.ndarray
    lag_s: np.ndarray                  # started minus scheduled; nan at speed max
    # started minus when it could have been: its schedule, the session's previous answer read (or its
    # connection made) and, in order mode, the statements before it started: the replayer's own delay
    held_s: np.ndarray
    error_state: list[str | None]
    error_message: list[str | None]
    stalled: set[int] = field(default_factory=set)        # statements the watchdog cancelled
    stalls: list[dict] = field(default_factory=list)      # what each stall involved
    prepares: list[int] = field(default_factory=list)     # prepare messages sent, per session
    settings: Settings | None = None
    backend_pid: np.ndarray | None = None  # the server process each statement ran on (0: not sent)
    t0_epoch_s: float = 0.0                # the replay's start on the epoch's clock


# -- the plan --------------------------------------------------------------------------------------


def _sources(capture) -> list[str]:
    col = capture.statements["param_sources"]
    seen: dict[str, None] = {}
    for row in col.to_pylist():
        for src in row or ():
            if src is not None:
                seen.setdefault(src, None)
    return list(seen)


def draw_parameters(conn, capture, seed: int = 1, per_source: int = 10_000) -> dict[str, list[str]]:
    """For a statistics capture: each parameter source's `[schema.]table.column`, a seeded sample of
    its non-null values (as text) in the connected database. A source it lacks: a UserError naming it."""
    from psycopg import sql

    out: dict[str, list[str]] = {}
    for src in _sources(capture):
        table, dot, column = src.rpartition(".")
        if not dot or not table or not column:
            raise UserError(f"{capture.path}: statements.parquet: parameter source {src!r} is not TABLE.COLUMN; "
                            "import the workload again")
        found = conn.execute("SELECT to_regclass(%s)::text, (SELECT count(*) FROM pg_attribute WHERE attrelid = "
                             "to_regclass(%s) AND attname = %s AND attnum > 0 AND NOT attisdropped), "
                             "(SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s))",
                             (table, table, column, table)).fetchone()
        if found[0] is None:
            raise UserError(f"{capture.path}: parameters are drawn from {src}, but the database has no table "
                            f"{table}: restore the database the capture was made of")
        if not found[1]:
            raise UserError(f"{capture.path}: parameters are drawn from {src}, but table {table} has no column "
                            f"{column}: restore the database the capture was made of")
        rows = max(float(found[2] or 0), 0.0)
        # a Bernoulli sample (REPEATABLE: the same rows for the same seed), a few times what is needed
        pct = min(100.0, 100.0 * 4 * per_source / rows) if rows > 4 * per_source else 100.0
        query = sql.SQL("SELECT {c}::text FROM {t} TABLESAMPLE BERNOULLI (%s) REPEATABLE (%s) "
                        "WHERE {c} IS NOT NULL LIMIT %s").format(c=sql.Identifier(column), t=sql.SQL(found[0]))
        values = [r[0] for r in conn.execute(query, (pct, seed, 4 * per_source)).fetchall()]
        if not values:
            raise UserError(f"{capture.path}: parameters are drawn from {src}, which holds no values: restore the "
                            "database the capture was made of")
        out[src] = values
    return out


def build_plan(capture, drawn: dict[str, list[str]] | None = None, seed: int = 1) -> Plan:
    """The schedule of a (checked) capture; a statistics capture's parameters from `drawn`
    (draw_parameters), each statement's picked by a generator seeded with `seed`."""
    st, ss = capture.statements, capture.sessions
    n = st.num_rows
    sess = st["session"].to_numpy().astype(np.int64) if n else np.zeros(0, np.int64)
    nsess = ss.num_rows
    counts = np.bincount(sess, minlength=nsess) if n else np.zeros(nsess, np.int64)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if nsess else np.zeros(0, np.int64)
    start = st["start_s"].to_numpy().astype(float) if n else np.zeros(0)
    # each session's starts made non-decreasing (a log's rounding), so the global order never puts a
    # session's later statement before its earlier one
    eff = start.copy()
    for s in range(nsess):
        a, b = first[s], first[s] + counts[s]
        if b > a:
            eff[a:b] = np.maximum.accumulate(eff[a:b])
    order = np.lexsort((np.arange(n), eff))
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    kinds = st["kind"].to_pylist()
    params = st["params"].to_pylist()
    sources = st["param_sources"].to_pylist()
    rng = np.random.default_rng(seed)
    values: list[list[bytes | None] | None] = []
    for p, src in zip(params, sources):
        if p is not None:
            values.append([None if v is None else v.encode() for v in p])
        elif src:
            if drawn is None:
                raise ValueError("a statistics capture needs drawn parameters (draw_parameters)")
            values.append([drawn[s][int(rng.integers(len(drawn[s])))].encode() for s in src])
        else:
            values.append(None)
    names = st["name"].to_pylist()
    ends = ss["end_s"].to_pylist()
    return Plan(session_start_s=[float(x) for x in ss["start_s"].to_pylist()],
                session_end_s=[None if e is None else float(e) for e in ends],
                first=[int(x) for x in first], stop=[int(a + c) for a, c in zip(first, counts)],
                start_s=eff, execute=[k == "execute" for k in kinds],
                name=[None if x is None else x.encode() for x in names],
                text=[t.encode() for t in st["text"].to_pylist()], params=values,
                class_id=st["class_id"].to_numpy().astype(np.int64) if n else np.zeros(0, np.int64),
                expected_error=st["error_state"].to_pylist(), rank=rank,
                application=ss["application"].to_pylist(),
                duration_s=st["duration_s"].to_numpy(zero_copy_only=False).astype(float) if n else np.zeros(0))


# -- the watchdog ----------------------------------------------------------------------------------


class _Watchdog(threading.Thread):
    """Looks, every interval, for statements in flight longer than the stall timeout (on the replay's
    own clock: no server connection is needed for that); only when there are some does it connect and
    ask the server which of them wait on another's lock (pg_blocking_pids). Each such is reported with
    its blockers' statements and cancelled. The connection is closed again once no statement is that
    long, so a replay without long waits adds no session to the server (nor to the trace a prediction
    reads)."""

    def __init__(self, conninfo: str, replay: "_Replay", timeout_s: float, interval_s: float):
        super().__init__(name="replay-watchdog", daemon=True)
        self.conninfo, self.replay = conninfo, replay
        self.timeout_s, self.interval_s = timeout_s, interval_s
        self.halt = threading.Event()
        self.failure: BaseException | None = None

    def _long(self) -> dict[int, int]:
        """backend pid -> statement, for the statements in flight longer than the stall timeout."""
        rp = self.replay
        now = time.monotonic() - rp.t0
        return {pid: k for pid, k in list(rp.busy.items()) if now - rp.out.started[k] >= self.timeout_s}

    def run(self) -> None:
        import psycopg

        conn = None
        try:
            while not self.halt.wait(self.interval_s):
                long = self._long()
                if not long:
                    if conn is not None:
                        conn.close()
                        conn = None
                    continue
                if conn is None:
                    conn = psycopg.connect(self.conninfo, autocommit=True, application_name="dbtier replay watchdog")
                rows = conn.execute(
                    "SELECT pid, pg_blocking_pids(pid), query_start FROM pg_stat_activity "
                    "WHERE pid = ANY(%s) AND wait_event_type = 'Lock'", (list(long),)).fetchall()
                for pid, blockers, query_start in rows:
                    if blockers and self.replay.busy.get(pid) == long[pid]:
                        self._stall(conn, pid, long[pid], blockers, query_start)
        except BaseException as exc:  # reported by the replay, which stops
            self.failure = exc
        finally:
            if conn is not None:
                conn.close()

    def _stall(self, conn, pid: int, k: int, blockers: list[int], query_start) -> None:
        rp = self.replay
        holders = conn.execute("SELECT pid, state, left(query, %s) FROM pg_stat_activity WHERE pid = ANY(%s)",
                               (SHOWN_CHARS, blockers)).fetchall()
        rp.out.stalled.add(k)
        waited_s = time.monotonic() - rp.t0 - rp.out.started[k]
        cancelled = conn.execute(
            "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE pid = %s AND query_start = %s "
            "AND wait_event_type = 'Lock'", (pid, query_start)).fetchall()
        if not cancelled:
            rp.out.stalled.discard(k)  # it got its lock meanwhile
            return
        plan = rp.plan
        session = int(np.searchsorted(plan.first, k, side="right") - 1)
        rp.out.stalls.append({
            "session": session, "seq": k - plan.first[session], "class_id": int(plan.class_id[k]),
            "statement": shown(plan.text[k]), "waited_s": round(float(waited_s), 3),
            "blocked_by": [{"session": rp.who.get(bpid), "pid": bpid, "state": state, "statement": shown(query)}
                           for bpid, state, query in holders]})


# -- the replay ------------------------------------------------------------------------------------


class _Session:
    __slots__ = ("i", "conn", "fd", "next", "stop", "prepared", "steps", "k", "mask", "copy_out", "error", "message",
                 "connected", "step", "since")

    def __init__(self, i: int, first: int, stop: int):
        self.i, self.next, self.stop = i, first, stop
        self.conn = None
        self.fd = -1
        self.prepared: dict[bytes, bytes] = {}
        self.steps: deque = deque()
        self.k = -1
        self.mask = 0
        self.copy_out = False
        self.error: str | None = None
        self.message: str | None = None
        self.connected = False
        self.step = ""
        self.since = 0.0  # when the session could send again: connected, answered, or let go in order mode


def shown(text, limit: int = SHOWN_CHARS) -> str:
    """A statement or message as a report shows it: one line (its whitespace runs, newlines among
    them, one space; other control characters dropped), at most `limit` characters."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    one = " ".join("".join(ch for ch in (text or "") if ch.isprintable() or ch.isspace()).split())
    return one if len(one) <= limit else one[:limit - 1] + "\u2026"


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[0] if lines else "no message"


class _Replay:
    def __init__(self, plan: Plan, conninfo: str, settings: Settings, progress):
        self.plan, self.conninfo, self.settings, self.progress = plan, conninfo.encode(), settings, progress
        n = plan.statements
        self.out = Outcome(elapsed_s=0.0, started=np.full(n, np.nan), finished=np.full(n, np.nan),
                           lag_s=np.full(n, np.nan), held_s=np.full(n, np.nan), error_state=[None] * n,
                           error_message=[None] * n,
                           prepares=[0] * plan.sessions, settings=settings,
                           backend_pid=np.zeros(n, np.int64))
        self.sel = selectors.DefaultSelector()
        self.heap: list = []
        self.tick = 0
        self.prefix = 0                 # order mode: every statement of lower rank has started
        self.parked: dict[int, _Session] = {}
        self.ready: deque = deque()
        self.t0 = time.monotonic()
        self.busy: dict[int, int] = {}  # backend pid -> statement in flight (for the watchdog)
        self.who: dict[int, int] = {}   # backend pid -> session
        self.sessions = [_Session(i, a, b) for i, (a, b) in enumerate(zip(plan.first, plan.stop))]
        self.live = 0
        self.done = 0
        self.new_failures = 0
        self.speed = settings.speed
        self.order = settings.mode == "order"

    # scheduling

    def _at(self, rel_s: float) -> float:
        return self.t0 + rel_s / self.speed if self.speed else self.t0

    def _push(self, when: float, what: int, sess: _Session) -> None:
        self.tick += 1
        heapq.heappush(self.heap, (when, self.tick, what, sess))

    def _next(self, sess: _Session, now: float) -> None:
        """After a session opened or a statement returned: its next statement, or its close."""
        if sess.next >= sess.stop:
            end = self.plan.session_end_s[sess.i]
            when = self._at(end) if (end is not None and self.speed) else now
            if when > now:
                self._push(when, _CLOSE, sess)
            else:
                self._close(sess)
            return
        when = self._at(self.plan.start_s[sess.next]) if self.speed else now
        if when > now:
            self._push(when, _SEND, sess)
        else:
            self._try(sess, now)

    def _try(self, sess: _Session, now: float) -> None:
        k = sess.next
        if self.order and self.plan.rank[k] != self.prefix:
            self.parked[int(self.plan.rank[k])] = sess
            return
        self._send(sess, k, now)

    # the protocol

    def _send(self, sess: _Session, k: int, now: float) -> None:
        plan, out = self.plan, self.out
        sess.next = k + 1
        sess.k = k
        sess.error = sess.message = None
        out.started[k] = now - self.t0
        out.backend_pid[k] = sess.conn.backend_pid
        if self.speed:
            out.lag_s[k] = now - self._at(plan.start_s[k])
        out.held_s[k] = max(0.0, now - max(self._at(plan.start_s[k]), sess.since))
        name = plan.name[k]
        if plan.execute[k] and name is not None:
            known = sess.prepared.get(name)
            if known != plan.text[k]:
                if known is not None:
                    sess.steps.append(("close", name))
                sess.steps.append(("prepare", name))
                sess.prepared[name] = plan.text[k]
                out.prepares[sess.i] += 1
            sess.steps.append(("exec_prepared", name))
        elif plan.execute[k]:
            sess.steps.append(("exec_params", None))
        else:
            sess.steps.append(("query", None))
        self.busy[sess.conn.backend_pid] = k
        self._step(sess)
        if self.order:
            self.prefix += 1
            waiting = self.parked.pop(self.prefix, None)
            if waiting is not None:
                waiting.since = now
                self.ready.append(waiting)

    def _step(self, sess: _Session) -> None:
        what, name = sess.steps.popleft()
        sess.step = what
        conn, k, plan = sess.conn, sess.k, self.plan
        try:
            if what == "query":
                conn.send_query(plan.text[k])
            elif what == "exec_params":
                conn.send_query_params(plan.text[k], plan.params[k] or ())
            elif what == "exec_prepared":
                conn.send_query_prepared(name, plan.params[k] or ())
            elif what == "prepare":
                conn.send_prepare(name, plan.text[k])
            else:
                conn.send_close_prepared(name)
            pending = conn.flush()
        except Exception as exc:  # the server closed the connection (terminated, or it stopped)
            raise ReplayStopped(f"session {sess.i} lost its connection: {_first_line(str(exc))}") from None
        if pending:
            self._watch(sess, selectors.EVENT_READ | selectors.EVENT_WRITE)

    def _watch(self, sess: _Session, mask: int) -> None:
        fd = sess.conn.socket
        if fd != sess.fd:
            if sess.fd >= 0:
                self.sel.unregister(sess.fd)
            self.sel.register(fd, mask, sess)
            sess.fd, sess.mask = fd, mask
        elif mask != sess.mask:
            self.sel.modify(fd, mask, sess)
            sess.mask = mask

    def _open(self, sess: _Session) -> None:
        app = self.plan.application[sess.i] if sess.i < len(self.plan.application) else None
        # as production's client named itself (pg_stat_activity shows it), within the server's 63 bytes
        info = make_conninfo(self.conninfo.decode(), application_name=(app or "")[:63]) if app else self.conninfo
        sess.conn = pq.PGconn.connect_start(info.encode() if isinstance(info, str) else info)
        if sess.conn.status == pq.ConnStatus.BAD:
            raise ReplayStopped(f"session {sess.i} could not connect: {_first_line(sess.conn.get_error_message())}")
        sess.conn.notice_handler = None  # nothing printed of the server's notices
        self.live += 1
        self._watch(sess, selectors.EVENT_WRITE)

    def _connecting(self, sess: _Session, now: float) -> None:
        state = sess.conn.connect_poll()
        if state == pq.PollingStatus.OK:
            sess.conn.nonblocking = 1
            sess.connected = True
            sess.since = now
            self.who[sess.conn.backend_pid] = sess.i
            self._watch(sess, selectors.EVENT_READ)
            self._next(sess, now)
        elif state == pq.PollingStatus.READING:
            self._watch(sess, selectors.EVENT_READ)
        elif state == pq.PollingStatus.WRITING:
            self._watch(sess, selectors.EVENT_WRITE)
        else:
            raise ReplayStopped(f"session {sess.i} could not connect: {_first_line(sess.conn.get_error_message())}")

    def _close(self, sess: _Session) -> None:
        if sess.fd >= 0:
            self.sel.unregister(sess.fd)
            sess.fd = -1
        self.who.pop(sess.conn.backend_pid, None)
        sess.conn.finish()
        sess.conn = None
        self.live -= 1

    def _readable(self, sess: _Session, now: float) -> None:
        conn = sess.conn
        try:
            conn.consume_input()
        except Exception as exc:
            raise ReplayStopped(f"session {sess.i} lost its connection: {_first_line(str(exc))}") from None
        while True:
            if sess.copy_out:
                n, _data = conn.get_copy_data(1)
                if n == 0:
                    return
                if n == -1:
                    sess.copy_out = False
                continue
            if conn.is_busy():
                return
            res = conn.get_result()
            if res is None:
                if sess.steps:
                    self._step(sess)
                    continue
                self._finished(sess, time.monotonic())
                return
            status = res.status
            if status == pq.ExecStatus.FATAL_ERROR and sess.error is None:
                state = res.error_field(pq.DiagnosticField.SQLSTATE)
                sess.error = state.decode() if state else "XX000"
                sess.message = _first_line(res.error_message.decode(errors="replace"))
                sess.steps.clear()  # a failed prepare: its execute is not sent
                if sess.step == "prepare":  # nothing was prepared: the name's next use prepares again
                    sess.prepared.pop(self.plan.name[sess.k], None)
            elif status == pq.ExecStatus.COPY_IN:
                conn.put_copy_end(b"COPY FROM STDIN is not replayed")
                conn.flush()
            elif status == pq.ExecStatus.COPY_OUT:
                sess.copy_out = True

    def _finished(self, sess: _Session, now: float) -> None:
        k, out = sess.k, self.out
        out.finished[k] = now - self.t0
        sess.since = now
        self.busy.pop(sess.conn.backend_pid, None)
        if sess.error is not None:
            out.error_state[k], out.error_message[k] = sess.error, sess.message
            if self.plan.expected_error[k] is None and not (sess.error == _CANCELLED and k in out.stalled):
                self.new_failures += 1
                limit = self.settings.max_errors
                if limit is not None and self.new_failures >= limit:
                    raise ReplayStopped(f"{self.new_failures} statements failed that had not failed in production "
                                        f"(the last: session {sess.i}, {sess.message})")
        sess.k = -1
        self.done += 1
        if self.progress is not None and self.done % 256 == 0:
            self.progress(self.done)
        self._next(sess, now)

    # the loop

    def run(self) -> Outcome:
        plan, settings = self.plan, self.settings
        interval = settings.watch_interval_s or min(1.0, settings.stall_timeout_s / 4)
        watchdog = _Watchdog(self.conninfo.decode(), self, settings.stall_timeout_s, interval)
        self.t0 = time.monotonic()
        self.out.t0_epoch_s = time.time() - (time.monotonic() - self.t0)
        for sess in self.sessions:
            when = self._at(plan.session_start_s[sess.i]) if self.speed else self.t0
            self._push(when, _OPEN, sess)
        watchdog.start()
        try:
            self._loop(watchdog)
        finally:
            watchdog.halt.set()
            self._abandon()
            watchdog.join(timeout=10)
        self.out.elapsed_s = time.monotonic() - self.t0
        if self.progress is not None:
            self.progress(self.done)
        return self.out

    def _loop(self, watchdog: _Watchdog) -> None:
        heap, sel = self.heap, self.sel
        while heap or self.live:
            now = time.monotonic()
            while heap and heap[0][0] <= now:
                _when, _tick, what, sess = heapq.heappop(heap)
                if what == _SEND:
                    self._try(sess, now)
                elif what == _OPEN:
                    self._open(sess)
                else:
                    self._close(sess)
            while self.ready:
                self._try(self.ready.popleft(), time.monotonic())
            if watchdog.failure is not None:
                raise ReplayStopped(f"the replay's watchdog failed: {_first_line(str(watchdog.failure))}")
            if not heap and not self.live:  # the last session closed on its timer: nothing to wait for
                break
            timeout = min(max(heap[0][0] - time.monotonic(), 0.0), 0.5) if heap else 0.5
            for key, mask in sel.select(timeout):
                sess = key.data
                now = time.monotonic()
                if sess.conn is None:
                    continue
                if not sess.connected:
                    self._connecting(sess, now)
                    continue
                if mask & selectors.EVENT_WRITE and sess.conn.flush() == 0:
                    self._watch(sess, selectors.EVENT_READ)
                if mask & selectors.EVENT_READ:
                    self._readable(sess, now)

    def _abandon(self) -> None:
        """Cancels what is in flight and closes every connection (after the end, a failure or Ctrl-C)."""
        for sess in self.sessions:
            if sess.conn is None:
                continue
            try:
                if sess.k >= 0:
                    cancel = sess.conn.get_cancel()
                    cancel.cancel()
            except Exception:
                pass
            try:
                if sess.fd >= 0:
                    self.sel.unregister(sess.fd)
            except (KeyError, ValueError):
                pass
            sess.conn.finish()
            sess.conn = None
        self.sel.close()


def replay(plan: Plan, conninfo: str, settings: Settings = Settings(), progress=None) -> Outcome:
    """Replays the plan on the server `conninfo` names (every session as its user, to its database).
    progress(n): called now and then with the statements done so far. Raises ReplayStopped when it
    stops itself (settings.max_errors new failures; a session that cannot connect)."""
    return _Replay(plan, conninfo, settings, progress).run()


# -- what it did -----------------------------------------------------------------------------------


def _ms(values: np.ndarray, q: float | None = None) -> float | None:
    if not len(values):
        return None
    return float(1e3 * (np.mean(values) if q is None else np.percentile(values, q)))


def _latest(plan: Plan, outcome: Outcome, latency: np.ndarray) -> dict | None:
    """The statement that started latest against its schedule, and why: a session's statement waits
    for its previous one's answer, so its lag is what the statements since its session was last on
    time took here beyond what they took in production, less the think time between them. Those
    statements, and the one of them that took most longer, are named (a DBA's first question: which
    statement ran slower in the lab). In order mode the statements of other sessions before it in the
    global order may have held it too; those are not named. None at speed max, or when none was late."""
    if not len(outcome.lag_s) or np.all(np.isnan(outcome.lag_s)):
        return None
    k = int(np.nanargmax(outcome.lag_s))
    if not outcome.lag_s[k] > LATE_S:
        return None
    session = int(np.searchsorted(plan.first, k, side="right") - 1)
    a = plan.first[session]
    j = k  # the first of the statements before k that ran while the session was late
    while j > a and outcome.lag_s[j - 1] > LATE_S:
        j -= 1
    if j > a:
        j -= 1  # the last one on time: its run may be what made the next one late
    took = latency[j:k]
    prod = plan.duration_s[j:k] if plan.duration_s is not None else np.full(k - j, np.nan)
    excess = took - prod
    out = {"session": session, "seq": int(k - a), "class_id": int(plan.class_id[k]),
           "lag_ms": float(1e3 * outcome.lag_s[k]), "statement": shown(plan.text[k]),
           "since_seq": int(j - a), "before": int(k - j),
           "took_s": float(np.nansum(took)), "production_s": None if np.all(np.isnan(prod)) else float(np.nansum(prod))}
    if k > j and not np.all(np.isnan(excess)):
        m = j + int(np.nanargmax(excess))
        out["slowest"] = {"seq": int(m - a), "class_id": int(plan.class_id[m]), "ms": float(1e3 * latency[m]),
                          "production_ms": float(1e3 * plan.duration_s[m]), "statement": shown(plan.text[m])}
    return out


def summarize(plan: Plan, outcome: Outcome, capture) -> dict:
    """The replay's figures: per statement class (count, errors, mean and p50/p95/p99 latency, slowest
    first) and its faithfulness (lag against the schedule, failures production did not have, stalls,
    what was not replayed)."""
    latency = outcome.finished - outcome.started
    failed = np.array([e is not None for e in outcome.error_state], bool)
    expected = np.array([e is not None for e in plan.expected_error], bool)
    stalled = np.zeros(plan.statements, bool)
    stalled[list(outcome.stalled)] = True
    stalled &= failed
    new = failed & ~expected & ~stalled
    normalized = dict(zip(capture.classes["class_id"].to_pylist(), capture.classes["normalized"].to_pylist()))
    prod_mean = dict(zip(capture.classes["class_id"].to_pylist(), capture.classes["mean_s"].to_pylist()))
    classes = []
    ids, inverse = np.unique(plan.class_id, return_inverse=True)
    for j, cid in enumerate(ids):
        mask = inverse == j
        lat = latency[mask]
        lat = lat[~np.isnan(lat)]
        pm = prod_mean.get(int(cid))
        classes.append({"class_id": int(cid), "normalized": shown(normalized.get(int(cid), ""), 4096), "count": int(mask.sum()),
                        "errors": int(failed[mask].sum()), "new_errors": int(new[mask].sum()),
                        "mean_ms": _ms(lat), "p50_ms": _ms(lat, 50), "p95_ms": _ms(lat, 95), "p99_ms": _ms(lat, 99),
                        "production_mean_ms": None if pm is None else 1e3 * pm})
    classes.sort(key=lambda c: -(c["mean_ms"] or 0.0))
    lag = outcome.lag_s[~np.isnan(outcome.lag_s)]
    lag = np.maximum(lag, 0.0)
    held = outcome.held_s[~np.isnan(outcome.held_s)]
    firsts = []
    for k in np.flatnonzero(new)[:FIRST_FAILURES]:
        session = int(np.searchsorted(plan.first, k, side="right") - 1)
        firsts.append({"class_id": int(plan.class_id[k]), "session": session, "seq": int(k - plan.first[session]),
                       "sqlstate": outcome.error_state[k], "message": shown(outcome.error_message[k], 4096),
                       "statement": shown(plan.text[k])})
    settings = outcome.settings or Settings()
    counts = capture.counts
    latest = _latest(plan, outcome, latency)
    return {
        "statements": plan.statements, "sessions": plan.sessions,
        "statements_per_s": plan.statements / outcome.elapsed_s if outcome.elapsed_s else 0.0,
        "classes": classes,
        "replay": {
            "mode": settings.mode, "speed": "max" if settings.speed is None else settings.speed,
            "synthetic": capture.synthetic, "production_span_s": capture.span_s, "elapsed_s": outcome.elapsed_s,
            "lag_p50_ms": _ms(lag, 50), "lag_p99_ms": _ms(lag, 99),
            "lag_max_ms": float(1e3 * lag.max()) if len(lag) else None,
            "late_statements": int((lag > LATE_S).sum()), "late_threshold_ms": 1e3 * LATE_S,
            **({"latest": latest} if latest else {}),
            "held_p50_ms": _ms(held, 50), "held_p99_ms": _ms(held, 99),
            "held_max_ms": float(1e3 * held.max()) if len(held) else None,
            "failures": int(failed.sum()), "expected_failures": int((failed & expected).sum()),
            "new_failures": int(new.sum()), "unexpected_successes": int((~failed & expected).sum()),
            "first_new_failures": firsts,
            "stalled_statements": int(stalled.sum()),
            "stalled_sessions": len({s["session"] for s in outcome.stalls}),
            "stalls": outcome.stalls[:FIRST_FAILURES],
            "prepares": int(sum(outcome.prepares)),
            "not_replayed": {"copy_from_stdin": int(counts.get("copy_from_stdin", 0)),
                             "fastpath": int(counts.get("fastpath", 0))},
        },
    }
