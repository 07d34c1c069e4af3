"""Cancelling a task (seed §5 "取消"): a persisted intent, plus an audit row.

WAITING and LEASED tasks become CANCELLED at once. A RUNNING task only gets
``cancel_requested``: it becomes CANCELLED when its worker confirms the handler stopped (or the
lease lapses on a safe task). A terminal task is left as it is — a confirmed success is never
overwritten. A task in NEEDS_REVIEW is settled by review, not by cancel.
"""

from __future__ import annotations

import sqlalchemy as sa

from orbit_store.audit import record_audit
from orbit_store.clock import db_now
from orbit_store.errors import Conflict, NotFound
from orbit_store.schema import tasks

from .attempts import finish_attempt
from .model import AttemptOutcome, CancelResult, TaskState
from .transitions import lock_task, transition


def cancel_task(
    conn: sa.Connection, *, namespace: str, task_id: str, actor: str, reason: str = ""
) -> CancelResult:
    task = lock_task(conn, namespace, task_id)
    if task is None:
        raise NotFound(f"task {task_id} not found in namespace {namespace!r}")
    state = TaskState(task.state)
    if state.is_terminal:
        return CancelResult(task_id, state, bool(task.cancel_requested), changed=False)
    if state is TaskState.NEEDS_REVIEW:
        raise Conflict(f"task {task_id} awaits review; settle it with a review, not a cancel")
    now = db_now(conn)
    why = reason or "cancel requested"
    new_state: TaskState
    if state is TaskState.RUNNING:
        if task.cancel_requested:
            return CancelResult(task_id, state, True, changed=False)
        conn.execute(
            tasks.update()
            .where(tasks.c.id == task_id, tasks.c.state_version == task.state_version)
            .values(cancel_requested=True, cancel_requested_at=now, cancel_reason=why[:255])
        )
        new_state = state
    else:
        if state is TaskState.LEASED:
            finish_attempt(
                conn, task.current_attempt_id, AttemptOutcome.CANCELLED, now=now, reason=why
            )
        transition(
            conn,
            task,
            TaskState.CANCELLED,
            now=now,
            reason=why,
            actor=actor,
            attempt_id=task.current_attempt_id,
            cancel_requested=True,
            cancel_requested_at=now,
            cancel_reason=why[:255],
        )
        new_state = TaskState.CANCELLED
    record_audit(
        conn,
        namespace=namespace,
        actor=actor,
        action="task.cancel",
        resource_kind="task",
        resource_id=task_id,
        resource_version=task.state_version,
        reason=why,
        before={"state": state.value},
        after={"state": new_state.value, "cancel_requested": True},
        now=now,
    )
    return CancelResult(task_id, new_state, True, changed=True)
