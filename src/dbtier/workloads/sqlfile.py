"""A user's SQL file, read the way the server will see it: statements split at the semicolons that end
them (not those inside quotes, quoted identifiers, dollar quotes or comments), each with the line it
starts on, and `-- phase: NAME` lines that start a new measured phase.

psql's own commands (lines starting with a backslash) are psql's, not SQL: a file to be measured
statement by statement may not have them (a setup file may: it is run by psql itself).

MariaDB's SQL (dialect "mariadb") quotes identifiers with backticks, takes backslash escapes in its
strings, and comments to the end of a line with `#` too; it has no dollar quotes, and DELIMITER is its
client's command, not SQL."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from dbtier.errors import UserError

PHASE = re.compile(r"^\s*--\s*phase:\s*(?P<name>\S.*?)\s*$", re.IGNORECASE)
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_DELIMITER = re.compile(r"DELIMITER\s", re.IGNORECASE)
MAX_FILE_BYTES = 256 << 20


@dataclass(frozen=True)
class Statement:
    path: str
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def summary(self, width: int = 80) -> str:
        one = " ".join(self.text.split())
        return one if len(one) <= width else one[: width - 3] + "..."


@dataclass
class Phase:
    name: str
    statements: list[Statement] = field(default_factory=list)


def read_text(path: Path, what: str) -> str:
    path = Path(path)
    try:
        if path.is_dir():
            raise UserError(f"{what} {path}: a folder, not a SQL file")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise UserError(f"{what} {path}: larger than {MAX_FILE_BYTES >> 20} MB; load data with COPY from a file, "
                            "or restore a dump with --restore")
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise UserError(f"{what} {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} {path}: not UTF-8 text (byte {exc.start})") from None


def split(text: str, path: str = "<sql>", meta_commands: bool = False,
          dialect: str = "postgres") -> list[tuple[int, str]]:
    """(line, statement) for each statement, and ('phase', name) markers in order, as
    (line, '\\x00phase:NAME'). Raises UserError for an unterminated quote or comment or a psql command;
    with meta_commands (a pgbench script), a backslash command is one of its own, to the end of its
    line (and the lines a trailing backslash continues it on). dialect: postgres or mariadb."""
    mariadb = dialect == "mariadb"
    quotes = ("'", '"', "`") if mariadb else ("'", '"')
    out: list[tuple[int, str]] = []
    i, n, line = 0, len(text), 1
    start, start_line = 0, 1
    empty = True  # nothing but blanks and comments since the last statement

    def flush(end: int) -> None:
        nonlocal start, empty
        body = text[start:end].strip()
        if body and not empty:
            out.append((start_line, body))
        start, empty = end + 1, True

    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            continue
        if c.isspace():
            i += 1
            continue
        if (c == "-" and text.startswith("--", i)) or (c == "#" and mariadb):
            end = text.find("\n", i)
            end = n if end < 0 else end
            if empty:
                m = PHASE.match(text[i:end])
                if m:
                    out.append((line, "\x00phase:" + m.group("name")))
            i = end
            continue
        if c == "/" and text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            if depth:
                raise UserError(f"{path}:{line}: a /* comment is not closed")
            line += text.count("\n", i, j)
            i = j
            continue
        if empty:
            if c == "\\" and meta_commands:
                end = i
                while True:
                    end = text.find("\n", end)
                    if end < 0 or text[end - 1] != "\\":
                        break
                    end += 1
                end = n if end < 0 else end
                out.append((line, text[i:end]))
                line += text.count("\n", i, end)
                i = start = end
                continue
            if c == "\\":
                cmd = text[i:].split(None, 1)[0]
                client = "the mariadb client's" if mariadb else "a psql"
                raise UserError(f"{path}:{line}: {cmd} is {client} command, not SQL; a measured file holds SQL "
                                f"statements only ({'they' if mariadb else 'psql commands'} may go in a --setup file)")
            if mariadb and _DELIMITER.match(text, i):
                raise UserError(f"{path}:{line}: DELIMITER is the mariadb client's command, not SQL; a measured file's "
                                "statements end with ';' (create procedures in a --setup file)")
            if c == ";":
                i += 1
                start = i
                continue
            empty, start, start_line = False, i, line
        if c == ";":
            flush(i)
            i += 1
            continue
        if c in quotes:
            quote = c
            escapes = (mariadb and c != "`") or (c == "'" and i > 0 and text[i - 1] in "eE" and (
                i < 2 or not (text[i - 2].isalnum() or text[i - 2] == "_")))
            j = i + 1
            while True:
                if j >= n:
                    what = "string" if quote == "'" or (mariadb and quote == '"') else "quoted identifier"
                    raise UserError(f"{path}:{line}: a {what} opened here is not closed")
                if escapes and text[j] == "\\":
                    j += 2
                    continue
                if text[j] == quote:
                    if j + 1 < n and text[j + 1] == quote:
                        j += 2
                        continue
                    break
                j += 1
            line += text.count("\n", i, j)
            i = j + 1
            continue
        if c == "$" and not mariadb:
            m = _DOLLAR.match(text, i)
            if m and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")):
                tag = m.group(0)
                end = text.find(tag, m.end())
                if end < 0:
                    raise UserError(f"{path}:{line}: a {tag} quote opened here is not closed")
                line += text.count("\n", i, end + len(tag))
                i = end + len(tag)
                continue
        i += 1
    if not empty:
        flush(n)
    return out


def phases(path: Path, default_name: str, dialect: str = "postgres") -> list[Phase]:
    """A measured file's phases: one named after the file unless `-- phase: NAME` lines divide it."""
    text = read_text(path, "--run")
    out: list[Phase] = []
    for line, body in split(text, str(path), dialect=dialect):
        if body.startswith("\x00phase:"):
            out.append(Phase(body[len("\x00phase:"):]))
            continue
        if not out:
            out.append(Phase(default_name))
        out[-1].statements.append(Statement(str(path), line, body))
    out = [p for p in out if p.statements]
    if not out:
        raise UserError(f"--run {path}: no SQL statement in it")
    return out
