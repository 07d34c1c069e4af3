"""The task_events rows of a transaction that writes them in several parts, inserted together.

A worker's cycle (``cycle``) reports finished attempts and then grants new ones; each part
writes its own task_events rows. Inside :func:`one_events_insert` the set paths
(``batch_moves``, ``claim.grant``) hand their rows here, and the rows go to the database in one
multi-row INSERT when the body returns — in the same transaction, so every transition still
commits with its event (invariant 4). Inserts come last in the lock order (``pulse/__init__.py``,
order 10): the rows are written after the claim's locks instead of between the two parts, which
is where that order puts them. When the body raises, the rows are dropped with the transaction
that is rolled back. Only set paths, which run outside the per-item savepoints of a batch, hand
rows here; a single item's events (``transitions.append_event``) are inserted at once, so a
savepoint rolled back takes them with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from orbit_store.pulse.state import inserts

_INFO_KEY = "orbit_task_events_pending"


def insert_task_events(conn: sa.Connection, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows`` now, or — inside :func:`one_events_insert` — with the others at its
    end. Every row names every column (``details`` too), so the rows share one statement."""
    pending = conn.info.get(_INFO_KEY)
    if isinstance(pending, list):
        pending.extend(rows)
    elif rows:
        conn.execute(inserts.TASK_EVENTS, rows)


@contextmanager
def one_events_insert(conn: sa.Connection) -> Iterator[None]:
    """Collect the task_events rows the body writes; insert them in one statement at its end.
    Inside another ``one_events_insert`` of the same connection, the outer one inserts."""
    if isinstance(conn.info.get(_INFO_KEY), list):
        yield
        return
    pending: list[dict[str, Any]] = []
    conn.info[_INFO_KEY] = pending
    try:
        yield
    finally:
        del conn.info[_INFO_KEY]
    if pending:
        conn.execute(inserts.TASK_EVENTS, pending)
