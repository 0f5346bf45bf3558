"""Where each part of an InnoDB database goes: `--place data=hdd,log=ssd,undo=ssd,orders=ssd`.

Roles: `data` (the data directory: the system tablespace with the doublewrite buffer, and every
table not placed), `log` (the redo log, innodb_log_group_home_dir), `undo` (the undo tablespaces),
`temp` (the temporary tablespace and tmpdir, where sorts spill), `binlog` (the binary log, when it is
on). Any other key names one table (`orders`, or `db.orders` in another database than the
workload's): InnoDB keeps it in a file of its own there (`DATA DIRECTORY`). An index cannot be placed:
InnoDB keeps every index in its table's file."""

from __future__ import annotations

from dataclasses import dataclass, field

from dbtier.engines import placing
from dbtier.errors import UserError

ROLES = ("data", "log", "undo", "temp", "binlog")
EXAMPLE = "data=hdd,log=ssd,orders=ssd"
#: PostgreSQL's roles a layout written for it may carry (a sweep's layouts over both engines), and InnoDB's
#: own word for each: refused as roles, not taken for tables
POSTGRES_ROLES = {"wal": "its redo log is log", "indexes": "an index is in its table's file, placed with it",
                  "dump": "dumps are written where data is"}


#: the role whose device holds each kind of InnoDB file (measure.name_of's kinds); a table's own file
#: follows data unless the table is placed by name
ROLE_OF_KIND = {"table": "data", "system": "data", "log": "log", "undo": "undo", "temp": "temp", "binlog": "binlog",
                "dump": "data", "other": "data"}


@dataclass
class Placement:
    roles: dict[str, str]                                  # every role -> device name
    objects: dict[str, str] = field(default_factory=dict)  # table name -> device name

    def device_for(self, name: str, kind: str) -> str:
        """The device of one table (an index is in its table's file, so its table's device)."""
        return self.objects.get(name, self.roles["data"])

    def check_objects(self, known: dict[str, str], owner: str) -> None:
        """Every name --place gives is a table of `known` (name -> kind: table, index)."""
        for name in self.objects:
            if known.get(name) == "index":
                raise UserError(f"--place {name}=...: {name} is an index, and InnoDB keeps every index in its table's "
                                "file; place the table instead")
            if name not in known:
                raise placing.unknown_object(name, {k for k, v in known.items() if v != "index"}, owner, "table")

    def describe(self) -> dict:
        return {**self.roles, "objects": dict(self.objects)}

    def device_of_file(self, kind: str, name: str | None) -> str:
        """The device of one file of InnoDB's, by its kind and object (measure.name_of)."""
        if kind == "table" and name in self.objects:
            return self.objects[name]
        return self.roles[ROLE_OF_KIND.get(kind, "data")]


def parse(texts, devices: list[str]) -> Placement:
    """texts: the --place values; devices: names, the first the default."""
    roles, objects = placing.parse(texts, devices, ROLES, EXAMPLE)
    for name in objects:
        if name in POSTGRES_ROLES:
            raise UserError(f"--place {name}=...: {name} is PostgreSQL's role; on MariaDB {POSTGRES_ROLES[name]} "
                            f"(roles: {', '.join(ROLES)})")
    return Placement(roles, objects)
