"""The one way a task changes state: a conditional UPDATE guarded by (state, state_version) whose
affected-row count is checked, plus its task_event — and, for outcomes, its result_event — in the
same transaction (invariants 2, 4).

The same transaction keeps the engine's bookkeeping in step with the state: a task entering
WAITING is put on the wait path its caller chose (``paths``); a concurrency permit the task no
longer holds is released and handed to the key's next blocked task (``semaphores``); a counted
task's quota counters move with it (``quota``). Lock order: the task row (held by the caller),
then key rows, then quota rows, then inserts.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import as_db_time, db_now, utc_now
from orbit_store.db import by_primary_key
from orbit_store.delivery.fanout import fan_out
from orbit_store.ids import new_id
from orbit_store.pulse.limits import quota
from orbit_store.pulse.limits.batch_deferred import count_quota, release_permits
from orbit_store.pulse.limits.paths import holds_permit, reentry_path
from orbit_store.pulse.model import (
    LEGAL_TRANSITIONS,
    OUTCOME_TASK_STATES,
    AttemptOutcome,
    TaskState,
    WaitPath,
)
from orbit_store.pulse.state import inserts
from orbit_store.pulse.state.attempts import finish_attempt
from orbit_store.schema import tasks
from orbit_store.weave.outcomes import record_task_outcome

# Built once: the per-task statements of every transition (values bound per call). Executing a
# prebuilt statement skips SQLAlchemy's construction and cache-key work, much of its Python
# cost per statement.
# All by primary key (lock order, ``db.by_primary_key``): with ``state`` or ``namespace`` in
# the condition the optimizer could otherwise scan a secondary index and lock other tasks.
_LOCK_TASK = by_primary_key(
    sa.select(tasks)
    .where(tasks.c.id == sa.bindparam("task_id"), tasks.c.namespace == sa.bindparam("namespace"))
    .with_for_update(),
    tasks,
)
_LOCK_TASK_NOW = by_primary_key(
    sa.select(tasks, utc_now().label("db_now"))
    .where(tasks.c.id == sa.bindparam("task_id"), tasks.c.namespace == sa.bindparam("namespace"))
    .with_for_update(),
    tasks,
)
_MOVE_TASK = by_primary_key(
    tasks.update().where(
        tasks.c.id == sa.bindparam("where_id"),
        tasks.c.state == sa.bindparam("where_state"),
        tasks.c.state_version == sa.bindparam("where_version"),
    ),
    tasks,
)


class LostRace(Exception):
    """A conditional update matched no row: another transaction changed the task first."""


def lock_task(conn: sa.Connection, namespace: str, task_id: str) -> sa.Row[Any] | None:
    """SELECT … FOR UPDATE the task row (the first lock of every per-task transaction)."""
    return conn.execute(_LOCK_TASK, {"task_id": task_id, "namespace": namespace}).one_or_none()


def lock_task_now(
    conn: sa.Connection, namespace: str, task_id: str
) -> tuple[sa.Row[Any] | None, dt.datetime]:
    """Lock the task row and read the database time in the same round trip."""
    row = conn.execute(_LOCK_TASK_NOW, {"task_id": task_id, "namespace": namespace}).one_or_none()
    now = as_db_time(conn, row.db_now) if row is not None else db_now(conn)
    return row, now


def transition(
    conn: sa.Connection,
    task: sa.Row[Any],
    to_state: TaskState,
    *,
    now: dt.datetime,
    reason: str,
    attempt_id: str | None = None,
    actor: str | None = None,
    details: dict[str, Any] | None = None,
    wait_path: WaitPath | None = None,
    **values: Any,
) -> int:
    """Move ``task`` (as read under lock) to ``to_state``; return the new state_version.
    ``wait_path`` is required exactly when ``to_state`` is WAITING.

    Raises :class:`LostRace` when the row is no longer at the state/version that was read.
    """
    from_state = TaskState(task.state)
    if (from_state, to_state) not in LEGAL_TRANSITIONS:
        raise ValueError(f"illegal transition {from_state} -> {to_state} for task {task.id}")
    if (wait_path is None) is (to_state is TaskState.WAITING):
        raise ValueError(f"a task enters WAITING on a wait path, and only then ({task.id})")
    new_version = int(task.state_version) + 1
    if to_state.is_terminal:
        values.setdefault("finished_at", now)
    if not to_state.is_live:
        values.setdefault("current_attempt_id", None)
    path = wait_path.value if wait_path is not None else None
    updated = conn.execute(
        _MOVE_TASK,  # WHERE id, state and state_version are still what was read; SET the rest
        {
            "where_id": task.id,
            "where_state": from_state.value,
            "where_version": task.state_version,
            "state": to_state.value,
            "state_version": new_version,
            "wait_path": path,
            "updated_at": now,
            **values,
        },
    )
    if updated.rowcount != 1:
        raise LostRace(f"task {task.id} moved on from {from_state}@{task.state_version}")
    key = task.concurrency_key
    if holds_permit(task.state, task.wait_path, key) and not holds_permit(to_state, path, key):
        release_permits(conn, task.namespace, key, [task.id], now)  # at once, or batch_deferred
    if task.quota_counted:
        waiting, running = quota.state_deltas(from_state, to_state)
        count_quota(conn, task.namespace, task.queue, waiting=waiting, running=running)
    append_event(
        conn,
        task.id,
        task.namespace,
        from_state=from_state,
        to_state=to_state,
        state_version=new_version,
        now=now,
        reason=reason,
        attempt_id=attempt_id,
        actor=actor,
        details=details,
    )
    if to_state in OUTCOME_TASK_STATES:  # announced as a result event (seed §6.2, §6.3)
        event_id = new_id()
        conn.execute(
            inserts.RESULT_EVENTS,
            {
                "id": event_id,
                "namespace": task.namespace,
                "task_id": task.id,
                "state_version": new_version,
                "kind": f"task.{to_state.value.lower()}",
                "task_state": to_state.value,
                "queue": task.queue,
                "handler": task.handler,
                "payload": {
                    "task_id": task.id,
                    "state": to_state.value,
                    "attempt_id": attempt_id,
                    "result": values.get("result"),
                    "error": values.get("error"),
                    "reason": reason,
                },
                "created_at": now,
            },
        )
        fan_out(conn, event_id, task, to_state.value, now=now)  # its deliveries (seed §6.2)
        if task.workflow_instance_id is not None:  # Weave's internal event (seed §6.3, inv. 9)
            record_task_outcome(
                conn, task, to_state, new_version, now, values.get("result"), values.get("error")
            )
    return new_version


def append_event(
    conn: sa.Connection,
    task_id: str,
    namespace: str,
    *,
    from_state: TaskState | None,
    to_state: TaskState,
    state_version: int,
    now: dt.datetime,
    reason: str,
    attempt_id: str | None = None,
    actor: str | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    conn.execute(
        inserts.TASK_EVENTS,
        {
            "id": new_id(),
            "task_id": task_id,
            "namespace": namespace,
            "state_version": state_version,
            "from_state": from_state.value if from_state else None,
            "to_state": to_state.value,
            "reason": reason,
            "attempt_id": attempt_id,
            "actor": actor,
            "details": details,
            "at": now,
        },
    )


def hand_back(
    conn: sa.Connection,
    task: sa.Row[Any],
    attempt_id: str,
    *,
    now: dt.datetime,
    reason: str,
    gate_open: bool,
) -> None:
    """Return an unstarted LEASED task to WAITING at once. The handler never ran, so the
    attempt is recorded as RELEASED and not counted against max attempts; the task keeps its
    place (READY with its permit) unless its gate is closed (``gate_open``, read by the caller
    under the gate's shared lock)."""
    finish_attempt(conn, attempt_id, AttemptOutcome.RELEASED, now=now, reason=reason)
    transition(
        conn,
        task,
        TaskState.WAITING,
        now=now,
        reason=reason,
        attempt_id=attempt_id,
        wait_path=reentry_path(now, now, gate_open),
        available_at=now,
        attempts_used=task.attempts_used - 1,
    )


def cancel_unstarted(
    conn: sa.Connection,
    task: sa.Row[Any],
    attempt_id: str,
    *,
    now: dt.datetime,
    attempt_reason: str,
) -> None:
    """Settle a grant whose task's cancel was requested before its handler ran: the attempt
    CANCELLED (``attempt_reason``), the task CANCELLED. A start and a hand-back both end so."""
    finish_attempt(conn, attempt_id, AttemptOutcome.CANCELLED, now=now, reason=attempt_reason)
    transition(
        conn,
        task,
        TaskState.CANCELLED,
        now=now,
        reason="cancelled before start",
        attempt_id=attempt_id,
    )
