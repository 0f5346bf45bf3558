"""A run directory appears whole or not at all: it is built under a hidden temporary name and
renamed into place when complete; on error or Ctrl-C the partial one is removed (and the output
folder too, if the run made it and it is empty). The partial one is a folder of a claim in the
workspace, so the next command removes it if this one is killed outright."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from dbtier import lifecycle
from dbtier.report import outputs
from dbtier.workspace import Workspace


def _final_name(output: Path, stem: str) -> Path:
    base = output / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = base, 2
    while path.exists():
        path, n = Path(f"{base}-{n}"), n + 1
    return path


@contextlib.contextmanager
def run_dir(output: Path, stem: str, workspace: Workspace):
    """Yields a folder to fill; on success it is renamed to OUTPUT/STEM-<time>, whose path is then
    available as `.final` on the yielded holder."""
    output = outputs.check_dir(output, "--output")
    made = outputs.make_dirs(output)
    claim = workspace.claim("results")
    try:
        tmp = claim.outside(output / claim.child_name(stem, hidden=True, suffix=".partial"))
        holder = _Holder(tmp)
        yield holder
        final = _final_name(output, stem)
        tmp.chmod(0o755)
        tmp.rename(final)
        claim.forget(tmp)
        holder.final = final
    except BaseException:
        with lifecycle.shielded():
            claim.remove()
            outputs.remove_if_empty(made)
        raise
    with lifecycle.shielded():
        claim.remove()


class _Holder:
    def __init__(self, path: Path):
        self.path = path
        self.final: Path | None = None
