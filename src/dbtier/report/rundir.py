"""A run directory appears whole or not at all: it is built under a hidden temporary name and
renamed into place when complete; on error or Ctrl-C the partial one is removed."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from pathlib import Path


def _final_name(output: Path, stem: str) -> Path:
    base = output / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = base, 2
    while path.exists():
        path, n = Path(f"{base}-{n}"), n + 1
    return path


@contextlib.contextmanager
def run_dir(output: Path, stem: str):
    """Yields a folder to fill; on success it is renamed to OUTPUT/STEM-<time>, whose path is then
    available as `.final` on the yielded holder."""
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{stem}-", suffix=".partial", dir=output))
    holder = _Holder(tmp)
    try:
        yield holder
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    final = _final_name(output, stem)
    tmp.chmod(0o755)
    tmp.rename(final)
    holder.final = final


class _Holder:
    def __init__(self, path: Path):
        self.path = path
        self.final: Path | None = None
