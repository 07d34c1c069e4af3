"""Manual recovery (seed §2, invariant 8): review of NEEDS_REVIEW tasks and manual retry.

Both need an identity, a reason and the state_version the person looked at; both append an audit
row in the same transaction as the change. Review also needs an evidence reference and an
explicit declaration that execution has ended; retry needs an explicit safe-to-retry declaration
and creates a NEW task linked by ``retry_of`` (at most one direct successor) — the original keeps
its terminal state. A retry of a workflow step's task carries the step: the successor keeps the
workflow links and Weave is told through its inbox (``weave.outcomes.record_task_retry``).
"""

from __future__ import annotations

import enum
from typing import Any

import sqlalchemy as sa

from orbit_store.audit import record_audit
from orbit_store.clock import db_now
from orbit_store.errors import AlreadyRetried, Conflict, InvalidRequest, NotFound
from orbit_store.pulse.model import Safety, SubmitResult, TaskState
from orbit_store.pulse.state.transitions import lock_task, transition
from orbit_store.pulse.submit.accept import SubmitRequest, admit, enter
from orbit_store.schema import tasks
from orbit_store.weave.outcomes import record_task_retry


class ReviewDecision(enum.StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


RETRYABLE_STATES = (TaskState.FAILED, TaskState.CANCELLED)


def _require(**fields: str | None) -> None:
    missing = [name for name, value in fields.items() if not (value or "").strip()]
    if missing:
        raise InvalidRequest(f"manual intervention needs {', '.join(missing)}")


def _lock_at_version(conn: sa.Connection, namespace: str, task_id: str, expected: int) -> Any:
    task = lock_task(conn, namespace, task_id)
    if task is None:
        raise NotFound(f"task {task_id} not found in namespace {namespace!r}")
    if task.state_version != expected:
        raise Conflict(
            f"task {task_id} is at state_version {task.state_version}, not {expected}: "
            "it changed since you looked; re-read it and decide again"
        )
    return task


def review_task(
    conn: sa.Connection,
    *,
    namespace: str,
    task_id: str,
    decision: ReviewDecision,
    actor: str,
    reason: str,
    evidence_ref: str,
    expected_state_version: int,
    execution_ended: bool,
) -> TaskState:
    """Settle a NEEDS_REVIEW task as SUCCEEDED or FAILED, with evidence and audit."""
    _require(actor=actor, reason=reason, evidence_ref=evidence_ref)
    if not execution_ended:
        raise InvalidRequest(
            "declare that execution has ended (execution_ended=true): review must not race a "
            "handler that may still be producing side effects"
        )
    task = _lock_at_version(conn, namespace, task_id, expected_state_version)
    if task.state != TaskState.NEEDS_REVIEW.value:
        raise Conflict(f"task {task_id} is {task.state}; only NEEDS_REVIEW tasks are reviewed")
    now = db_now(conn)
    to_state = TaskState.SUCCEEDED if decision is ReviewDecision.SUCCEEDED else TaskState.FAILED
    details = {"evidence_ref": evidence_ref, "review_reason": reason}
    extra: dict[str, Any] = (
        {}
        if to_state is TaskState.SUCCEEDED
        else {"error": {"type": "review_failed", "message": reason}}
    )
    transition(
        conn,
        task,
        to_state,
        now=now,
        reason=f"review: {reason}"[:255],
        actor=actor,
        details=details,
        **extra,
    )
    record_audit(
        conn,
        namespace=namespace,
        actor=actor,
        action="task.review",
        resource_kind="task",
        resource_id=task_id,
        resource_version=task.state_version,
        reason=reason,
        evidence_ref=evidence_ref,
        before={"state": task.state},
        after={"state": to_state.value},
        now=now,
    )
    return to_state


def retry_task(
    conn: sa.Connection,
    *,
    namespace: str,
    task_id: str,
    actor: str,
    reason: str,
    expected_state_version: int,
    safe_to_retry: bool,
) -> SubmitResult:
    """Create the one direct successor of a FAILED or CANCELLED task."""
    _require(actor=actor, reason=reason)
    if not safe_to_retry:
        raise InvalidRequest(
            "declare that running the task again is safe (safe_to_retry=true): the original "
            "may already have produced side effects"
        )
    # The successor enters the original's queue and gate: those locks come first (lock order:
    # queue → gate → task); what they depend on (queue, gate) never changes on a task.
    seen = conn.execute(
        sa.select(tasks).where(tasks.c.id == task_id, tasks.c.namespace == namespace)
    ).one_or_none()
    if seen is None:
        raise NotFound(f"task {task_id} not found in namespace {namespace!r}")
    request = _successor(seen, task_id, actor)
    admission = admit(conn, request)
    original = _lock_at_version(conn, namespace, task_id, expected_state_version)
    if TaskState(original.state) not in RETRYABLE_STATES:
        raise Conflict(
            f"task {task_id} is {original.state}; only FAILED or CANCELLED tasks are retried "
            "(review a NEEDS_REVIEW task first)"
        )
    successor = conn.execute(
        sa.select(tasks.c.id).where(tasks.c.retry_of == task_id)
    ).scalar_one_or_none()
    if successor is not None:
        raise AlreadyRetried(task_id, successor)
    result = enter(conn, request, admission)
    now = db_now(conn)
    if original.workflow_activation_id is not None:
        record_task_retry(conn, original, result.task_id, now)
    record_audit(
        conn,
        namespace=namespace,
        actor=actor,
        action="task.retry",
        resource_kind="task",
        resource_id=task_id,
        resource_version=original.state_version,
        reason=reason,
        before={"state": original.state},
        after={"retry_task_id": result.task_id},
        now=now,
    )
    return result


def _successor(original: Any, task_id: str, actor: str) -> SubmitRequest:
    """The original's request again, linked by retry_of. Its concurrency key keeps the limit in
    force (declaring the original's would undo a later change)."""
    return SubmitRequest(
        namespace=original.namespace,
        queue=original.queue,
        handler=original.handler,
        params=original.params,
        deadline_at=None,
        priority=original.priority,
        concurrency_key=original.concurrency_key,
        max_attempts=original.max_attempts,
        backoff_initial_ms=original.backoff_initial_ms,
        backoff_max_ms=original.backoff_max_ms,
        backoff_multiplier=original.backoff_multiplier,
        safety=Safety(original.safety),
        gate_id=original.gate_id,
        # A step's task: the successor carries the step (Weave moves the activation onto it).
        workflow_instance_id=original.workflow_instance_id,
        workflow_activation_id=original.workflow_activation_id,
        retry_of=task_id,
        submitted_by=actor,
    )
