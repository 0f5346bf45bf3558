"""A run directory appears whole or not at all, and a finished measurement is never lost.

It is built in the workspace (a claim's folder) and published when complete: copied (or moved, on
the same file system) under a hidden temporary name in the output folder, then renamed into place.
On error or Ctrl-C it is removed (and the output folder too, if the run made it and it is empty);
the next command removes what a killed one left, since both places are the claim's. If the output
folder cannot take it at the end (it became read-only, or full), the run directory stays in the
workspace, kept, and `failure` says where: the caller prints its report anyway, then that line."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

from dbtier import lifecycle
from dbtier.errors import UserError
from dbtier.report import outputs
from dbtier.workspace import Claim, Workspace


def _final_name(output: Path, stem: str) -> Path:
    base = output / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = base, 2
    while path.exists():
        path, n = Path(f"{base}-{n}"), n + 1
    return path


class _Holder:
    def __init__(self, path: Path):
        self.path = path
        self.final: Path | None = None
        self.failure: str | None = None  # why the results are in the workspace, not in the output folder

    def check(self) -> None:
        """After the caller reported the run: the one line saying the results could not be published."""
        if self.failure:
            raise UserError(self.failure)


def _copy_into(source: Path, dest: Path) -> None:
    """source's files into dest (which exists), failing at the first OSError as it is (shutil.copytree
    would gather them all into one without its errno)."""
    for entry in os.scandir(source):
        target = dest / entry.name
        if entry.is_dir(follow_symlinks=False):
            os.mkdir(target, 0o755)
            _copy_into(Path(entry.path), target)
        else:
            shutil.copy2(entry.path, target, follow_symlinks=False)


def _publish(stage: Path, output: Path, stem: str, claim: Claim) -> Path:
    made = outputs.make_dirs(output)
    tmp = None
    try:
        tmp = claim.outside(output / claim.child_name(stem, hidden=True, suffix=".partial"))
        if os.stat(stage).st_dev == os.stat(tmp).st_dev:
            for entry in os.scandir(stage):
                os.rename(entry.path, tmp / entry.name)
        else:
            _copy_into(stage, tmp)
        os.chmod(tmp, 0o755)
        final = _final_name(output, stem)
        os.rename(tmp, final)
        claim.forget(tmp)
        return final
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        outputs.remove_if_empty(made)
        raise


@contextlib.contextmanager
def run_dir(output: Path, stem: str, workspace: Workspace):
    """Yields a holder whose `.path` is the folder to fill; then the folder is published as
    OUTPUT/STEM-<time> (`.final`), or kept in the workspace with `.failure` saying so."""
    output = outputs.check_dir(output, "--output")
    claim = workspace.claim("results")
    kept = False
    try:
        holder = _Holder(claim.inside(stem, mode=0o700))
        try:
            yield holder
        except OSError as exc:  # the workspace itself could not take a file
            raise UserError(f"cannot write the results in the workspace {claim.path}: {exc.strerror}") from None
        with lifecycle.shielded():
            try:
                holder.final = _publish(holder.path, output, stem, claim)
            except OSError as exc:
                claim.keep()
                kept = True
                holder.final = holder.path
                holder.failure = (f"cannot write the results into {output} ({exc.strerror}); they are kept in "
                                  f"{holder.path}: copy them from there, then remove {claim.path}")
    except BaseException:
        with lifecycle.shielded():
            if not kept:
                claim.remove()
        raise
    if not kept:
        with lifecycle.shielded():
            claim.remove()
