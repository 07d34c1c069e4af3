"""Starting an attempt (seed §5 "开始"): LEASED → RUNNING after checking the grant.

Invariant 3: only the current attempt presenting its secret token, within its lease, from a live
worker session, may start; the execution gate (inv. 12) and the cancel intent are re-checked
here, at the last moment before the handler runs. The session and the gate are read under
shared locks, and the time after every lock is held: a revoke (pod deleted) or a gate closing
that commits first wins, one that comes later waits for this start and then applies.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.db import by_primary_key
from orbit_store.pulse.limits.gates import gate_is_open
from orbit_store.pulse.model import AttemptState, Safety, StartRefusal, StartResult, TaskState
from orbit_store.pulse.state.attempts import find_attempt, granted_before_fence, token_matches
from orbit_store.pulse.state.outages import extend_lease_after_outage
from orbit_store.pulse.state.transitions import cancel_unstarted, hand_back, lock_task, transition
from orbit_store.pulse.workers.sessions import session_is_live
from orbit_store.schema import task_attempts


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
    if granted_before_fence(found):  # restore fence (orbit_store/fencing.py)
        return StartResult(False, StartRefusal.RESTORE_FENCED)
    session_live = session_is_live(conn, namespace, found.worker_session_id)
    gate_open = gate_is_open(conn, found.gate_id)
    task = lock_task(conn, namespace, found.task_id)
    assert task is not None
    now = db_now(conn)
    answer = answer_before_start(task, attempt_id, found.lease_expires_at, session_live, now)
    if answer is not None:
        return answer
    if task.cancel_requested:
        cancel_unstarted(conn, task, attempt_id, now=now, attempt_reason="cancel requested")
        return StartResult(False, StartRefusal.CANCEL_REQUESTED)
    if not gate_open:
        # Hand the task back at once rather than letting the lease run out.
        hand_back(conn, task, attempt_id, now=now, reason="gate closed at start", gate_open=False)
        return StartResult(False, StartRefusal.GATE_CLOSED)
    # A lease that ran out in a server outage gets its grace first (pulse.outages).
    extend_lease_after_outage(conn, attempt_id, task.lease_seconds, now)
    expires = now + dt.timedelta(seconds=task.lease_seconds)
    run = (
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
    # By primary key: left to itself MariaDB may plan this through ix_task_attempts_lease_reaper
    # (state, lease_expires_at) and lock the entry after the range — another attempt's, which a
    # completion holding that attempt changes: a deadlock
    # (tests/store/pulse/test_primary_key_locking.py).
    updated = conn.execute(by_primary_key(run, task_attempts))
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
    return StartResult(
        True, lease_expires_at=expires, lease_remaining_seconds=float(task.lease_seconds)
    )


def answer_before_start(
    task: sa.Row[Any],
    attempt_id: str,
    lease_expires_at: dt.datetime,
    session_live: bool,
    now: dt.datetime,
) -> StartResult | None:
    """The answers a start gets without writing anything, in ``start_attempt``'s order (the
    set path, ``batch.start_set``, judges each item by the same function): superseded, already
    started, or its session ended. ``task`` is locked; None: go on with the start."""
    if task.current_attempt_id != attempt_id:
        return StartResult(False, StartRefusal.STALE_ATTEMPT)
    # Under the task lock a current attempt is in the task's state: every path that ends or
    # starts an attempt holds that lock, so the attempt row need not be read again.
    if task.state == TaskState.RUNNING.value:
        return StartResult(
            True,
            lease_expires_at=lease_expires_at,
            already_started=True,
            lease_remaining_seconds=(lease_expires_at - now).total_seconds(),
        )
    if not session_live:  # ending a session ended its leases (the reaper settles the task)
        return StartResult(False, StartRefusal.LEASE_EXPIRED)
    return None
