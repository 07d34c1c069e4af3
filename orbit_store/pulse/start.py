"""Starting an attempt (seed §5 "开始"): LEASED → RUNNING after checking the grant.

Invariant 3: only the current attempt presenting its secret token, within its lease, may start;
the execution gate (inv. 12) and the cancel intent are re-checked here, at the last moment
before the handler runs.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from orbit_store.schema import execution_gates, task_attempts

from .attempts import find_attempt, finish_attempt, token_matches
from .model import AttemptOutcome, AttemptState, Safety, StartRefusal, StartResult, TaskState
from .transitions import hand_back, lock_task_now, transition


def start_attempt(
    conn: sa.Connection,
    *,
    namespace: str,
    attempt_id: str,
    token: str,
    handler_safety: Safety | None = None,
) -> StartResult:
    """Record that the handler may begin. Idempotent for an attempt already RUNNING.

    ``handler_safety`` is what the worker's handler declares; the stricter of it and the task's
    own class is recorded, so a lapse while RUNNING is judged by what actually ran (inv. 7).
    """
    found = find_attempt(conn, namespace, attempt_id)
    if found is None:
        return StartResult(False, StartRefusal.NOT_FOUND)
    if not token_matches(token, found.token_hash):
        return StartResult(False, StartRefusal.INVALID_TOKEN)
    task, now = lock_task_now(conn, namespace, found.task_id)
    assert task is not None
    if task.current_attempt_id != attempt_id:
        return StartResult(False, StartRefusal.STALE_ATTEMPT)
    # Under the task lock a current attempt is in the task's state: every path that ends or
    # starts an attempt holds that lock, so the attempt row need not be read again.
    if task.state == TaskState.RUNNING.value:
        return StartResult(True, lease_expires_at=found.lease_expires_at, already_started=True)
    if task.cancel_requested:
        finish_attempt(
            conn,
            attempt_id,
            AttemptOutcome.CANCELLED,
            now=now,
            reason="cancel requested",
            holds_permit=task.concurrency_key is not None,
        )
        transition(
            conn,
            task,
            TaskState.CANCELLED,
            now=now,
            reason="cancelled before start",
            attempt_id=attempt_id,
        )
        return StartResult(False, StartRefusal.CANCEL_REQUESTED)
    if task.gate_id is not None and not _gate_open(conn, task.gate_id):
        # Hand the task back at once rather than letting the lease run out.
        hand_back(conn, task, attempt_id, now=now, reason="gate closed at start")
        return StartResult(False, StartRefusal.GATE_CLOSED)
    expires = now + dt.timedelta(seconds=task.lease_seconds)
    updated = conn.execute(
        task_attempts.update()
        .where(
            task_attempts.c.id == attempt_id,
            task_attempts.c.state == AttemptState.LEASED.value,
            task_attempts.c.lease_expires_at > now,
        )
        .values(
            state=AttemptState.RUNNING.value,
            started_at=now,
            heartbeat_at=now,
            lease_expires_at=expires,
        )
    )
    if updated.rowcount != 1:  # current and LEASED, so only its lease can have run out
        return StartResult(False, StartRefusal.LEASE_EXPIRED)
    safety = Safety.UNSAFE if Safety.UNSAFE in (handler_safety, task.safety) else Safety.SAFE
    transition(
        conn,
        task,
        TaskState.RUNNING,
        now=now,
        reason="started",
        attempt_id=attempt_id,
        safety=safety.value,
    )
    return StartResult(True, lease_expires_at=expires)


def _gate_open(conn: sa.Connection, gate_id: str) -> bool:
    allowed = conn.execute(
        sa.select(execution_gates.c.allowed)
        .where(execution_gates.c.id == gate_id)
        .with_for_update(read=True)
    ).scalar_one_or_none()
    return bool(allowed)
