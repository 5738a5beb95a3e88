"""Progress on long command-line work: rich progress bars on stderr.

Shown only when stderr is a terminal and the command was not given ``--quiet``;
``GBX_PROGRESS=always`` forces them on (captured output, tests), ``never`` off. Results
go to stdout untouched either way, so pipes and JSON readers see the same bytes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

PROGRESS_ENV = "GBX_PROGRESS"


def progress_enabled(quiet: bool = False) -> bool:
    """Whether to draw progress: not ``--quiet``, and stderr a terminal (or forced)."""
    mode = os.environ.get(PROGRESS_ENV, "auto")
    if quiet or mode == "never":
        return False
    return mode == "always" or sys.stderr.isatty()


def stderr_console() -> Console:
    """The console progress and summaries draw on (stderr; a terminal when forced)."""
    forced = os.environ.get(PROGRESS_ENV) == "always"
    return Console(stderr=True, force_terminal=True if forced else None)


class Task:
    """One progress line; ``advance`` moves it, ``update`` changes its text or total."""

    def __init__(self, progress: Progress | None, task_id: Any) -> None:
        self._progress = progress
        self._id = task_id

    def advance(self, amount: float = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._id, amount)

    def update(self, *, description: str | None = None, total: float | None = None) -> None:
        if self._progress is not None:
            self._progress.update(self._id, description=description, total=total)


@contextmanager
def progress(description: str, total: float | None = None, *,
             quiet: bool = False) -> Iterator[Task]:
    """A progress bar (``total`` known) or a spinner with elapsed time (``total`` None)."""
    if not progress_enabled(quiet):
        yield Task(None, None)
        return
    columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    columns.append(TimeElapsedColumn())
    # transient=False leaves the finished bar on screen as a record of the work done.
    # stdout stays the command's own (JSON records), not routed through the display.
    with Progress(*columns, console=stderr_console(), redirect_stdout=False,
                  redirect_stderr=False) as bar:
        yield Task(bar, bar.add_task(description, total=total))
