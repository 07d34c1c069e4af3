"""Completing an attempt (seed §5 "完成 / 失败 / 转核查").

Invariant 4: the attempt's result, the task's new state, the permit release, the task_event and
the result_event commit together. Invariant 3: only the current attempt with its token applies;
a late report from a superseded attempt is stored on that attempt as evidence and changes
nothing else. Invariant 7: an unknown outcome goes to NEEDS_REVIEW, never to an automatic re-run.
A confirmed success is never overwritten, not even by a pending cancel request.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.db import by_primary_key
from orbit_store.errors import InvalidRequest
from orbit_store.pulse.limits.gates import gate_is_open
from orbit_store.pulse.limits.paths import reentry_path
from orbit_store.pulse.model import (
    AttemptOutcome,
    CompletionResult,
    CompletionStatus,
    Outcome,
    RetryPolicy,
    TaskState,
)
from orbit_store.pulse.state.attempts import (
    find_attempt,
    finish_attempt,
    granted_before_fence,
    lock_attempt,
    token_matches,
)
from orbit_store.pulse.state.transitions import hand_back, lock_task_now, transition
from orbit_store.schema import task_attempts

_ATTEMPT_OUTCOME = {
    Outcome.SUCCEEDED: AttemptOutcome.SUCCEEDED,
    Outcome.FAILED: AttemptOutcome.FAILED,
    Outcome.UNKNOWN: AttemptOutcome.UNKNOWN,
    Outcome.CANCELLED: AttemptOutcome.CANCELLED,
    Outcome.RELEASED: AttemptOutcome.RELEASED,
}


def complete_attempt(
    conn: sa.Connection,
    *,
    namespace: str,
    attempt_id: str,
    token: str,
    outcome: Outcome,
    result: Any = None,
    error: Any = None,
    retryable: bool = False,
    release_reason: str = "released by worker",
) -> CompletionResult:
    """Apply a worker's report for ``attempt_id``; see the module docstring for the rules.
    ``release_reason``: what a RELEASED outcome records (e.g. a grant handed back because its
    client had gone)."""
    found = find_attempt(conn, namespace, attempt_id)
    if found is None:
        return CompletionResult(CompletionStatus.NOT_FOUND, None, "no such attempt here")
    if not token_matches(token, found.token_hash):
        return CompletionResult(CompletionStatus.REFUSED, None, "wrong attempt token")
    if granted_before_fence(found):  # restore fence (orbit_store/fencing.py): evidence only
        _keep_as_evidence(conn, attempt_id, outcome, result, error, db_now(conn))
        return CompletionResult(CompletionStatus.FENCED, None, "granted before a restore fence")
    gate_open = gate_is_open(conn, found.gate_id)  # a retry may put the task back on a path
    task, now = lock_task_now(conn, namespace, found.task_id)
    assert task is not None
    state = TaskState(task.state)
    if task.current_attempt_id != attempt_id:
        attempt = lock_attempt(conn, attempt_id)  # rare path: read its final outcome
        assert attempt is not None
        if attempt.outcome == _ATTEMPT_OUTCOME[outcome].value:
            return CompletionResult(CompletionStatus.DUPLICATE, state, "already recorded")
        _keep_as_evidence(conn, attempt_id, outcome, result, error, now)
        why = (
            f"attempt already finished as {attempt.outcome}"
            if attempt.outcome
            else "attempt is no longer current"
        )
        return CompletionResult(CompletionStatus.SUPERSEDED, state, why)
    # Under the task lock a current attempt is in the task's state (LEASED or RUNNING).
    if outcome is Outcome.RELEASED:
        if state is not TaskState.LEASED:
            raise InvalidRequest("only an attempt that has not started can be released")
        hand_back(conn, task, attempt_id, now=now, reason=release_reason, gate_open=gate_open)
        return CompletionResult(CompletionStatus.APPLIED, TaskState.WAITING, queue=task.queue)
    if state is not TaskState.RUNNING:
        raise InvalidRequest("start the attempt before reporting its outcome (or release it)")
    if outcome is Outcome.CANCELLED and not task.cancel_requested:
        raise InvalidRequest("'cancelled' is only a valid outcome after a cancel request")
    to_state, reason, extra = decide(task, outcome, retryable, now)
    finish_attempt(
        conn,
        attempt_id,
        _ATTEMPT_OUTCOME[outcome],
        now=now,
        reason=reason,
        result=result,
        error=error,
    )
    if to_state is TaskState.SUCCEEDED:
        extra["result"], extra["error"] = result, None  # an earlier attempt's error is history
    elif error is not None:
        extra["error"] = error
    if to_state is TaskState.WAITING:
        extra["wait_path"] = reentry_path(extra["available_at"], now, gate_open)
    transition(conn, task, to_state, now=now, reason=reason, attempt_id=attempt_id, **extra)
    workflow = task.workflow_instance_id is not None
    return CompletionResult(
        CompletionStatus.APPLIED, to_state, reason, queue=task.queue, workflow=workflow
    )


def decide(
    task: Any, outcome: Outcome, retryable: bool, now: dt.datetime
) -> tuple[TaskState, str, dict[str, Any]]:
    if outcome is Outcome.SUCCEEDED:
        return TaskState.SUCCEEDED, "succeeded", {}
    if outcome is Outcome.UNKNOWN:
        return TaskState.NEEDS_REVIEW, "outcome unknown", {}
    if outcome is Outcome.CANCELLED or task.cancel_requested:
        return TaskState.CANCELLED, "stopped after cancel request", {}
    if retryable:
        retry_at = next_retry_at(task, now)
        if retry_at is not None:
            return TaskState.WAITING, "retryable failure", {"available_at": retry_at}
        return TaskState.FAILED, "retryable failure, retry budget exhausted", {}
    return TaskState.FAILED, "failed", {}


def next_retry_at(task: Any, now: dt.datetime) -> dt.datetime | None:
    """When the task may run again (its backoff, with jitter), or None when attempts or the
    deadline are used up."""
    if task.attempts_used >= task.max_attempts:
        return None
    policy = RetryPolicy(
        max_attempts=task.max_attempts,
        backoff_initial_ms=task.backoff_initial_ms,
        backoff_max_ms=task.backoff_max_ms,
        backoff_multiplier=task.backoff_multiplier,
    )
    retry_at: dt.datetime = now + policy.jittered_backoff_after(task.attempts_used)
    if task.deadline_at is not None and retry_at >= task.deadline_at:
        return None
    return retry_at


def _keep_as_evidence(
    conn: sa.Connection,
    attempt_id: str,
    outcome: Outcome,
    result: Any,
    error: Any,
    now: dt.datetime,
) -> None:
    """The first late report of a superseded attempt is kept; it is never applied (seed §2)."""
    keep = (
        task_attempts.update()
        .where(task_attempts.c.id == attempt_id, task_attempts.c.late_reported_at.is_(None))
        .values(
            late_outcome=_ATTEMPT_OUTCOME[outcome].value,
            late_result=result,
            late_error=error,
            late_reported_at=now,
        )
    )
    conn.execute(by_primary_key(keep, task_attempts))
