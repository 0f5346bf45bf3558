"""Statement classes: a statement's text with its constants replaced by $n, as pg_stat_statements
shows it, and a class id that is the same for the same normalised statement.

The parser is PostgreSQL's own (libpg_query, through pglast): `normalize` replaces the constants, and
the class id is its fingerprint of the parse tree, which ignores constants' values, letter case and
spacing (two spellings of one statement are one class, as in pg_stat_statements). A text the parser
rejects (a statement production answered with a syntax error) gets a class of its own text with its
numbers and strings masked, by a tokenizer.

Parsing costs about 10 us a statement; a log of a million statements that differ only in their
constants (pgbench's) is parsed once per shape: the texts are first keyed by `shape`, a cheap mask of
their literals, and the parser runs on the first text of each shape only."""

from __future__ import annotations

import hashlib
import re

from pglast import parser as pg

#: kept whole: quoted identifiers and comments (a quote in a comment opens no string); masked: strings
#: (E'' with backslash escapes, the others without), dollar-quoted strings and numbers
_LITERAL = re.compile(r"""(?P<keep>"(?:[^"]|"")*"|--[^\n]*|/\*.*?\*/)"""
                      r"""|[Ee]'(?:[^'\\]|''|\\.)*'|[XxBbNnUu]?&?'(?:[^']|'')*'|\$(?P<tag>[A-Za-z_]*)\$.*?\$(?P=tag)\$"""
                      r"""|(?<![\w$.])(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)""", re.S)


def _mask(m: re.Match) -> str:
    return m.group("keep") or "?"


_NUMBER = re.compile(r"(?<![\w$.])(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)")
_NOT_PLAIN = re.compile(r"['\"$]|--|/\*")


def shape(text: str) -> str:
    """The text with its string and number literals masked: texts of one shape are one class."""
    if _NOT_PLAIN.search(text) is None:   # no strings, quoted names or comments: numbers alone, quickly
        return _NUMBER.sub("?", text)
    return _LITERAL.sub(_mask, text)


def _signed64(hex_or_bytes) -> int:
    value = int(hex_or_bytes, 16) if isinstance(hex_or_bytes, str) else int.from_bytes(hex_or_bytes, "big")
    return value - (1 << 64) if value >= (1 << 63) else value


class Classifier:
    """text -> (class_id, normalized), remembering every class it has seen (for classes.parquet)."""

    def __init__(self):
        self._by_shape: dict[str, int] = {}
        self.normalized: dict[int, str] = {}   # class_id -> the first normalised text seen

    def classify(self, text: str) -> int:
        key = shape(text)
        cid = self._by_shape.get(key)
        if cid is None:
            cid, normalized = self._parse(text, key)
            self.normalized.setdefault(cid, normalized)
            self._by_shape[key] = cid
        return cid

    @staticmethod
    def _parse(text: str, key: str) -> tuple[int, str]:
        try:
            normalized = pg.normalize(text)
            cid = _signed64(pg.fingerprint(text))
        except pg.ParseError:
            normalized = key
            cid = _signed64(hashlib.sha256(" ".join(key.lower().split()).encode()).digest()[:8])
        return cid, tidy(normalized)


def tidy(text: str) -> str:
    """As pg_stat_statements shows a statement: without the trailing semicolon and spaces."""
    return text.strip().rstrip(";").rstrip()


def fingerprint_id(text: str) -> int | None:
    """The class id of one text (None if the parser rejects it), for matching pg_stat_statements."""
    try:
        return _signed64(pg.fingerprint(text))
    except pg.ParseError:
        return None
