"""Lapsed leases and passed deadlines (seed §3 "过期回收").

Each decision is its own short transaction that locks the task, then re-checks — by a
conditional update of the attempt row — that the lease is still lapsed, so it never races a
fresh renewal or a completion. Rules:

- lapsed LEASED (never started): WAITING again, or FAILED when attempts/deadline are used up;
- lapsed RUNNING, task declared safe: WAITING (with backoff), or FAILED when used up,
  or CANCELLED when a cancel was requested;
- lapsed RUNNING, task unsafe: NEEDS_REVIEW — a lost worker is not a business failure and its
  side effects are unknown (invariant 7);
- WAITING past its deadline: FAILED.

A lease that ran out while no server replica was serving is extended instead (``outages``):
the outage is not the worker's fault, and it may hold a finished result to report.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.passes import in_turn
from orbit_store.pulse.leases.complete import next_retry_at
from orbit_store.pulse.limits.gates import gate_is_open
from orbit_store.pulse.limits.paths import reentry_path
from orbit_store.pulse.model import AttemptOutcome, Safety, TaskState
from orbit_store.pulse.state.attempts import LIVE_ATTEMPT_STATES, finish_attempt
from orbit_store.pulse.state.outages import extend_lease_after_outage
from orbit_store.pulse.state.transitions import lock_task, lock_task_now, transition
from orbit_store.schema import task_attempts, tasks


@dataclass(frozen=True)
class LapsedAttempt:
    namespace: str
    attempt_id: str
    task_id: str
    gate_id: str | None = None


def find_lapsed_attempts(
    conn: sa.Connection,
    *,
    limit: int = 100,
    namespace: str | None = None,
    skip: Collection[str] = (),
) -> list[LapsedAttempt]:
    """Live attempts whose lease has passed (index ix_task_attempts_lease_reaper), every
    namespace's oldest in turn; attempts in ``skip`` (backing off) are left out."""
    now = db_now(conn)
    query = (
        sa.select(
            task_attempts.c.namespace, task_attempts.c.id, task_attempts.c.task_id, tasks.c.gate_id
        )
        .join(tasks, tasks.c.id == task_attempts.c.task_id)
        .where(
            task_attempts.c.state.in_(LIVE_ATTEMPT_STATES),
            task_attempts.c.lease_expires_at <= now,
        )
    )
    if namespace is not None:
        query = query.where(task_attempts.c.namespace == namespace)
    if skip:
        query = query.where(task_attempts.c.id.not_in(list(skip)))
    fair = in_turn(query, task_attempts.c.namespace, task_attempts.c.lease_expires_at, limit)
    return [LapsedAttempt(r.namespace, r.id, r.task_id, r.gate_id) for r in conn.execute(fair)]


@dataclass(frozen=True)
class Decision:
    """What the reaper did to one task (for metrics and logs)."""

    namespace: str
    queue: str
    state: TaskState


@dataclass(frozen=True)
class Graced:
    """The lease ran out in a server outage and was extended instead (``pulse.outages``)."""

    namespace: str
    attempt_id: str


def lapse_attempt(conn: sa.Connection, lapsed: LapsedAttempt) -> Decision | Graced | None:
    """Apply the lapse rules to one attempt; :class:`Graced` when an outage excuses it, None
    when it was renewed or finished meanwhile."""
    gate_open = gate_is_open(conn, lapsed.gate_id)  # before the task (lock order)
    task, now = lock_task_now(conn, lapsed.namespace, lapsed.task_id)
    if task is None or task.current_attempt_id != lapsed.attempt_id:
        return None
    # Under the task lock the current attempt is in the task's state.
    was_running = task.state == TaskState.RUNNING.value
    if extend_lease_after_outage(conn, lapsed.attempt_id, task.lease_seconds, now) is not None:
        return Graced(lapsed.namespace, lapsed.attempt_id)
    if not finish_attempt(
        conn,
        lapsed.attempt_id,
        AttemptOutcome.LAPSED,
        now=now,
        reason="lease lapsed",
        only_if_expired=True,
    ):
        return None
    retry_at = next_retry_at(task, now)
    extra: dict[str, Any]
    if not was_running:
        to_state = TaskState.WAITING if retry_at is not None else TaskState.FAILED
        extra = {"available_at": now} if retry_at is not None else {}
        reason = "lease lapsed before start"
    elif task.safety == Safety.UNSAFE.value:
        to_state, extra, reason = TaskState.NEEDS_REVIEW, {}, "lease lapsed while running (unsafe)"
    elif task.cancel_requested:
        to_state, extra, reason = TaskState.CANCELLED, {}, "lease lapsed after cancel request"
    elif retry_at is not None:
        to_state, extra = TaskState.WAITING, {"available_at": retry_at}
        reason = "lease lapsed while running (safe to retry)"
    else:
        to_state, extra, reason = TaskState.FAILED, {}, "lease lapsed, attempts or deadline used up"
    if to_state is TaskState.FAILED:
        extra["error"] = {"type": "lease_lapsed", "message": reason}
    if to_state is TaskState.WAITING:
        extra["wait_path"] = reentry_path(extra["available_at"], now, gate_open)
    transition(conn, task, to_state, now=now, reason=reason, attempt_id=lapsed.attempt_id, **extra)
    return Decision(task.namespace, task.queue, to_state)


def find_overdue_waiting(
    conn: sa.Connection,
    *,
    limit: int = 100,
    namespace: str | None = None,
    skip: Collection[str] = (),
) -> list[tuple[str, str]]:
    """(namespace, task_id) of WAITING tasks whose deadline passed (index ix_tasks_deadline),
    every namespace's oldest in turn; tasks in ``skip`` (backing off) are left out."""
    now = db_now(conn)
    query = sa.select(tasks.c.namespace, tasks.c.id).where(
        tasks.c.state == TaskState.WAITING.value, tasks.c.deadline_at <= now
    )
    if namespace is not None:
        query = query.where(tasks.c.namespace == namespace)
    if skip:
        query = query.where(tasks.c.id.not_in(list(skip)))
    fair = in_turn(query, tasks.c.namespace, tasks.c.deadline_at, limit)
    return [(r.namespace, r.id) for r in conn.execute(fair)]


def fail_overdue_task(conn: sa.Connection, namespace: str, task_id: str) -> Decision | None:
    task = lock_task(conn, namespace, task_id)
    if task is None or task.state != TaskState.WAITING.value:
        return None
    now = db_now(conn)
    if task.deadline_at is None or task.deadline_at > now:
        return None
    transition(
        conn,
        task,
        TaskState.FAILED,
        now=now,
        reason="deadline exceeded",
        error={"type": "deadline_exceeded", "message": "deadline passed while waiting"},
    )
    return Decision(task.namespace, task.queue, TaskState.FAILED)
