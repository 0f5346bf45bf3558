"""Progress of long work on the terminal (rich), behind the workloads' Progress protocol."""

from __future__ import annotations

import contextlib

from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from dbtier.workloads.base import QuietProgress


class RichProgress:
    def __init__(self, progress: Progress, prefix: str = ""):
        self._p = progress
        self._prefix = prefix
        self._task = None

    def phase(self, text: str, total: int | None = None) -> None:
        if self._task is not None:
            self._p.remove_task(self._task)
        self._task = self._p.add_task(f"{self._prefix}{text}", total=total)

    def advance(self, n: int = 1) -> None:
        if self._task is not None:
            self._p.advance(self._task, n)


@contextlib.contextmanager
def progress_for(console, quiet: bool, prefix: str = ""):
    if quiet or not console.is_terminal:
        yield QuietProgress()
        return
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as p:
        yield RichProgress(p, prefix)
