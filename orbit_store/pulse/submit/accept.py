"""Accepting a task (seed §5 "受理"): submission key, task and accepted event in one transaction.

Invariant 1: when this commits, the task, its idempotency record and its event are durable.
Invariant 6: the same namespace + idempotency key returns the original task (a replay) when the
request digest matches, and is a typed conflict otherwise. A commit whose outcome is unknown is
resolved by looking the key up (:func:`find_submission`), never by resubmitting under a new key.

The task starts on its wait path (``paths``): SCHEDULED when due later, BLOCKED_GATE behind a
closed gate, READY with a concurrency permit or BLOCKED_KEY without one. The queue and namespace
rows are read under a shared lock, so a queue being deleted and a namespace's first quota
serialise with the submission (no task accepted into a queue that is gone, none uncounted).
Lock order: namespace/queue (shared) → gate (shared) → concurrency key → quota rows → inserts.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field, fields
from typing import Any

import sqlalchemy as sa

from orbit_store.errors import Conflict, IdempotencyConflict, InvalidRequest, NotFound
from orbit_store.ids import new_id
from orbit_store.pulse.limits import quota, semaphores
from orbit_store.pulse.limits.queues import SubmissionScope, lock_submission_scope
from orbit_store.pulse.model import QueuePolicy, Safety, SubmitResult, TaskState, WaitPath
from orbit_store.pulse.state import inserts
from orbit_store.pulse.state.transitions import append_event
from orbit_store.schema import execution_gates, submission_keys, tasks

#: How long an idempotency key is remembered (covers client retries and outbox relays).
KEY_RETENTION = dt.timedelta(days=7)

#: Built once (every submission looks its key up); values are bound per call.
_BY_KEY = (
    sa.select(submission_keys.c.request_digest, tasks.c.id, tasks.c.state)
    .join(tasks, tasks.c.id == submission_keys.c.task_id)
    .where(
        submission_keys.c.namespace == sa.bindparam("namespace"),
        submission_keys.c.idempotency_key == sa.bindparam("key"),
    )
)


#: Fields a request's digest leaves out: who sent it and under which key are not what it asks.
_NOT_MEANT = frozenset({"idempotency_key", "submitted_by"})


@dataclass(frozen=True)
class SubmitRequest:
    namespace: str
    queue: str
    handler: str
    params: Any = field(default_factory=dict)
    idempotency_key: str | None = None
    delay_seconds: float | None = None
    available_at: dt.datetime | None = None
    deadline_at: dt.datetime | None = None
    priority: int | None = None
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    max_attempts: int | None = None
    backoff_initial_ms: int | None = None
    backoff_max_ms: int | None = None
    backoff_multiplier: float | None = None
    safety: Safety | None = None
    gate_id: str | None = None
    workflow_instance_id: str | None = None
    workflow_activation_id: str | None = None
    schedule_id: str | None = None
    retry_of: str | None = None
    submitted_by: str | None = None

    def digest(self) -> str:
        """sha256 of the request's meaning (everything but the key and the submitter)."""
        # The fields' own values (params is JSON already): no deep copy, as asdict would make.
        meaning = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_MEANT}
        canonical = json.dumps(meaning, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def find_submission(
    conn: sa.Connection, namespace: str, idempotency_key: str, digest: str
) -> SubmitResult | None:
    """Look a submission up by its key: the way to resolve an unknown commit outcome."""
    row = conn.execute(_BY_KEY, {"namespace": namespace, "key": idempotency_key}).one_or_none()
    if row is None:
        return None
    if row.request_digest != digest:
        raise IdempotencyConflict(
            f"idempotency key {idempotency_key!r} was already used for a different request "
            f"(task {row.id}); use a new key for a new request"
        )
    return SubmitResult(task_id=row.id, state=TaskState(row.state), replayed=True)


def validate(request: SubmitRequest, policy: QueuePolicy) -> None:
    if not request.handler:
        raise InvalidRequest("handler must not be empty")
    if request.delay_seconds is not None and request.available_at is not None:
        raise InvalidRequest("give either delay_seconds or available_at, not both")
    if request.delay_seconds is not None and request.delay_seconds < 0:
        raise InvalidRequest("delay_seconds must be >= 0")
    if request.max_attempts is not None and request.max_attempts < 1:
        raise InvalidRequest("max_attempts must be >= 1")
    if request.concurrency_limit is not None and request.concurrency_limit < 1:
        raise InvalidRequest("concurrency_limit must be >= 1")
    if request.concurrency_limit is not None and request.concurrency_key is None:
        raise InvalidRequest("concurrency_limit needs a concurrency_key")


def submit_task(
    conn: sa.Connection, request: SubmitRequest, *, look_up_key: bool = True
) -> SubmitResult:
    """Accept ``request`` or return the task its idempotency key already names (invariants 1, 6).

    Raises NotFound (undeclared queue), Conflict (key reused for another request),
    QuotaExceeded (nothing written), InvalidRequest. A concurrent duplicate that loses the race
    on the key surfaces as an IntegrityError; :func:`orbit_store.pulse.service.submit` retries
    it as a lookup.

    ``look_up_key=False`` (optimistic, for :func:`~orbit_store.pulse.service.submit`: most
    requests are new): the key is not looked up first. A used key then fails the key's INSERT
    (IntegrityError), and a refused keyed request raises its refusal; in both cases the caller
    looks the key up in a new transaction, so a replay is still answered as a replay whatever
    the queue or its quotas say now.
    """
    if request.idempotency_key is not None and look_up_key:
        digest = request.digest()
        existing = find_submission(conn, request.namespace, request.idempotency_key, digest)
        if existing is not None:
            return existing
    return enter(conn, request, admit(conn, request))


@dataclass(frozen=True)
class Admission:
    """A request that may enter its queue: the queue's policy, the time, the gate's state."""

    policy: QueuePolicy
    has_quotas: bool
    now: dt.datetime
    available_at: dt.datetime
    gate_open: bool


def admit(conn: sa.Connection, request: SubmitRequest) -> Admission:
    """The checks before anything is written: the queue exists and accepts tasks (its row and
    the namespace's under a shared lock), the request is valid, the gate (shared lock)."""
    return admit_in(conn, request, lock_submission_scope(conn, request.namespace, request.queue))


def admit_in(
    conn: sa.Connection,
    request: SubmitRequest,
    scope: SubmissionScope,
    gate_open: bool | None = None,
) -> Admission:
    """``admit`` with the queue's scope already read (a batch reads it once per queue); the
    request is dated by the time read with the scope. ``gate_open``: the request's gate as a
    batch read it (shared lock, :func:`gates_open_for`), else read here."""
    policy = scope.policy
    if policy is None:
        raise NotFound(
            f"queue {request.queue!r} is not declared in namespace {request.namespace!r}: "
            "declare it (Queue resource, `orbit apply`) or use the 'default' queue"
        )
    if policy.draining:
        raise Conflict(
            f"queue {request.queue!r} is being deleted and accepts no new tasks; "
            "submit to another queue"
        )
    validate(request, policy)
    now = scope.now
    if request.available_at is not None:
        available_at = request.available_at
    else:
        available_at = now + dt.timedelta(seconds=request.delay_seconds or 0)
    if gate_open is None:
        gate_open = gate_open_for(conn, request)
    return Admission(policy, scope.has_quotas, now, available_at, gate_open)


def enter(conn: sa.Connection, request: SubmitRequest, admission: Admission) -> SubmitResult:
    """Write the task on its first wait path, with its permit, quota count, key and event."""
    policy, now = admission.policy, admission.now
    semaphore = None
    if request.concurrency_key is not None:
        declared = request.concurrency_limit or policy.concurrency_limit
        semaphore = semaphores.declare(
            conn, request.namespace, request.concurrency_key, declared, now
        )
    path = first_path(admission.available_at, now, admission.gate_open, semaphore)
    counted = admission.has_quotas and quota.check_submission(
        conn, request.namespace, request.queue, now
    )
    task_id = new_id()
    row = task_row(request, admission, task_id, path, counted, semaphore)
    conn.execute(inserts.TASKS, row)
    if semaphore is not None and path is WaitPath.READY:
        semaphores.take_permits(conn, request.namespace, semaphore.key, [task_id], now)
    if counted:
        quota.count(conn, request.namespace, request.queue, waiting=1)
    if request.idempotency_key is not None:
        conn.execute(
            inserts.SUBMISSION_KEYS,
            {
                "namespace": request.namespace,
                "idempotency_key": request.idempotency_key,
                "request_digest": request.digest(),
                "task_id": task_id,
                "created_at": now,
                "expires_at": now + KEY_RETENTION,
            },
        )
    append_event(
        conn,
        task_id,
        request.namespace,
        from_state=None,
        to_state=TaskState.WAITING,
        state_version=1,
        now=now,
        reason="submitted",
        actor=request.submitted_by,
    )
    return SubmitResult(
        task_id=task_id, state=TaskState.WAITING, replayed=False, wait_path=path, row=row
    )


def task_row(
    request: SubmitRequest,
    admission: Admission,
    task_id: str,
    path: WaitPath,
    counted: bool,
    semaphore: semaphores.Semaphore | None,
) -> dict[str, Any]:
    policy, now = admission.policy, admission.now
    return {
        "id": task_id,
        "namespace": request.namespace,
        "queue": request.queue,
        "handler": request.handler,
        "params": request.params,
        "state": TaskState.WAITING.value,
        "state_version": 1,
        "wait_path": path.value,
        "quota_counted": counted,
        "priority": request.priority if request.priority is not None else policy.priority,
        "available_at": admission.available_at,
        "deadline_at": request.deadline_at,
        "created_at": now,
        "updated_at": now,
        "max_attempts": request.max_attempts or policy.retry.max_attempts,
        "attempts_used": 0,
        "backoff_initial_ms": _pick(request.backoff_initial_ms, policy.retry.backoff_initial_ms),
        "backoff_max_ms": _pick(request.backoff_max_ms, policy.retry.backoff_max_ms),
        "backoff_multiplier": _pick(request.backoff_multiplier, policy.retry.backoff_multiplier),
        "lease_seconds": policy.lease_seconds,
        "attempt_timeout_seconds": policy.attempt_timeout_seconds,
        "safety": (request.safety or policy.safety_default).value,
        "concurrency_key": request.concurrency_key,
        "concurrency_limit": semaphore.limit if semaphore is not None else 1,
        "cancel_requested": False,
        "gate_id": request.gate_id,
        "retry_of": request.retry_of,
        "workflow_instance_id": request.workflow_instance_id,
        "workflow_activation_id": request.workflow_activation_id,
        "schedule_id": request.schedule_id,
        "submitted_by": request.submitted_by,
    }


def _pick(value: Any, default: Any) -> Any:
    return default if value is None else value


def gate_open_for(conn: sa.Connection, request: SubmitRequest) -> bool:
    """The task's gate, read under a shared lock; it must belong to the namespace."""
    if request.gate_id is None:
        return True
    allowed = conn.execute(
        sa.select(execution_gates.c.allowed)
        .where(
            execution_gates.c.id == request.gate_id,
            execution_gates.c.namespace == request.namespace,
        )
        .with_for_update(read=True)
    ).scalar_one_or_none()
    if allowed is None:
        raise NotFound(f"execution gate {request.gate_id} not found in {request.namespace!r}")
    return bool(allowed)


def gates_open_for(conn: sa.Connection, namespace: str, gate_ids: set[str]) -> dict[str, bool]:
    """gate id -> open, for the gates of a batch in one read under a shared lock (by id, the
    order every batch takes them in); a gate not in the namespace is absent."""
    if not gate_ids:
        return {}
    rows = conn.execute(
        sa.select(execution_gates.c.id, execution_gates.c.allowed)
        .where(
            execution_gates.c.namespace == namespace,
            execution_gates.c.id.in_(sorted(gate_ids)),
        )
        .order_by(execution_gates.c.id)
        .with_for_update(read=True)
    )
    return {gate_id: bool(allowed) for gate_id, allowed in rows}


def first_path(
    available_at: dt.datetime,
    now: dt.datetime,
    gate_open: bool,
    semaphore: semaphores.Semaphore | None,
) -> WaitPath:
    if available_at > now:
        return WaitPath.SCHEDULED
    if not gate_open:
        return WaitPath.BLOCKED_GATE
    if semaphore is not None and not semaphore.free:
        return WaitPath.BLOCKED_KEY
    return WaitPath.READY
