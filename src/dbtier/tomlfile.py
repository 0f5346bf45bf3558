"""A TOML file a user gave (an experiment, a sweep, a crash matrix): read whole, or one line saying why
not, named as the option that gave it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from dbtier.errors import UserError


def read(path: Path, where: str, what: str, max_bytes: int | None = None) -> dict:
    """The document at `path`. where: how messages name it ("--matrix m.toml"); what: what it should be
    ("an experiment is a TOML file"), said when there is no such file; max_bytes: larger is refused."""
    path = Path(path).expanduser()
    try:
        if not path.is_file():
            raise UserError(f"{where}: no such file ({what})")
        if max_bytes is not None and path.stat().st_size > max_bytes:
            raise UserError(f"{where}: larger than {max_bytes >> 10} kB; not {what.split(' is ')[0]}")
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"{where}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"{where}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{where}: not valid TOML ({exc})") from None
