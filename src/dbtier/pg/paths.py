"""What a PostgreSQL file is, from its path. The grammar is C's (native/iotap/pgpath.c), the one the
interposer uses; this name stays for the modules that import it from here."""

from __future__ import annotations

from dbtier.devices.native import pg_path as classify

__all__ = ["classify"]
