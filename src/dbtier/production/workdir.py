"""Where an imported workload goes: a folder that is new, empty, or a workload directory already (which
is then replaced whole). It is built in a hidden folder beside it and renamed into place, so a failure
or Ctrl-C leaves nothing behind, and a replaced workload is never half old, half new."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from dbtier.errors import UserError
from dbtier.production import capture as capture_mod
from dbtier.report import outputs


def check_output(out: Path, what: str = "-o") -> Path:
    """Refuses a folder that holds other things than a workload (it would be replaced). Returns it absolute."""
    out = outputs.check_dir(out, what)
    if out.is_dir() and any(out.iterdir()) and not (out / capture_mod.META).is_file():
        raise UserError(f"{what} {out}: a folder that holds other files and is not a workload directory; "
                        "give a new or empty folder (or a workload directory to replace)")
    return out


def write_workload(out: Path, capture: capture_mod.Capture) -> Path:
    """Writes the capture into `out` (checked by check_output first), replacing a workload there."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    old = None
    try:
        capture_mod.write(tmp, capture)
        tmp.chmod(0o755)  # mkdtemp makes it private; a workload is meant to be read (and replayed by the lab's user)
        if out.exists() and any(out.iterdir()):
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.rename(out, old / "w")
        os.rename(tmp, out)  # onto an empty folder too
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not out.exists():
            os.rename(old / "w", out)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    capture.path = out
    return out
