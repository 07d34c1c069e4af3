"""Putting due tasks that hold no permit on their path: a newly due SCHEDULED task, or a
BLOCKED_GATE task whose gate opened. Closed gate → BLOCKED_GATE; a concurrency key → a permit
(READY) while the key has room, else BLOCKED_KEY, in priority order; otherwise READY.

The caller holds the tasks' rows (and their gates shared or exclusively); key rows are locked
here, in key order (lock order: gate → task → key).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from orbit_store.pulse.limits import semaphores
from orbit_store.pulse.limits.paths import move_path
from orbit_store.pulse.model import WaitPath


def place_due(
    conn: sa.Connection,
    namespace: str,
    rows: list[Any],
    *,
    from_path: WaitPath,
    gate_open: Callable[[str | None], bool],
    now: dt.datetime,
) -> dict[WaitPath, list[str]]:
    """Place ``rows`` (id, gate_id, concurrency_key, priority, available_at); returns the ids
    that went to each path."""
    placed: dict[WaitPath, list[str]] = defaultdict(list)
    by_key: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        if not gate_open(row.gate_id):
            placed[WaitPath.BLOCKED_GATE].append(row.id)
        elif row.concurrency_key is None:
            placed[WaitPath.READY].append(row.id)
        else:
            by_key[row.concurrency_key].append(row)
    for key in sorted(by_key):
        waiting = sorted(by_key[key], key=lambda r: (r.priority, r.available_at))
        room = semaphores.lock(conn, namespace, key).free
        granted = [r.id for r in waiting[:room]]
        placed[WaitPath.READY] += granted
        placed[WaitPath.BLOCKED_KEY] += [r.id for r in waiting[room:]]
        semaphores.take_permits(conn, namespace, key, granted, now)
    for path, ids in placed.items():
        if path is not from_path:
            move_path(conn, ids, from_path, path)
    return placed
