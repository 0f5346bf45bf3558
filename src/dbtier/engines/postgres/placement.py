"""Where each part of the database goes: `--place data=hdd,wal=ssd,temp=hdd,t_attribute_idx=ssd`.

Roles: `data` (tables, the database's default tablespace and the cluster's own files), `indexes`,
`wal` (initdb --waldir), `temp` (temp_tablespaces), `dump` (where dumps are written, seed 002's dump
file system). Any other key names one table or index of the
workload (or, for your own SQL, any table, index or materialized view the setup made: `sales.sale`
for one outside the public schema). Each device gets one tablespace; anything not placed goes where `data` goes, and `data`
defaults to the first device."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dbtier.engines import placing
from dbtier.errors import UserError

ROLES = ("data", "indexes", "wal", "temp", "dump")


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
                raise placing.unknown_object(name, known, owner, "table, index or materialized view")

    def describe(self) -> dict:
        return {**self.roles, "objects": dict(self.objects)}


def parse(texts: list[str] | tuple[str, ...], devices: list[str]) -> Placement:
    """texts: the --place values (each comma-separated KEY=DEVICE); devices: names, first = default."""
    spaces: dict[str, str] = {}
    for d in devices:
        ts = tablespace_of(d)
        if ts in spaces:
            raise UserError(f"device names {spaces[ts]} and {d} differ only in case or punctuation; rename one")
        spaces[ts] = d
    roles, objects = placing.parse(texts, devices, ROLES, "data=hdd,wal=ssd,t_attribute_idx=ssd", "public.")
    return Placement(roles, objects)
