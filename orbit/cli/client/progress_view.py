"""How a task's progress looks: one line in `orbit task get`, and in `orbit task watch` a live
bar on a terminal (rich) or a line per change where output goes to a file or a pipe."""

from __future__ import annotations

import sys
from typing import Any

import typer

from orbit.cli.output import cell
from orbit_sdk import Progress


def progress_text(progress: Progress) -> str:
    """``75%  writing  {"rows":750}`` -- what is known of fraction, message and details."""
    parts = []
    if progress.fraction is not None:
        parts.append(f"{progress.fraction * 100:.0f}%")
    if progress.message:
        parts.append(progress.message)
    if progress.details:
        parts.append(cell(progress.details))
    return "  ".join(parts) or "reported"


class ProgressWatch:
    """`task watch`'s progress: shown when it changes, beside the event lines."""

    def __init__(self) -> None:
        self.terminal = sys.stdout.isatty()
        self._seen: Any = None
        self._bar: Any = None  # rich.progress.Progress once a fraction arrives on a terminal
        self._bar_task: Any = None

    def echo(self, line: str) -> None:
        """An event line: above the live bar when there is one."""
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False)
        else:
            typer.echo(line)

    def show(self, progress: Progress | None) -> None:
        if progress is None or progress.at == self._seen:
            return
        self._seen = progress.at
        if not self.terminal:
            typer.echo(f"{cell(progress.at)}  progress  {progress_text(progress)}")
            return
        if self._bar is None:
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

            self._bar = Progress(
                TextColumn("{task.description}"), BarColumn(), TaskProgressColumn()
            )
            self._bar_task = self._bar.add_task("", total=1.0)
            self._bar.start()
        description = " ".join(
            text
            for text in (progress.message, cell(progress.details) if progress.details else "")
            if text
        )
        update: dict[str, Any] = {"description": description}
        if progress.fraction is not None:
            update["completed"] = progress.fraction
        self._bar.update(self._bar_task, **update)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
