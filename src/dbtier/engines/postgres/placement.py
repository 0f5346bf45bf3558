"""Where each part of the database goes: `--place data=hdd,wal=ssd,temp=hdd,t_attribute_idx=ssd`.

Roles: `data` (tables, the database's default tablespace and the cluster's own files), `indexes`,
`wal` (initdb --waldir), `temp` (temp_tablespaces), `dump` (where dumps are written, seed 002's dump
file system). Any other key names one table or index of the
workload (or, for your own SQL, any table, index or materialized view the setup made: `sales.sale`
for one outside the public schema). Each device gets one tablespace; anything not placed goes where `data` goes, and `data`
defaults to the first device."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from dbtier.errors import UserError

ROLES = ("data", "indexes", "wal", "temp", "dump")
OBJECT_NAME = re.compile(r"^([a-z_][a-z0-9_$]*\.)?[a-z_][a-z0-9_$]*$")  # name, or schema.name


def tablespace_of(device: str) -> str:
    return "dev_" + re.sub(r"[^a-z0-9_]", "_", device.lower())


@dataclass
class Placement:
    roles: dict[str, str]                                  # every role -> device name
    objects: dict[str, str] = field(default_factory=dict)  # table or index name -> device name

    def device_for(self, name: str, kind: str) -> str:
        """The device of one object: its own placement, else its role's ('index' -> indexes)."""
        if name in self.objects:
            return self.objects[name]
        return self.roles["indexes" if kind == "index" else "data"]

    def tablespace_for(self, name: str, kind: str) -> str:
        return tablespace_of(self.device_for(name, kind))

    def check_objects(self, known: dict[str, str], owner: str) -> None:
        """Every object --place names exists in `known` (name -> kind); owner says whose objects they are
        ("workload random-index", "the database after the setup")."""
        for name in self.objects:
            if name not in known:
                hint = difflib.get_close_matches(name, known, 1)
                listed = ", ".join(sorted(known)[:12]) + (", ..." if len(known) > 12 else "")
                raise UserError(f"--place {name}=...: {owner} has no table, index or materialized view {name!r}"
                                + (f"; did you mean {hint[0]}?" if hint else "")
                                + f" (its objects: {listed or 'none'})")

    def describe(self) -> dict:
        return {**self.roles, "objects": dict(self.objects)}


def parse(texts: list[str] | tuple[str, ...], devices: list[str]) -> Placement:
    """texts: the --place values (each comma-separated KEY=DEVICE); devices: names, first = default."""
    if not devices:
        raise UserError("no devices: give at least one --device NAME=PROFILE")
    spaces: dict[str, str] = {}
    for d in devices:
        ts = tablespace_of(d)
        if ts in spaces:
            raise UserError(f"device names {spaces[ts]} and {d} differ only in case or punctuation; rename one")
        spaces[ts] = d
    given: dict[str, str] = {}
    for text in texts:
        for item in filter(None, (s.strip() for s in text.split(","))):
            key, sep, dev = item.partition("=")
            key, dev = key.strip().lower(), dev.strip()
            key = key.removeprefix("public.")  # objects in public are named without their schema
            if not sep or not key or not dev:
                raise UserError(f"--place {text!r}: expected KEY=DEVICE[,KEY=DEVICE...], for example "
                                "data=hdd,wal=ssd,t_attribute_idx=ssd")
            if key not in ROLES and not OBJECT_NAME.match(key):
                raise UserError(f"--place {item!r}: {key!r} is neither a role ({', '.join(ROLES)}) nor a table or "
                                "index name")
            if dev not in devices:
                hint = difflib.get_close_matches(dev, devices, 1)
                raise UserError(f"--place {item!r}: no device named {dev!r}"
                                + (f"; did you mean {hint[0]}?" if hint else "")
                                + f" (devices: {', '.join(devices)})")
            if key in given and given[key] != dev:
                raise UserError(f"--place: {key} is placed twice ({given[key]} and {dev})")
            given[key] = dev
    data = given.get("data", devices[0])
    roles = {"data": data, **{r: given.get(r, data) for r in ROLES if r != "data"}}
    objects = {k: v for k, v in given.items() if k not in ROLES}
    return Placement(roles, objects)
