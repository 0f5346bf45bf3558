"""What a DBA runs in production to make an advice true on PostgreSQL (MariaDB's: migration_innodb.py):
a psql script that makes a tablespace per new device, moves each table and index whose device changes
(ALTER TABLE/INDEX ... SET TABLESPACE, in an order that frees room on a device before filling it), the
database's default tablespace (the catalogs and every table bound for it, in one move), temp files'
tablespace, and the WAL (which SQL cannot move: the shell steps, with the server stopped). Each move
says the bytes it copies, the lock it holds meanwhile, and its time estimated from the device models it
reads from and writes to."""

from __future__ import annotations

from dbtier import engines
from dbtier.advisor.candidates import CATALOGS, TEMP, WAL, Candidate
from dbtier.advisor.copying import Move, copy_seconds, duration as _t
from dbtier.devices.profile import Profile
from dbtier.engines.postgres.placement import Placement, tablespace_of
from dbtier.units import fmt_bytes

def plan(cands: list[Candidate], now: Placement, then: Placement, profiles: dict[str, Profile]) -> dict:
    """The moves from placement `now` to `then` (device names; `profiles` each device's), in an order
    PostgreSQL takes: ALTER DATABASE ... SET TABLESPACE moves everything still in the database's default
    tablespace (the catalogs with it) and refuses when a relation is already in the new one; so what must
    not go with it leaves first (to its own tablespace, one made on the old device if it stays there),
    and what joins the new default from elsewhere comes after."""
    def device(p: Placement, c: Candidate) -> str:
        if c.name in (WAL, TEMP):
            return p.roles[c.name]
        if c.name == CATALOGS:
            return p.roles["data"]
        return p.device_for(c.name, c.kind)

    wal_after = profiles.get(then.roles["wal"])
    old_default, new_default = now.roles["data"], then.roles["data"]
    data_moves = old_default != new_default

    def move(c: Candidate, src: str, dst: str) -> Move:
        return Move(c.name, c.kind, c.bytes, src, dst, copy_seconds(c.bytes, profiles.get(src), profiles.get(dst),
                                                                    wal_after))

    first, last, rest = [], [], 0
    for c in cands:
        if c.name in (WAL, TEMP):
            continue
        src, dst = device(now, c), device(then, c)
        in_default = src == old_default and c.name not in now.objects
        if c.name == CATALOGS or (data_moves and in_default and dst == new_default):
            rest += c.bytes if data_moves else 0  # goes with the database's move
        elif data_moves and in_default:
            first.append(move(c, src, dst))  # leaves the default first: re-homed if it stays on the old device
        elif src != dst:
            (last if data_moves and dst == new_default else first).append(move(c, src, dst))
    receiving = {m.target for m in first}
    first.sort(key=lambda m: (m.source not in receiving, -m.bytes))  # free room on a receiving device first
    moves = first
    if data_moves:
        moves.append(Move("the database's default tablespace", "database", rest, old_default, new_default,
                          copy_seconds(rest, profiles.get(old_default), profiles.get(new_default), wal_after)))
    moves += last
    wal = next((c for c in cands if c.name == WAL), None)
    spaces = {m.target for m in moves} | ({then.roles["temp"]} if now.roles["temp"] != then.roles["temp"] else set())
    if not data_moves:
        spaces.discard(old_default)  # the database's default: it has its tablespace
    return {"moves": moves, "default": (old_default, new_default),
            "wal": (now.roles["wal"], then.roles["wal"], wal.bytes if wal else 0)
            if now.roles["wal"] != then.roles["wal"] else None,
            "temp": then.roles["temp"] if now.roles["temp"] != then.roles["temp"] else None,
            "new_devices": sorted(spaces)}


def _space(steps: dict, device: str) -> str:
    """The tablespace SQL names for a device: the database's default keeps its own name (pg_default,
    unless it was given another)."""
    old, new = steps["default"]
    return "pg_default" if old == new and device == old else tablespace_of(device)


def script(steps: dict, devices: dict[str, str], title: str) -> str:
    """The psql script: devices maps each device name to what it is (its profile, as -d gives it)."""
    lines = [f"-- {title}",
             "-- Made by dbtier from a recorded run. Read it before you run it: each move locks what it moves while it",
             "-- copies. Run it with psql, connected to the database: psql -d YOURDB -f migration.sql",
             "\\set ON_ERROR_STOP on", "\\set target_db :DBNAME", ""]
    new = steps["new_devices"]
    if new:
        lines.append("-- 1. A tablespace per new device. Mount each, and give its folder to the OS user the server runs as;")
        lines.append("--    change each LOCATION to where you mounted it.")
        for d in new:
            lines.append(f"--    {d}: {devices.get(d, '?')}")
            lines.append(f"CREATE TABLESPACE {tablespace_of(d)} LOCATION '/mnt/{d}/pg';")
        lines.append("")
    total = 0.0
    known = True
    for i, m in enumerate(steps["moves"], 1):
        est = "time unknown (a real device has no model)" if m.seconds is None else f"about {_t(m.seconds)}"
        known &= m.seconds is not None
        total += m.seconds or 0.0
        where = (f"into a tablespace of its own on {m.target}, so that the database's move leaves it there"
                 if m.source == m.target else f"from {m.source} to {m.target}")
        lines.append(f"-- move {i}: {m.name} ({m.kind}, {fmt_bytes(m.bytes)}) {where}: {est}; {m.lock()}")
        if m.kind == "database":
            lines += ["\\connect postgres",
                      f"ALTER DATABASE :\"target_db\" SET TABLESPACE {tablespace_of(m.target)};",
                      "\\connect :target_db"]
        else:
            verb = "INDEX" if m.kind == "index" else "MATERIALIZED VIEW" if m.kind == "materialized view" else "TABLE"
            lines.append(f"ALTER {verb} {m.name} SET TABLESPACE {_space(steps, m.target)};")
    if steps["temp"]:
        lines += ["", f"-- temp files to {steps['temp']}: nothing is copied; new sorts and hashes spill there",
                  f"ALTER DATABASE :\"target_db\" SET temp_tablespaces = '{_space(steps, steps['temp'])}';"]
    if steps["wal"]:
        src, dst, nbytes = steps["wal"]
        lines += ["", f"-- The WAL to {dst} ({devices.get(dst, '?')}): SQL cannot move it. With the server stopped, "
                      f"move pg_wal ({fmt_bytes(nbytes)} at the end of the run) and leave a link:",
                  "--   pg_ctl -D \"$PGDATA\" stop -m fast",
                  f"--   mv \"$PGDATA/pg_wal\" /mnt/{dst}/pg_wal && ln -s /mnt/{dst}/pg_wal \"$PGDATA/pg_wal\"",
                  "--   pg_ctl -D \"$PGDATA\" start"]
    lines += ["", f"-- {len(steps['moves'])} moves, {fmt_bytes(sum(m.bytes for m in steps['moves']))} copied, "
                  + (f"about {_t(total)} of copying in all" if known else "some of unknown time")]
    return "\n".join(lines) + "\n"


def doc(steps: dict) -> dict:
    moves = steps["moves"]
    secs = [m.seconds for m in moves]
    time_text = f", about {sum(secs):,.1f} s of copying" if moves and None not in secs else ""
    extra = (" and the WAL (with the server stopped)" if steps["wal"] else "") + \
        (", temp's tablespace" if steps["temp"] else "")
    made = len(steps["new_devices"])
    summary = (f"migration.sql: {made} tablespace{'' if made == 1 else 's'} to make, {len(moves)} "
               f"move{'' if len(moves) == 1 else 's'} of {fmt_bytes(sum(m.bytes for m in moves))}{time_text}{extra}; "
               "each holds a lock while it copies")
    return {"file": "migration.sql", "summary": summary,
            "moves": [{"name": m.name, "kind": m.kind, "bytes": m.bytes, "from": m.source, "to": m.target,
                       "seconds": m.seconds, "lock": m.lock()} for m in moves],
            "new_devices": steps["new_devices"], "temp": steps["temp"], "default": list(steps["default"]),
            "wal": {"from": steps["wal"][0], "to": steps["wal"][1], "bytes": steps["wal"][2]} if steps["wal"] else None}


def recorded_placement(rec):
    engine = engines.get(rec.lab.engine)
    placed = rec.lab.placement
    return engine.make_placement({r: placed.get(r, placed["data"]) for r in engine.roles},
                                 dict(placed.get("objects") or {}))


def write(folder, rec, cands: list[Candidate], then, profiles: dict[str, Profile], title: str) -> dict:
    """The migration script in the advice's folder (PostgreSQL's migration.sql, MariaDB's migration.sh);
    its moves as a document, with the file's name and a line that sums it up."""
    engine = engines.get(rec.lab.engine)
    now = recorded_placement(rec)
    then = engine.make_placement({**now.roles, **then.roles}, dict(then.objects))
    profiles = {**dict(rec.lab.devices), **profiles}
    names = {n: p.name for n, p in profiles.items()}
    if engine.name == "mariadb":
        from dbtier.advisor import migration_innodb
        steps = migration_innodb.plan(cands, now, then, profiles, engine.system_part)
        (folder / "migration.sh").write_text(migration_innodb.script(steps, names, title))
        return migration_innodb.doc(steps)
    steps = plan(cands, now, then, profiles)
    (folder / "migration.sql").write_text(script(steps, names, title))
    return doc(steps)
