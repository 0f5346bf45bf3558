"""What can go on the fast device: on PostgreSQL every table (its TOAST, free space and visibility maps
with it), index and materialized view of the run, the WAL, temp files and the catalogs; on MariaDB
every table (its indexes are in its file), the redo log, the undo tablespaces, temp, the binary log and
the system tablespace. Each with the bytes it takes and what the recorded run measured of it (the
reasons an object matters)."""

from __future__ import annotations

from dataclasses import dataclass

from dbtier import engines
from dbtier.measure.objects import owner
from dbtier.engines.placing import OBJECT_NAME
from dbtier.prediction.recording import Recording
from dbtier.prediction.scenario import file_identities

#: PostgreSQL's roles a placement names instead of an object
WAL, TEMP = "wal", "temp"
#: the system catalogs and the cluster's own files (commit status, the relation cache's init files):
#: they go where `data` goes, so a placement gives them the fast device with data=fast and every
#: table not on it named on the slow one (InnoDB's system tablespace likewise: engine.system_part)
CATALOGS = "catalogs"


def role_parts(engine) -> tuple[str, ...]:
    """The roles that are candidates of their own (PostgreSQL's WAL and temp; InnoDB's redo log, undo,
    temp and binary log): every role but data, the indexes' and the dumps'."""
    return tuple(r for r in engine.roles if r not in ("data", engine.index_role, engine.dump_role))


@dataclass
class Candidate:
    name: str          # as --place names it: a table or index, or the role wal / temp
    kind: str          # table, index, materialized view, wal, temp
    bytes: int         # what it takes on a device at the end of the run (see sized_by)
    sized_by: str      # where that size comes from
    reads: int = 0     # device reads in the measured intervals (recorded)
    random_reads: int = 0
    read_bytes: int = 0
    writes: int = 0
    flushes: int = 0   # fsync / fdatasync / O_DSYNC writes: what a commit or checkpoint waits for
    cached_reads: int = 0
    device_s: float = 0.0  # the device's busy time for it
    table: str | None = None  # an index's table

    @property
    def active(self) -> bool:
        """It reached a device in a measured interval: moving it can change the answer."""
        return self.reads + self.writes + self.flushes > 0

    def reason(self) -> str:
        """What the recorded run measured of it, in a DBA's words."""
        parts = []
        if self.reads:
            share = self.random_reads / self.reads
            parts.append(f"{self.reads:,} reads ({share:.0%} random)")
        if self.writes:
            parts.append(f"{self.writes:,} writes")
        if self.flushes:
            parts.append(f"{self.flushes:,} flushes waited for")
        if not parts:
            return "no device I/O while measured"
        return ", ".join(parts) + f"; {self.device_s:.3g} s of device time"


def _postgres_name(kind: str, name: str) -> str:
    """The candidate a PostgreSQL file's I/O belongs to: the WAL's and temp's by their roles, a TOAST
    relation's under its table."""
    return WAL if kind == "wal" else TEMP if kind == "temp" else owner(name)


def _measured_io(rec: Recording, name_of=_postgres_name) -> dict[str, dict]:
    """Per candidate (name_of(kind, object)), its recorded device I/O summed over the measured phases,
    with the kind of the first file of it seen."""
    out: dict[str, dict] = {}
    for phase in rec.phases:
        for row in phase.get("object_io", []):
            kind = row["kind"]
            acc = out.setdefault(name_of(kind, row["object"]), {
                "kind": kind, "reads": 0, "random_reads": 0, "read_bytes": 0, "writes": 0, "flushes": 0,
                "cached_reads": 0, "device_s": 0.0})
            reads = int(row.get("reads", 0))
            acc["reads"] += reads
            seq = float(row.get("sequential_pct") or 0.0) / 100  # null: no reads to judge
            acc["random_reads"] += round(reads * (1 - seq))
            for k in ("read_bytes", "writes", "flushes", "cached_reads"):
                acc[k] += int(row.get(k, 0))
            acc["device_s"] += float(row.get("device_s", 0.0))
    return out


def _io_of(io: dict[str, dict], name: str) -> dict:
    """A candidate's measured I/O as Candidate takes it (none: zeros)."""
    return {k: v for k, v in io.get(name, {}).items() if k != "kind"}


def _laid_out_bytes(rec: Recording) -> dict[str, int]:
    """Bytes by where the run laid them out on its devices (the layout's chunks): the WAL (every segment
    it wrote), temp (every temp file) and each named relation file: room a device must have for them."""
    ids = file_identities(rec, {int(f): 0 for f, _c, _a in rec.layout["chunks"]})
    chunk = int(rec.layout["chunk_bytes"])
    out = {WAL: 0, TEMP: 0}
    for f, _c, _a in rec.layout["chunks"]:
        cls, name, kind = ids[int(f)]
        key = cls if cls in (WAL, TEMP) else owner(name) if name else None
        if key:
            out[key] = out.get(key, 0) + chunk
    return out


def candidates(rec: Recording) -> list[Candidate]:
    """Everything a placement can move, largest device time first."""
    return _innodb_candidates(rec) if rec.lab.engine == "mariadb" else _postgres_candidates(rec)


def _innodb_candidates(rec: Recording) -> list[Candidate]:
    """Every table of the run (its indexes in its file), the redo log, undo, temp and binary log by
    their roles, and the system tablespace (with the doublewrite buffer and the server's other files),
    which goes where data goes."""
    from dbtier.engines.mariadb.handle import SYSTEM_DATABASES
    from dbtier.engines.mariadb.placement import ROLE_OF_KIND

    system = engines.get("mariadb").system_part

    def key(kind: str, name: str | None) -> str:
        """The candidate a file of this kind and object belongs to; the server's own tables (mysql.*)
        go with the system tablespace."""
        role = ROLE_OF_KIND.get(kind, "data")
        if role != "data":
            return role
        own = kind == "table" and name and name.partition(".")[0] not in SYSTEM_DATABASES
        return name if own else system

    io = _measured_io(rec, key)
    ids = file_identities(rec, {int(f): 0 for f, _c, _a in rec.layout["chunks"]})
    chunk = int(rec.layout["chunk_bytes"])
    laid: dict[str, int] = {}
    for f, _c, _a in rec.layout["chunks"]:
        kind, name, _ = ids[int(f)]
        laid[key(kind, name)] = laid.get(key(kind, name), 0) + chunk
    out = []
    for o in rec.result.get("objects", []):
        if o["kind"] == "table" and OBJECT_NAME.match(o["object"]):
            total = o.get("total_bytes")
            out.append(Candidate(o["object"], "table", int(total if total is not None else o["bytes"]),
                                 "its file at the end of the run (its indexes with it)", **_io_of(io, o["object"])))
    named = {c.name for c in out}
    roles = role_parts(engines.get("mariadb"))
    for name in sorted(set(io) | set(laid)):
        if name in named or not (name in roles or name == system or OBJECT_NAME.match(name)):
            continue
        if name == "log" and rec.result.get("redo_log_bytes") is not None:
            size, by = int(rec.result["redo_log_bytes"]), "the redo log's file (innodb_log_file_size)"
        else:
            size, by = laid.get(name, 0), "the run's file layout (1 MiB chunks)"
        kind = name if name in roles or name == system else "table"
        out.append(Candidate(name, kind, size, by, **_io_of(io, name)))
    return sorted(out, key=lambda c: (-c.device_s, -c.bytes, c.name))


def _postgres_candidates(rec: Recording) -> list[Candidate]:
    """Every object the run named (tables, indexes, materialized views), the WAL, temp and the system
    catalogs."""
    io = _measured_io(rec)
    laid = _laid_out_bytes(rec)

    out = []
    for o in rec.result.get("objects", []):
        if o["kind"] not in ("table", "index", "materialized view") or not OBJECT_NAME.match(o["object"]):
            continue  # (a name --place cannot give, quoted with capitals, stays with data)
        total = o.get("total_bytes")
        out.append(Candidate(o["object"], o["kind"], int(total if total is not None else o["bytes"]),
                             "pg_table_size at the end of the run" if total is not None
                             else "pg_relation_size at the end of the run", table=o.get("table"),
                             **_io_of(io, o["object"])))
    named = {c.name for c in out}
    for name, row in io.items():  # an object the run's list left out, but its I/O named
        if row["kind"] in ("table", "index") and name not in named and OBJECT_NAME.match(name):
            out.append(Candidate(name, "index" if row["kind"] == "index" else "table", laid.get(name, 0),
                                 "the run's file layout (1 MiB chunks)", **_io_of(io, name)))
            named.add(name)
    # what follows `data` and no placement names: catalogs, their TOAST, the cluster's own files
    system = [n for n, row in io.items() if n not in named and n not in (WAL, TEMP)
              and row["kind"] in ("catalog", "toast", "other", "sequence")]
    if system:
        acc = {k: sum(io[n][k] for n in system) for k in ("reads", "random_reads", "read_bytes", "writes", "flushes",
                                                          "cached_reads", "device_s")}
        size = rec.result.get("catalog_bytes")
        out.append(Candidate(CATALOGS, "catalog", int(size) if size is not None else
                             sum(laid.get(n, 0) for n in system),
                             "the catalogs' pg_total_relation_size at the end of the run" if size is not None
                             else "the run's file layout (1 MiB chunks)", **acc))
    wal = rec.result.get("wal_bytes")
    out.append(Candidate(WAL, "wal", int(wal) if wal is not None else laid[WAL],
                         "pg_wal at the end of the run" if wal is not None else "every WAL segment the run wrote",
                         **_io_of(io, WAL)))
    if laid[TEMP] or TEMP in io:
        out.append(Candidate(TEMP, "temp", laid[TEMP], "the temp files the run wrote, all of them at once",
                             **_io_of(io, TEMP)))
    return sorted(out, key=lambda c: (-c.device_s, -c.bytes, c.name))
