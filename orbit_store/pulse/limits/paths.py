"""Wait paths: every WAITING task is on exactly one (``tasks.wait_path``; users see WAITING).

- READY: due, its gate open, holding a permit when it has a concurrency key — the claim path;
- SCHEDULED: due later; promoted when it falls due (``claim/promote.py``, also at the start of
  claims);
- BLOCKED_GATE: its execution gate is closed; ``gates.set_gate`` moves it back when it opens;
- BLOCKED_KEY: its concurrency key has no free permit; a release hands it one (``semaphores``).

Claims read only READY rows through narrow indexes, so what is blocked or in the future costs a
claim nothing (the issue's head-of-line blocking). Each path change happens in the transaction
that causes it: the state transition, the permit release, the gate flip, the promotion.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from orbit_store.db import by_primary_key
from orbit_store.pulse.model import TaskState, WaitPath
from orbit_store.schema import tasks


def holds_permit(state: str, wait_path: str | None, concurrency_key: str | None) -> bool:
    """A task with a concurrency key holds a permit while READY, LEASED or RUNNING."""
    if concurrency_key is None:
        return False
    if state == TaskState.WAITING.value:
        return wait_path == WaitPath.READY.value
    return state in (TaskState.LEASED.value, TaskState.RUNNING.value)


def reentry_path(available_at: dt.datetime, now: dt.datetime, gate_open: bool) -> WaitPath:
    """The path of a task that comes back to WAITING from LEASED or RUNNING. It still holds its
    permit (if it has a key), which it keeps only on the READY path."""
    if available_at > now:
        return WaitPath.SCHEDULED
    return WaitPath.READY if gate_open else WaitPath.BLOCKED_GATE


def move_path(conn: sa.Connection, ids: list[str], from_path: WaitPath, to_path: WaitPath) -> None:
    """Move locked WAITING tasks between paths (internal: no state change, no event)."""
    if not ids:
        return
    update = (
        tasks.update()
        .where(
            tasks.c.id.in_(ids),
            tasks.c.state == TaskState.WAITING.value,
            tasks.c.wait_path == from_path.value,
        )
        .values(wait_path=to_path.value)
    )
    moved = conn.execute(by_primary_key(update, tasks)).rowcount
    if moved != len(ids):
        raise RuntimeError(f"moved {moved} of {len(ids)} locked tasks off {from_path}")
