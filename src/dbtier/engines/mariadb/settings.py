"""A MariaDB lab's server settings: the user's `--set NAME=VALUE` (mariadbd's options, `-` and `_` alike),
with what the lab decides refused in one line: who can reach the server, where its files are, and
how InnoDB does its I/O (io_uring, or a redo log mapped into memory, would go around the interposer)."""

from __future__ import annotations

import re

from dbtier.errors import UserError

#: Settings the lab decides, each with why (the name as mariadbd spells it, with `-`).
LAB_OWNED = {
    "port": "the lab listens on its own unix socket only, never TCP",
    "bind-address": "the lab listens on its own unix socket only, never TCP",
    "skip-networking": "the lab listens on its own unix socket only, never TCP",
    "networking": "the lab listens on its own unix socket only, never TCP",
    "extra-port": "the lab listens on its own unix socket only, never TCP",
    "socket": "the lab's socket is in a folder private to the servers' user",
    "datadir": "the lab lays out InnoDB's files itself (--place)",
    "basedir": "the lab runs the MariaDB it found (--mariadb-bin)",
    "innodb-data-home-dir": "the lab lays out InnoDB's files itself (--place data=...)",
    "innodb-log-group-home-dir": "the lab lays out InnoDB's files itself (--place log=...)",
    "innodb-undo-directory": "the lab lays out InnoDB's files itself (--place undo=...)",
    "innodb-temp-data-file-path": "the lab lays out InnoDB's files itself (--place temp=...)",
    "tmpdir": "the lab lays out InnoDB's files itself (--place temp=...)",
    "log-bin": "the lab turns the binary log on where --place binlog=... puts it",
    "pid-file": "the lab writes nothing outside its own folder",
    "log-error": "the lab keeps the server's log in its own folder",
    "plugin-dir": "the lab loads no plugins from elsewhere",
    "plugin-load": "the lab loads no plugins from elsewhere",
    "plugin-load-add": "the lab loads no plugins from elsewhere",
    "init-file": "the lab runs no SQL file at the server's start",
    "user": "the lab runs the server as its own user",
    "performance-schema": "the lab's measurements read performance_schema",
    "innodb-use-native-aio": "the lab's InnoDB does its I/O through libaio, which the interposer emulates",
    "innodb-log-file-mmap": "a redo log mapped into memory is written with stores no interposer sees",
    "innodb-flush-method": "the lab sets it from --io-mode (direct: O_DIRECT, dsync: O_DSYNC, buffered: fsync)",
    "innodb-buffer-pool-size": "the lab sets it from --cache",
    "innodb-buffer-pool-dump-at-shutdown": "a cold start begins with an empty buffer pool (--cache-state)",
    "innodb-buffer-pool-load-at-startup": "a cold start begins with an empty buffer pool (--cache-state)",
}
AIO_MODES = ("aio",)  # innodb_linux_aio: libaio; io_uring's rings go around the interposer
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


def parse_sets(texts) -> dict[str, str]:
    """--set NAME=VALUE (repeatable): any mariadbd option (the server refuses unknown ones as it starts),
    the lab's own refused with why."""
    out: dict[str, str] = {}
    for text in texts:
        name, sep, value = text.partition("=")
        name = name.strip().lower().replace("_", "-")
        value = value.strip()
        if not sep or not _NAME.match(name) or not value:
            raise UserError(f"--set {text!r}: expected NAME=VALUE, for example --set innodb_io_capacity=2000")
        if any(not ch.isprintable() for ch in value):
            raise UserError(f"--set {name}: the value must be one line of printable characters")
        bare = name.removeprefix("loose-").removeprefix("skip-") if name != "skip-networking" else name
        if name == "innodb-linux-aio" and value.lower() not in AIO_MODES:
            raise UserError(f"--set innodb_linux_aio={value}: dbtier runs innodb_linux_aio=aio (libaio); io_uring "
                            "would go around the interposer, so its I/O would be neither emulated nor counted")
        if name in LAB_OWNED or bare in LAB_OWNED:
            raise UserError(f"--set {name}: {LAB_OWNED.get(name) or LAB_OWNED[bare]}")
        if name.startswith(("ssl", "defaults-", "no-defaults")):
            raise UserError(f"--set {name}: the lab reads no other configuration and takes no TLS")
        out[name] = value
    return out


def checked(sets: dict[str, str]) -> dict[str, str]:
    """Settings given as a mapping (a library caller's), checked as --set would check them."""
    return parse_sets([f"{k}={v}" for k, v in sets.items()])

