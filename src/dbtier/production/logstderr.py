"""The stderr log destination: lines that begin with the server's log_line_prefix, then a severity
("LOG:  "), then the message; a message of several lines goes on in lines that begin with a tab, and
DETAIL:, STATEMENT:, HINT:, CONTEXT: lines belong to the message before them.

`Prefix` turns a log_line_prefix (its escapes %m %t %n %p %P %c %u %d %a %h %r %l %s %v %x %e %q %Q
%i %b %%, with or without padding such as %-10u) into a pattern for the start of a line, and says in
words what was expected where a line departs from it. When the prefix is not given, `guess` tries the
one docs/production.md recommends and PostgreSQL's default '%m [%p] ' on the file's first lines."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from dbtier.errors import UserError
from dbtier.production.logread import Clock, Entry, Unreadable, open_text, read_failure, _READ_ERRORS
from dbtier.production.logsettings import CAPTURE

#: PostgreSQL's own default
DEFAULT_PREFIX = "%m [%p] "
#: the one docs/production.md asks for (logsettings.CAPTURE), without its quotes
RECOMMENDED_PREFIX = CAPTURE["log_line_prefix"][0].strip("'")

_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
#: escape -> (group name or None, pattern, what a reader is told was expected there)
ESCAPES = {
    "m": ("time", _TIME + r"\.\d{3} \S+", "a time with milliseconds such as 2026-01-31 12:00:00.000 UTC (%m)"),
    "t": ("time", _TIME + r" \S+", "a time such as 2026-01-31 12:00:00 UTC (%t)"),
    "n": ("time", r"\d+\.\d{3}", "a time in seconds since 1970 such as 1769860800.000 (%n)"),
    "p": ("pid", r"\d+", "a process id (%p)"),
    "P": (None, r"\d*", "a parallel leader's process id (%P)"),
    "c": ("session", r"[0-9a-f]+\.[0-9a-f]+", "a session id such as 6b08998c.1930 (%c)"),
    "l": (None, r"\d+", "the session's line number (%l)"),
    "s": (None, _TIME + r" \S+", "the session's start time (%s)"),
    "v": (None, r"[-\d/]*", "a virtual transaction id (%v)"),
    "x": (None, r"\d*", "a transaction id (%x)"),
    "e": ("state", r"[0-9A-Z]{5}", "a SQLSTATE such as 00000 (%e)"),
    "Q": (None, r"-?\d*", "a query id (%Q)"),
    "u": ("user", r".*?", "a user name (%u)"),
    "d": ("database", r".*?", "a database name (%d)"),
    "a": ("application", r".*?", "an application name (%a)"),
    "r": ("client", r"\S*", "a client host and port (%r)"),
    "h": ("host", r"\S*", "a client host (%h)"),
    "i": (None, r".*?", "a command tag (%i)"),
    "b": (None, r".*?", "a backend type (%b)"),
}
_SEVERITY = r"(?P<severity>[A-Z]+[0-9]?):  "
SECONDARY = {"DETAIL": "detail", "STATEMENT": "statement", "HINT": None, "CONTEXT": None, "QUERY": None,
             "LOCATION": None}
_ESCAPE = re.compile(r"%(-?\d+)?(.)")


class Prefix:
    def __init__(self, text: str):
        self.text = text
        self.parts: list[tuple[str, str]] = []   # (pattern, what) in order; %q marks where the rest is optional
        self.optional_from: int | None = None
        self.groups: set[str] = set()
        pos = 0
        for m in _ESCAPE.finditer(text):
            if m.start() > pos:
                literal = text[pos:m.start()]
                self.parts.append((re.escape(literal), repr(literal)))
            pos = m.end()
            padded, esc = m.group(1), m.group(2)
            if esc == "%":
                self.parts.append(("%", "'%'"))
            elif esc == "q":
                if self.optional_from is None:
                    self.optional_from = len(self.parts)
            elif esc in ESCAPES:
                group, pattern, what = ESCAPES[esc]
                if group and group not in self.groups:
                    self.groups.add(group)
                    pattern = f"(?P<{group}>{pattern})"
                else:
                    pattern = f"(?:{pattern})"
                if padded:  # padded to a width with spaces, on the left or the right
                    pattern = rf" *{pattern} *"
                self.parts.append((pattern, what))
            else:
                raise UserError(f"--prefix {text!r}: %{esc} is not a log_line_prefix escape PostgreSQL knows "
                                "(see the log_line_prefix setting in PostgreSQL's documentation)")
        if pos < len(text):
            self.parts.append((re.escape(text[pos:]), repr(text[pos:])))
        if "time" not in self.groups:
            raise UserError(f"--prefix {text!r}: it holds no time (%m, %t or %n), so a capture cannot be timed; "
                            "set log_line_prefix as docs/production.md says")
        if "session" not in self.groups and "pid" not in self.groups:
            raise UserError(f"--prefix {text!r}: it holds neither %c nor %p, so sessions cannot be told apart; "
                            "set log_line_prefix as docs/production.md says")
        cut = len(self.parts) if self.optional_from is None else self.optional_from
        self.tail_groups = [g for g in re.findall(r"\(\?P<(\w+)>", "".join(p for p, _ in self.parts[cut:]))]
        head = "".join(p for p, _ in self.parts[:cut])
        tail = "".join(p for p, _ in self.parts[cut:])
        self.regex = re.compile("^" + head + (f"(?:{tail})?" if tail else "") + _SEVERITY + "(?P<message>.*)")

    def tail_found(self, m: re.Match) -> bool:
        """Whether a line's part after %q (a session's) was there."""
        return any(m.group(g) is not None for g in self.tail_groups)

    def explain(self, line: str) -> str:
        """Where `line` departs from the prefix, and what was expected there."""
        for k in range(1, len(self.parts) + 1):
            if not re.match("^" + "".join(p for p, _ in self.parts[:k]), line):
                done = re.match("^" + "".join(p for p, _ in self.parts[:k - 1]), line)
                col = done.end() if done else 0
                return f"expected {self.parts[k - 1][1]} at column {col + 1}, found {line[col:col + 30]!r}"
        done = re.match("^" + "".join(p for p, _ in self.parts), line)
        col = done.end() if done else 0
        return (f"expected a severity such as 'LOG:  ' after the prefix at column {col + 1}, "
                f"found {line[col:col + 30]!r}")


def guess(path: Path, lines: int = 5000) -> Prefix:
    """The prefix of a stderr log written with the recommended or the default log_line_prefix: the one
    that reads more of its first lines; on a tie (the recommended reads a default log's lines too, its
    part after %q absent), the one whose part after %q was found, else the default."""
    candidates = [Prefix(RECOMMENDED_PREFIX), Prefix(DEFAULT_PREFIX)]
    hits = [0] * len(candidates)
    tails = [0] * len(candidates)
    first = None
    with open_text(path) as f:
        try:
            for n, text in enumerate(f, 1):
                if n > lines:
                    break
                if text.startswith("\t") or not text.strip():
                    continue
                first = first or (n, text.rstrip("\n"))
                for i, c in enumerate(candidates):
                    m = c.regex.match(text)
                    if m:
                        hits[i] += 1
                        tails[i] += c.tail_found(m)
        except _READ_ERRORS as exc:
            raise read_failure(path, exc) from None
    best = max(range(len(candidates)), key=lambda i: (hits[i], tails[i], -len(candidates[i].groups)))
    if first is None or hits[best] == 0:
        n, text = first or (1, "")
        raise UserError(f"{path}:{n}: not a PostgreSQL log with the default log_line_prefix "
                        f"{DEFAULT_PREFIX!r} ({candidates[1].explain(text)}); give the server's "
                        "log_line_prefix with --prefix, or --format")
    return candidates[best]


#: a file whose first lines are mostly unreadable is not written with this prefix
_JUDGE_AFTER = 200


def read_stderr(path: Path, prefix: Prefix, clock: Clock, bad: Unreadable) -> Iterator[Entry]:
    name = str(path)
    match = prefix.regex.match
    parse_time = clock.parse
    cur: Entry | None = None
    field: str | None = None     # which of cur's fields the lines being read belong to
    buf: list[str] = []
    read = unread = 0
    first_bad = None
    with open_text(path) as f:
        try:
            for lineno, text in enumerate(f, 1):
                if text[-1:] == "\n":
                    text = text[:-1]
                if text[:1] == "\t":
                    if cur is not None and field is not None:
                        buf.append(text[1:])
                    elif cur is None:
                        bad.add(name, lineno, "a continuation line with no message before it")
                    continue
                m = match(text)
                if m is None:
                    if not text.strip():
                        continue
                    unread += 1
                    bad.add(name, lineno, f"not of the prefix {prefix.text!r}: {text[:60]!r}")
                    if first_bad is None:
                        first_bad = (lineno, text)
                    if read + unread == _JUDGE_AFTER and unread * 2 > _JUDGE_AFTER:
                        _wrong_prefix(path, prefix, first_bad)
                    continue
                read += 1
                g = m.groupdict()
                severity = g["severity"]
                pid = g.get("pid")
                pid = int(pid) if pid is not None else None
                if severity in SECONDARY:
                    if cur is None or (pid is not None and pid != cur.pid):
                        bad.add(name, lineno, f"a {severity} line not after its message")
                        continue
                    if field is not None:
                        setattr(cur, field, "\n".join(buf) if len(buf) > 1 else buf[0])
                    field = SECONDARY[severity]
                    buf = [g["message"]]
                    continue
                try:
                    ts = parse_time(g["time"])
                except ValueError:
                    bad.add(name, lineno, f"no log time: {g['time']!r}")
                    continue
                if cur is not None:
                    if field is not None:
                        setattr(cur, field, "\n".join(buf) if len(buf) > 1 else buf[0])
                    yield cur
                client = g.get("client") or g.get("host")
                if client and client[-1] == ")" and "(" in client:   # %r: host(port)
                    host, _, port = client[:-1].partition("(")
                    client = f"{host}:{port}"
                cur = Entry(ts, name, lineno, g.get("session"), pid, _known(g.get("user")),
                            _known(g.get("database")), _known(g.get("application")), client or None, severity,
                            "", state=g.get("state"))
                field = "message"
                buf = [g["message"]]
            if cur is not None:
                if field is not None:
                    setattr(cur, field, "\n".join(buf) if len(buf) > 1 else buf[0])
                yield cur
        except _READ_ERRORS as exc:
            raise read_failure(path, exc) from None
    if unread and unread * 2 > read + unread:
        _wrong_prefix(path, prefix, first_bad)


def _known(value: str | None) -> str | None:
    """Values the server did not know yet ('[unknown]' before authentication) or writes empty."""
    return None if not value or value == "[unknown]" else value


def _wrong_prefix(path: Path, prefix: Prefix, first_bad: tuple[int, str]) -> None:
    lineno, text = first_bad
    raise UserError(f"{path}:{lineno}: not of log_line_prefix {prefix.text!r}: {prefix.explain(text)}; "
                    "give the server's log_line_prefix with --prefix")
