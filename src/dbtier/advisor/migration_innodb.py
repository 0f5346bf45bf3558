"""What a DBA runs to make an advice true on MariaDB: a shell script over the mariadb client. InnoDB
puts a table's file apart only as it creates it (DATA DIRECTORY; ALTER TABLE ignores the clause), so
each table whose device changes is rebuilt: created again under another name where it goes, its rows
copied, the two swapped by name in one RENAME. The data directory (the system tablespace and every
table not placed apart), the redo log, the undo tablespaces and temp are the server's: their steps
are written out for the server stopped. Each copy says its bytes and its time, estimated from the
device models it reads from and writes to (its redo log's too: every copied row is logged)."""

from __future__ import annotations

import re

from dbtier.advisor.candidates import Candidate
from dbtier.advisor.copying import Move, copy_seconds, duration as _t
from dbtier.devices.profile import Profile
from dbtier.units import fmt_bytes

#: the server's settings that say where each role's files are (they take effect at a restart)
ROLE_SETTING = {"data": "datadir", "log": "innodb_log_group_home_dir", "undo": "innodb_undo_directory",
                "temp": "tmpdir (and innodb_temp_data_file_path, relative to datadir)", "binlog": "log_bin"}
#: what each role's move takes with the server stopped
ROLE_FILES = {"data": "the data directory (ibdata1, the doublewrite buffer, every table not placed apart)",
              "log": "the redo log (ib_logfile0)", "undo": "the undo tablespaces (undo001...)",
              "temp": "nothing to copy: the temporary tablespace is made again at start",
              "binlog": "the binary logs and their index"}

#: the shell function each table's move calls (the lab's own move does the same: engines/mariadb/lab.py)
REBUILD = r"""# rebuild TABLE [FOLDER]: the table (of $DB, or DATABASE.TABLE) made again in FOLDER (none: the data
# directory), its rows copied, the copy swapped in by name. A table with foreign keys is left for you.
rebuild() {
  case "$1" in *.*) db="${1%%.*}"; t="${1#*.}";; *) db="$DB"; t="$1";; esac
  fk=$($MARIADB -N -B -e "SELECT count(*) FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = '$db' AND (TABLE_NAME = '$t' OR REFERENCED_TABLE_NAME = '$t')")
  if [ "$fk" != 0 ]; then echo "$1 has foreign keys: move it by hand" >&2; return 1; fi
  ddl=$($MARIADB -N -B -r -e "SHOW CREATE TABLE \`$db\`.\`$t\`" | cut -f2- | sed -e "s/ DATA DIRECTORY='[^']*'//I" -e "1s/^CREATE TABLE \`$t\`/CREATE TABLE \`${t}__moving\`/")
  if [ -z "$ddl" ]; then echo "$1: SHOW CREATE TABLE said nothing; is it a table of $db?" >&2; return 1; fi
  where=""; if [ -n "${2:-}" ]; then where=" DATA DIRECTORY = '$2'"; fi
  $MARIADB "$db" -e "$ddl$where; INSERT INTO \`${t}__moving\` SELECT * FROM \`$t\`; RENAME TABLE \`$t\` TO \`${t}__moved\`, \`${t}__moving\` TO \`$t\`; DROP TABLE \`${t}__moved\`;"
}
"""


def folder_var(device: str) -> str:
    """The shell variable holding a device's folder (a device name may hold '-', a variable's not)."""
    return "DIR_" + re.sub(r"[^A-Za-z0-9_]", "_", device).upper()


def _lock() -> str:
    return "writes to it must wait until the swap (run it in a quiet hour: the copy reads it as it was)"


def plan(cands: list[Candidate], now, then, profiles: dict[str, Profile], system: str) -> dict:
    """The table rebuilds and the server's moves from placement `now` to `then`. When the data directory
    moves, a table bound elsewhere is rebuilt there first (else it would go with it), and one bound for
    the new data directory from a folder of its own is rebuilt into it after the server's moves."""
    log_after = profiles.get(then.roles["log"])
    data_moves = now.roles["data"] != then.roles["data"]
    before, after = [], []
    for c in cands:
        if c.kind != "table":
            continue
        src, dst = now.device_for(c.name, "table"), then.device_for(c.name, "table")
        apart_now, apart_then = src != now.roles["data"], dst != then.roles["data"]
        if not apart_now and not apart_then and (data_moves or src == dst):
            continue  # in the data directory, and stays in it
        if src == dst and apart_now and apart_then:
            continue  # in its own folder, which stays
        seconds = copy_seconds(c.bytes, profiles.get(src), profiles.get(dst), log_after)
        m = Move(c.name, "table", c.bytes, src, dst, seconds)
        (after if data_moves and not apart_then else before).append(m)
    before.sort(key=lambda m: -m.bytes)
    server = []
    for role in ("data", "log", "undo", "temp", "binlog"):
        if role in now.roles and now.roles[role] != then.roles[role]:
            size = sum(c.bytes for c in cands if c.name == role or (role == "data" and (
                c.name == system or (c.kind == "table" and then.device_for(c.name, "table") == then.roles["data"]
                                     and now.device_for(c.name, "table") == now.roles["data"]))))
            server.append({"role": role, "from": now.roles[role], "to": then.roles[role], "bytes": size,
                           "setting": ROLE_SETTING[role], "files": ROLE_FILES[role]})
    folders = sorted({m.target for m in before + after if m.target != then.roles["data"]} | {s["to"] for s in server})
    return {"before": before, "after": after, "server": server, "folders": folders, "data": then.roles["data"]}


def _rebuilds(steps: dict, moves: list[Move], n0: int, note: str = "") -> list[str]:
    lines = []
    for i, m in enumerate(moves, n0):
        est = "time unknown (a real device has no model)" if m.seconds is None else f"about {_t(m.seconds)}"
        folder = "" if m.target == steps["data"] else f' "${folder_var(m.target)}"'
        lines += [f"  # move {i}: {m.name} (table, {fmt_bytes(m.bytes)}) from {m.source} to {m.target}{note}: {est}; "
                  f"{_lock()}", f"  rebuild {m.name}{folder}"]
    return lines


def script(steps: dict, devices: dict[str, str], title: str) -> str:
    """The shell script: devices maps each device name to what it is (its profile, as -d gives it)."""
    moves = steps["before"] + steps["after"]
    lines = ["#!/bin/sh", f"# {title}",
             "# Made by dbtier from a recorded run. Read it before you run it: each table is rebuilt where it goes,",
             "# and writes to it must wait until its swap. Set the lines below (or export them), then: sh migration.sh",
             "set -eu", 'DB="${DB:-yourdb}"              # the database',
             'MARIADB="${MARIADB:-mariadb}"    # the client, with whatever it needs to log in']
    for d in steps["folders"]:
        lines.append(f'{folder_var(d)}="${{{folder_var(d)}:-/mnt/{d}/mariadb}}"    # {d}: {devices.get(d, "?")}; '
                     "a folder on it, the server's OS user's")
    lines += ["", REBUILD.rstrip("\n"), "", 'if [ "${1:-}" != after ]; then']
    lines += _rebuilds(steps, steps["before"], 1) or ["  :  # no table moves before the server's"]
    if steps["server"]:
        lines.append('  echo "now the server\'s moves, with it stopped (below); then: sh migration.sh after"')
    lines += ["  exit 0", "fi"]
    lines += _rebuilds(steps, steps["after"], len(steps["before"]) + 1, " (after the data directory's move)")
    for s in steps["server"]:
        move_files = "" if s["role"] == "temp" else f"move them to ${folder_var(s['to'])}, "
        lines += ["", f"# the server's: {s['role']} to {s['to']} ({devices.get(s['to'], '?')}): {s['files']}, "
                      f"{fmt_bytes(s['bytes'])} at the end of the run.",
                  f"#   With the server stopped, {move_files}set {s['setting']} to a folder on {s['to']} in its "
                  "configuration, and start it."]
    secs = [m.seconds for m in moves]
    took = f"about {_t(sum(secs))} of copying in all" if None not in secs else "some of unknown time"
    lines += ["", f"# {len(moves)} table{'s' if len(moves) != 1 else ''} rebuilt, "
                  f"{fmt_bytes(sum(m.bytes for m in moves))} copied, {took}"
                  + (f"; {len(steps['server'])} of the server's moves" if steps["server"] else "")]
    return "\n".join(lines) + "\n"


def doc(steps: dict) -> dict:
    moves = steps["before"] + steps["after"]
    secs = [m.seconds for m in moves]
    time_text = f", about {sum(secs):,.1f} s of copying" if moves and None not in secs else ""
    server = steps["server"]
    summary = (f"migration.sh: {len(moves)} table{'' if len(moves) == 1 else 's'} rebuilt where "
               f"{'it goes' if len(moves) == 1 else 'they go'}, {fmt_bytes(sum(m.bytes for m in moves))}{time_text}"
               + (f"; {', '.join(s['role'] for s in server)} moved with the server stopped" if server else "")
               + ("; writes to each table wait until its swap" if moves else ""))
    return {"file": "migration.sh", "summary": summary,
            "moves": [{"name": m.name, "kind": m.kind, "bytes": m.bytes, "from": m.source, "to": m.target,
                       "seconds": m.seconds, "lock": _lock()} for m in moves],
            "server": server, "folders": steps["folders"]}
