"""Machine-readable results: versioned, and written atomically (temp name, then rename)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from pathlib import Path

from dbtier.errors import UserError

#: 2: the published schema's key names (snake_case, units as suffixes); 1 had labels as keys
SCHEMA_VERSION = 2


def check_version(doc: dict, path) -> None:
    """A document of another schema_version is refused, not misread: a renamed key read under its new
    name would be silently missing."""
    found = doc.get("schema_version")
    if found != SCHEMA_VERSION:
        age = "an older" if isinstance(found, int) and found < SCHEMA_VERSION else "another"
        raise UserError(f"{path} was written by {age} dbtier (schema_version {found}, this one reads "
                        f"{SCHEMA_VERSION}); run it again with this dbtier")


def _clean(value):
    """JSON has no NaN or infinity: such figures become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def dumps(doc: dict) -> str:
    """The document as written: schema_version first, NaN as null, checked against the published
    schema when the environment asks (report/schema.py)."""
    from dbtier.report import schema

    clean = _clean({"schema_version": SCHEMA_VERSION, **doc})
    schema.check_if_asked(clean)
    return json.dumps(clean, indent=2)


def write(path: Path, doc: dict) -> None:
    """Into an existing folder (none is made: a --json path's folder is checked before a run, not created
    after it, and a run directory is made by run_dir)."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes it private; a result is meant to be read
        with os.fdopen(fd, "w") as out:
            out.write(dumps(doc) + "\n")
        os.replace(tmp, path)
    except OSError as exc:  # the folder filled up or turned read-only meanwhile
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
