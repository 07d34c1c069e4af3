"""Concurrency keys as semaphores (seed §3 "同业务键的并发限制"; Solid Queue's semaphores).

A key row holds the limit in force (``permit_limit``) and how many permits are held (``held``).
A task with a key holds a permit from the moment it is READY until its attempt ends or it leaves
the claim path (``paths.holds_permit``); a due task that finds no free permit waits on the
BLOCKED_KEY path. Every release hands the freed permits to the next blocked tasks of the key
(priority, then due time) in the same transaction, so claims never look at keys and a saturated
key never stands in front of other tasks.

The limit belongs to the key, not to each task: the newest declared limit wins (a submission
that names one, or its queue's default). Raising it releases blocked tasks at once; lowering it
never revokes a permit already held (a running handler cannot be recalled) — no new permit is
granted until ``held`` falls below the new limit.

Lock order: key rows come after task rows and, when a transaction needs several, in key order.
A task's permit row is only touched under that task's row lock. Blocked tasks are taken with
SKIP LOCKED: a locked one is being changed by its own transaction (cancel, deadline, gate).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.db import force_index, insert_or_lock
from orbit_store.pulse.limits.paths import move_path
from orbit_store.pulse.model import WaitPath
from orbit_store.schema import concurrency_keys, concurrency_permits, tasks


@dataclass(frozen=True)
class Semaphore:
    namespace: str
    key: str
    limit: int
    held: int

    @property
    def free(self) -> int:
        return max(self.limit - self.held, 0)


def _key_row(namespace: str, key: str) -> Any:
    return sa.and_(
        concurrency_keys.c.namespace == namespace, concurrency_keys.c.concurrency_key == key
    )


def lock(conn: sa.Connection, namespace: str, key: str) -> Semaphore:
    """The key row, locked exclusively (it must exist)."""
    row = conn.execute(
        sa.select(concurrency_keys.c.permit_limit, concurrency_keys.c.held)
        .where(_key_row(namespace, key))
        .with_for_update()
    ).one()
    return Semaphore(namespace, key, row.permit_limit, row.held)


def declare(
    conn: sa.Connection, namespace: str, key: str, limit: int | None, now: dt.datetime
) -> Semaphore:
    """Create the key (limit ``limit`` or 1) or lock it; a declared ``limit`` that differs from
    the one in force replaces it, and a raise releases blocked tasks into the new room."""
    values = {
        "namespace": namespace,
        "concurrency_key": key,
        "created_at": now,
        "permit_limit": limit or 1,
        "held": 0,
    }
    insert_or_lock(conn, concurrency_keys, values)
    semaphore = lock(conn, namespace, key)
    if limit is None or limit == semaphore.limit:
        return semaphore
    conn.execute(
        concurrency_keys.update()
        .where(_key_row(namespace, key))
        .values(permit_limit=limit, limit_changed_at=now)
    )
    semaphore = Semaphore(namespace, key, limit, semaphore.held)
    if semaphore.free:
        moved = release_blocked(conn, semaphore, now)
        semaphore = Semaphore(namespace, key, limit, semaphore.held + len(moved))
    return semaphore


def take_permits(
    conn: sa.Connection, namespace: str, key: str, task_ids: list[str], now: dt.datetime
) -> None:
    """Record permits for ``task_ids`` (the caller holds the key row and checked the room)."""
    if not task_ids:
        return
    conn.execute(
        concurrency_permits.insert(),
        [
            {"task_id": t, "namespace": namespace, "concurrency_key": key, "acquired_at": now}
            for t in task_ids
        ],
    )
    conn.execute(
        concurrency_keys.update()
        .where(_key_row(namespace, key))
        .values(held=concurrency_keys.c.held + len(task_ids))
    )


def release(
    conn: sa.Connection, namespace: str, key: str, task_ids: list[str], now: dt.datetime
) -> list[str]:
    """Give back the permits ``task_ids`` hold (their rows are locked by the caller) and hand
    the room to blocked tasks; returns the tasks moved to READY."""
    # By primary key only (a task's permit; MySQL takes no index hint on DELETE).
    delete = concurrency_permits.delete().where(concurrency_permits.c.task_id.in_(task_ids))
    deleted = conn.execute(delete).rowcount
    if not deleted:
        return []
    conn.execute(
        concurrency_keys.update()
        .where(_key_row(namespace, key))
        .values(held=concurrency_keys.c.held - deleted)
    )
    return release_blocked(conn, lock(conn, namespace, key), now)


def release_blocked(conn: sa.Connection, semaphore: Semaphore, now: dt.datetime) -> list[str]:
    """Move up to ``semaphore.free`` BLOCKED_KEY tasks of the key (priority, then due time) to
    READY with a permit each. The caller holds the key row."""
    if not semaphore.free:
        return []
    query = (
        sa.select(tasks.c.id)
        .where(
            tasks.c.namespace == semaphore.namespace,
            tasks.c.wait_path == WaitPath.BLOCKED_KEY.value,
            tasks.c.concurrency_key == semaphore.key,
        )
        .order_by(tasks.c.priority, tasks.c.available_at)
        .limit(semaphore.free)
        .with_for_update(skip_locked=True)
    )
    ids = list(conn.execute(force_index(query, tasks, "ix_tasks_key_waiting")).scalars())
    if ids:
        move_path(conn, ids, WaitPath.BLOCKED_KEY, WaitPath.READY)
        take_permits(conn, semaphore.namespace, semaphore.key, ids, now)
    return ids
