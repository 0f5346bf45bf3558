"""The --place grammar every engine shares: `KEY=DEVICE[,KEY=DEVICE...]`, a key being one of the
engine's roles or the name of one of its objects; what is not placed goes where the first role goes,
and that defaults to the first device. An engine says what its roles are and what the names may be
(engines/postgres/placement.py, engines/mariadb/placement.py)."""

from __future__ import annotations

import difflib
import re

from dbtier.errors import UserError

#: an object's name as --place takes it: name, or schema.name (PostgreSQL) / database.name (MariaDB)
OBJECT_NAME = re.compile(r"^([a-z_][a-z0-9_$]*\.)?[a-z_][a-z0-9_$]*$")


def parse(texts, devices: list[str], roles: tuple[str, ...], example: str,
          strip_prefix: str = "") -> tuple[dict[str, str], dict[str, str]]:
    """(every role -> its device, each object placed -> its device). strip_prefix: a schema whose
    objects are named without it ('public.')."""
    if not devices:
        raise UserError("no devices: give at least one --device NAME=PROFILE")
    given: dict[str, str] = {}
    for text in texts:
        for item in filter(None, (s.strip() for s in text.split(","))):
            key, sep, dev = item.partition("=")
            key, dev = key.strip().lower(), dev.strip()
            if strip_prefix:
                key = key.removeprefix(strip_prefix)
            if not sep or not key or not dev:
                raise UserError(f"--place {text!r}: expected KEY=DEVICE[,KEY=DEVICE...], for example {example}")
            if key not in roles and not OBJECT_NAME.match(key):
                raise UserError(f"--place {item!r}: {key!r} is neither a role ({', '.join(roles)}) nor a table or "
                                "index name")
            if dev not in devices:
                hint = difflib.get_close_matches(dev, devices, 1)
                raise UserError(f"--place {item!r}: no device named {dev!r}"
                                + (f"; did you mean {hint[0]}?" if hint else "")
                                + f" (devices: {', '.join(devices)})")
            if key in given and given[key] != dev:
                raise UserError(f"--place: {key} is placed twice ({given[key]} and {dev})")
            given[key] = dev
    first = given.get(roles[0], devices[0])
    placed = {roles[0]: first, **{r: given.get(r, first) for r in roles[1:]}}
    return placed, {k: v for k, v in given.items() if k not in roles}


def unknown_object(name: str, known, owner: str, what: str) -> UserError:
    """--place of a name the database does not have: one line, with the nearest name."""
    hint = difflib.get_close_matches(name, known, 1)
    listed = ", ".join(sorted(known)[:12]) + (", ..." if len(known) > 12 else "")
    return UserError(f"--place {name}=...: {owner} has no {what} {name!r}"
                     + (f"; did you mean {hint[0]}?" if hint else "") + f" (its objects: {listed or 'none'})")
