"""Which of a run's settings and devices are not crash-safe, in a DBA's words: what a report says next
to the speed-up such a setting buys (the measured answer is `dbtier crash`'s). MariaDB's from its
documentation of innodb_flush_log_at_trx_commit and innodb_doublewrite.

From PostgreSQL's documentation (runtime-config-wal, wal.sgml): fsync = off risks "unrecoverable data
corruption"; full_page_writes = off is safe only where the storage never tears an 8 kB page;
synchronous_commit = off loses the last commits, up to three times wal_writer_delay, without
corruption; and a drive whose volatile write cache ignores flushes loses what it acknowledged."""

from __future__ import annotations

from dbtier.crash.devices import MIB, volatile_bytes
from dbtier.engines.mariadb import PAGE_BYTES as INNODB_PAGE_BYTES
from dbtier.engines.postgres import PAGE_BYTES

OFF = ("off", "false", "0", "no")


def _setting(settings: dict, name: str) -> str:
    return str(settings.get(name, "")).strip().strip("'").lower()


def _innodb_risks(settings: dict, devices: list[dict]) -> list[str]:
    """MariaDB's (its settings as the lab keeps them, with `-`): innodb_flush_log_at_trx_commit = 0
    writes and flushes the redo log once a second, = 2 writes it at each commit and flushes it once a
    second, so a power cut loses about that second's commits (innodb_flush_log_at_timeout); without the
    doublewrite buffer a 16 KiB page torn by the device cannot be repaired by the redo log."""
    out = []
    commit = _setting(settings, "innodb-flush-log-at-trx-commit")
    if commit in ("0", "2"):
        how = "written and flushed" if commit == "0" else "flushed"
        out.append(f"innodb_flush_log_at_trx_commit = {commit}: the redo log is {how} once a second, so a power "
                   "cut loses up to about a second of acknowledged commits")
    tearing = [d for d in devices if d.get("kind") != "real"
               and (d.get("params") or {}).get("atomic_write_kib", 8) * 1024 < INNODB_PAGE_BYTES]
    if _setting(settings, "innodb-doublewrite") in OFF and tearing:
        out.append(f"innodb_doublewrite = off on {', '.join(d['name'] for d in tearing)}, which can tear a 16 KiB "
                   "page: a power cut can leave pages half written, which InnoDB cannot recover")
    return out


def risks(lab: dict) -> list[str]:
    """lab: a result's `lab` (its engine, settings and devices). Each risk as a clause."""
    settings = lab.get("settings") or {}
    if lab.get("engine") == "mariadb":
        return _innodb_risks(settings, lab.get("devices") or []) + _volatile(lab)
    out = []
    if _setting(settings, "fsync") in OFF:
        out.append("fsync = off: a power cut can lose acknowledged commits and corrupt the database")
    if _setting(settings, "synchronous_commit") in OFF:
        out.append("synchronous_commit = off: a power cut loses the last commits acknowledged (up to 3 x "
                   "wal_writer_delay)")
    tearing = [d for d in lab.get("devices") or [] if d.get("kind") != "real"
               and (d.get("params") or {}).get("atomic_write_kib", 8) * 1024 < PAGE_BYTES]
    if _setting(settings, "full_page_writes") in OFF and tearing:
        out.append(f"full_page_writes = off on {', '.join(d['name'] for d in tearing)}, which can tear an 8 KiB "
                   "page: a power cut can leave pages half written")
    return out + _volatile(lab)


def _volatile(lab: dict) -> list[str]:
    """A drive that ignores flushes, whatever the engine."""
    out = []
    for d in lab.get("devices") or []:
        p = d.get("params") or {}
        try:
            volatile = volatile_bytes(d.get("kind"), p) if p.get("flush_honoured", 1) < 0.5 else 0
        except KeyError:  # a result recorded before devices had their durability
            volatile = 0
        if volatile:
            out.append(f"{d['name']} ignores flushes with {volatile / MIB:g} MiB of volatile write cache: a power "
                       "cut can lose acknowledged commits")
    return out


def sentence(lab: dict, who: str = "") -> str | None:
    """One sentence for a verdict, or None when nothing is at risk."""
    found = risks(lab)
    if not found:
        return None
    return f"Not crash-safe{' ' + who if who else ''}: " + "; ".join(found) + " ('dbtier crash' measures it)."
