"""`orbit dev`: everything in one process on an embedded SQLite file."""

from __future__ import annotations

import contextlib
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from orbit.database import open_engine
from orbit_store import migrate

out = Console()


def dev(
    db: Annotated[Path, typer.Option("--db", help="SQLite file to keep Orbit's state in.")] = Path(
        ".orbit/dev.db"
    ),
) -> None:
    """Run Orbit locally on an embedded SQLite file (no MySQL, no cluster)."""
    db.parent.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{db}"
    engine = open_engine(url)
    report = migrate.upgrade(engine)
    out.print(f"orbit dev: state in {db} (schema {report.after}); press Ctrl-C to stop")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    engine.dispose()
    out.print("orbit dev: stopped")
