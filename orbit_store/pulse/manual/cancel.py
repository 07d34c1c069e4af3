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
from orbit_store.db import by_primary_key
from orbit_store.errors import Conflict, NotFound
from orbit_store.pulse.limits import quota, semaphores
from orbit_store.pulse.model import AttemptOutcome, CancelResult, TaskState
from orbit_store.pulse.state.attempts import finish_attempt
from orbit_store.pulse.state.transitions import lock_task, transition
from orbit_store.schema import task_attempts, tasks


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
        request = (
            tasks.update()
            .where(tasks.c.id == task_id, tasks.c.state_version == task.state_version)
            .values(cancel_requested=True, cancel_requested_at=now, cancel_reason=why[:255])
        )
        conn.execute(by_primary_key(request, tasks))
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


def cancel_tasks(
    conn: sa.Connection, *, namespace: str, task_ids: list[str], actor: str, reason: str
) -> list[CancelResult]:
    """Cancel several tasks of one namespace in one transaction (a queue deleted under its
    Cancel policy). Everything the cancels will lock is locked first, each kind in the
    documented order — the tasks by id, their attempts, their concurrency keys, the quotas of
    their queues — so the cancels one after another never take a lock out of order."""
    rows = conn.execute(
        by_primary_key(
            sa.select(tasks)
            .where(tasks.c.namespace == namespace, tasks.c.id.in_(sorted(task_ids)))
            .order_by(tasks.c.id)
            .with_for_update(),
            tasks,
        )
    ).all()
    live = sorted(r.current_attempt_id for r in rows if r.current_attempt_id is not None)
    if live:
        conn.execute(
            by_primary_key(
                sa.select(task_attempts.c.id)
                .where(task_attempts.c.id.in_(live))
                .order_by(task_attempts.c.id)
                .with_for_update(),
                task_attempts,
            )
        ).all()
    for key in sorted({r.concurrency_key for r in rows if r.concurrency_key is not None}):
        semaphores.lock(conn, namespace, key)
    counted = sorted({r.queue for r in rows if r.quota_counted})
    if counted:
        quota.lock_scope(conn, namespace, counted)
    return [
        cancel_task(conn, namespace=namespace, task_id=row.id, actor=actor, reason=reason)
        for row in rows
        if row.state != TaskState.NEEDS_REVIEW.value
    ]
