"""`--credits empty|full|FRACTION`: the burst credits a capped volume (gp2, an Azure Premium SSD's
burst) has when the measured part of a run or a prediction begins. A volume left idle has them all
(`full`, the default); one that has just served a day at its peak has none (`empty`), and runs at its
baseline from the first request."""

from __future__ import annotations

import math

from dbtier.errors import UserError

WORDS = {"empty": 0.0, "full": 1.0}
METAVAR = "empty|full|FRACTION"


def parse(value, what: str = "--credits") -> float:
    """A fraction of a full bucket, 0 to 1, from a word, a number or its text (`0.25`, `25%`)."""
    if isinstance(value, bool):
        raise UserError(f"{what} {value}: give empty, full or a fraction such as 0.25")
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        text = str(value).strip().lower()
        if text in WORDS:
            return WORDS[text]
        try:
            number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            raise UserError(f"{what} {value!r}: give empty, full or a fraction such as 0.25") from None
    if not (math.isfinite(number) and 0.0 <= number <= 1.0):
        raise UserError(f"{what} {value!r}: a fraction of a full bucket, from 0 (empty) to 1 (full)")
    return number


def text(fraction: float) -> str:
    """As a user writes it back: empty, full or the fraction."""
    return next((w for w, f in WORDS.items() if f == fraction), f"{fraction:g}")
