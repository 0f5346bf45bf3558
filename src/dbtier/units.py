"""Sizes as dbtier reads and writes them: PostgreSQL's units (kB, MB, GB, TB; binary multiples)."""

from __future__ import annotations

import re

from dbtier.errors import UserError

_SIZE = re.compile(r"^\s*(\d+)\s*(kB|MB|GB|TB)?\s*$", re.IGNORECASE)
_UNITS = {"kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40, None: 8192}


def fmt_bytes(n: float) -> str:
    """1536 -> '1.5 kB', PostgreSQL's unit names, binary multiples."""
    for unit in ("bytes", "kB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1024 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PB"


def parse_size(text: str, what: str) -> int:
    """'16MB' -> bytes. PostgreSQL's own units; a bare number is 8 KiB pages, as in postgresql.conf."""
    m = _SIZE.match(str(text))
    if not m:
        raise UserError(f"{what} {text!r}: expected a size such as 16MB or 1GB")
    unit = m.group(2).lower() if m.group(2) else None
    return int(m.group(1)) * _UNITS[unit]


def parse_option_size(text: str, what: str) -> int:
    """A size given to one of dbtier's own options (--cache, --page-cache, --work-mem): a number and
    its unit (kB, MB, GB, TB). A bare number is refused: in postgresql.conf it would be 8 kB pages,
    which nobody means by `--cache 32` (`--set shared_buffers=...` keeps PostgreSQL's own syntax)."""
    m = _SIZE.match(str(text))
    if m and not m.group(2):
        raise UserError(f"{what} {str(text).strip()}: give a unit, e.g. {m.group(1)}MB (kB, MB, GB or TB)")
    return parse_size(text, what)


def kib(n: int) -> str:
    """Bytes as a size PostgreSQL and dbtier's options read (whole kB)."""
    return f"{n // 1024}kB"


def size_text(n: int) -> str:
    """Bytes as the option text that reads back to them: the largest unit that divides them whole
    (33554432 -> '32MB'); below 1 kB or between, whole kB."""
    for name, unit in (("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20)):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{name}"
    return f"{max(1, n // 1024)}kB"
