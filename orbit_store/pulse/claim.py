"""Claiming due tasks (seed §5 "领取"): one transaction grants up to N tasks of the given queues.

Invariant 2: within one state_version a task has at most one valid grant. Rows are picked with
``FOR UPDATE SKIP LOCKED`` (claimers never wait on each other's rows) and moved WAITING → LEASED by
a conditional UPDATE whose row count is checked. Each grant gets a new attempt whose generation
(the fencing number) is the state_version the grant created — so it strictly increases and names
the one version the grant is valid for — and a random secret token stored only as a hash.
Queue pause, execution gates (read under a shared lock, inv. 12), the max-running quota and
concurrency-key permits are all checked inside the same transaction.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import as_db_time, utc_now
from orbit_store.errors import Conflict, InvalidRequest, NotFound
from orbit_store.ids import new_id, new_secret
from orbit_store.schema import (
    concurrency_keys,
    concurrency_permits,
    execution_gates,
    queues,
    quotas,
    task_attempts,
    task_events,
    tasks,
    worker_sessions,
)

from . import quota
from .attempts import hash_token
from .model import DEFAULT_QUEUE, AttemptState, LeaseGrant, Safety, TaskState
from .transitions import transition

MAX_CLAIM_BATCH = 500


def claim_tasks(
    conn: sa.Connection,
    *,
    namespace: str,
    queues_: list[str] | None,
    limit: int,
    worker_session_id: str | None = None,
) -> list[LeaseGrant]:
    """Lease up to ``limit`` due WAITING tasks from ``queues_`` (in queue-priority order);
    ``queues_=None`` means the queues the worker session registered for."""
    if not 1 <= limit <= MAX_CLAIM_BATCH:
        raise InvalidRequest(f"limit must be between 1 and {MAX_CLAIM_BATCH}")
    if worker_session_id is not None:
        session_queues = _require_active_session(conn, namespace, worker_session_id)
        queues_ = session_queues if queues_ is None else queues_
    if not queues_:
        raise InvalidRequest("name at least one queue to claim from")
    claimable, has_running_quota, now = _claimable_queues(conn, namespace, queues_)
    grants: list[LeaseGrant] = []
    for queue in claimable:
        room = limit - len(grants)
        if room <= 0:
            break
        capacity = quota.running_capacity(conn, namespace, queue) if has_running_quota else None
        if capacity is not None:
            room = min(room, capacity)
        if room > 0:
            grants += _claim_from_queue(conn, namespace, queue, room, worker_session_id, now)
    return grants


def _require_active_session(conn: sa.Connection, namespace: str, session_id: str) -> list[str]:
    """The session's queues. Shared lock: a concurrent revoke waits until this claim commits,
    then lapses its leases."""
    row = conn.execute(
        sa.select(worker_sessions.c.state, worker_sessions.c.queues)
        .where(worker_sessions.c.id == session_id, worker_sessions.c.namespace == namespace)
        .with_for_update(read=True)
    ).one_or_none()
    if row is None:
        raise NotFound(f"worker session {session_id} not found in namespace {namespace!r}")
    if row.state != "ACTIVE":
        raise Conflict(
            f"worker session {session_id} is {row.state}: only ACTIVE sessions lease "
            "tasks; register a new session"
        )
    return list(row.queues)


def _claimable_queues(
    conn: sa.Connection, namespace: str, names: list[str]
) -> tuple[list[str], bool, dt.datetime]:
    """Declared (or implicit default), unpaused queues in queue-priority order, whether any
    max-running quota exists in the namespace, and the database time — in one round trip
    (a one-row derived table outer-joined to the queues, so it answers even with none)."""
    running_quotas = (
        sa.select(sa.func.count())
        .where(quotas.c.namespace == namespace, quotas.c.max_running.is_not(None))
        .scalar_subquery()
    )
    one = sa.select(sa.literal(1).label("one")).subquery("one")
    rows = conn.execute(
        sa.select(
            utc_now().label("db_now"),
            running_quotas.label("running_quotas"),
            queues.c.name,
            queues.c.paused,
            queues.c.priority,
        ).select_from(
            one.outerjoin(
                queues, sa.and_(queues.c.namespace == namespace, queues.c.name.in_(names))
            )
        )
    ).all()
    now = as_db_time(conn, rows[0].db_now)
    declared = {row.name: row for row in rows if row.name is not None}
    ordered = []
    for name in sorted(set(names)):
        row = declared.get(name)
        if row is None:
            if name == DEFAULT_QUEUE:
                ordered.append((0, name))
        elif not row.paused:
            ordered.append((row.priority, name))
    return [name for _, name in sorted(ordered)], rows[0].running_quotas > 0, now


def _claim_from_queue(
    conn: sa.Connection,
    namespace: str,
    queue: str,
    limit: int,
    session_id: str | None,
    now: dt.datetime,
) -> list[LeaseGrant]:
    candidates = conn.execute(
        sa.select(tasks)
        .where(
            tasks.c.namespace == namespace,
            tasks.c.queue == queue,
            tasks.c.state == TaskState.WAITING.value,
            tasks.c.available_at <= now,
        )
        .order_by(tasks.c.priority, tasks.c.available_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    if not candidates:
        return []
    due = [t for t in candidates if t.deadline_at is None or t.deadline_at > now]
    for task in candidates:
        if task.deadline_at is not None and task.deadline_at <= now:
            transition(
                conn,
                task,
                TaskState.FAILED,
                now=now,
                reason="deadline exceeded",
                error={"type": "deadline_exceeded", "message": "deadline passed before start"},
            )
    allowed = _open_gate_filter(conn, due)
    granted, slots = _assign_permits(conn, namespace, allowed)
    if not granted:
        return []
    return _grant(conn, granted, slots, session_id, now)


def _open_gate_filter(conn: sa.Connection, candidates: list[sa.Row[Any]]) -> list[sa.Row[Any]]:
    gate_ids = sorted({t.gate_id for t in candidates if t.gate_id is not None})
    if not gate_ids:
        return candidates
    open_gates = set(
        conn.execute(
            sa.select(execution_gates.c.id)
            .where(execution_gates.c.id.in_(gate_ids), execution_gates.c.allowed.is_(True))
            .order_by(execution_gates.c.id)
            .with_for_update(read=True)
        ).scalars()
    )
    return [t for t in candidates if t.gate_id is None or t.gate_id in open_gates]


def _assign_permits(
    conn: sa.Connection, namespace: str, candidates: list[sa.Row[Any]]
) -> tuple[list[sa.Row[Any]], dict[str, int]]:
    """Keep candidates that get a free slot under their concurrency key (at most K holders)."""
    keys = sorted({t.concurrency_key for t in candidates if t.concurrency_key is not None})
    if not keys:
        return candidates, {}
    # Lock the key rows (sorted) so no other claimer counts the same permits concurrently.
    conn.execute(
        sa.select(concurrency_keys.c.concurrency_key)
        .where(
            concurrency_keys.c.namespace == namespace,
            concurrency_keys.c.concurrency_key.in_(keys),
        )
        .order_by(concurrency_keys.c.concurrency_key)
        .with_for_update()
    ).all()
    taken: dict[str, set[int]] = defaultdict(set)
    for key, slot in conn.execute(
        sa.select(concurrency_permits.c.concurrency_key, concurrency_permits.c.slot).where(
            concurrency_permits.c.namespace == namespace,
            concurrency_permits.c.concurrency_key.in_(keys),
        )
    ):
        taken[key].add(slot)
    granted, slots = [], {}
    for task in candidates:
        if task.concurrency_key is None:
            granted.append(task)
            continue
        free = [s for s in range(task.concurrency_limit) if s not in taken[task.concurrency_key]]
        if free:
            taken[task.concurrency_key].add(free[0])
            slots[task.id] = free[0]
            granted.append(task)
    return granted, slots


def _grant(
    conn: sa.Connection,
    granted: list[sa.Row[Any]],
    slots: dict[str, int],
    session_id: str | None,
    now: dt.datetime,
) -> list[LeaseGrant]:
    attempt_rows, permit_rows, event_rows, results = [], [], [], []
    attempt_of: dict[str, str] = {}
    for task in granted:
        attempt_id, token = new_id(), new_secret()
        attempt_of[task.id] = attempt_id
        generation = task.state_version + 1
        expires = now + dt.timedelta(seconds=task.lease_seconds)
        attempt_rows.append(
            {
                "id": attempt_id,
                "task_id": task.id,
                "namespace": task.namespace,
                "generation": generation,
                "worker_session_id": session_id,
                "token_hash": hash_token(token),
                "state": AttemptState.LEASED.value,
                "leased_at": now,
                "lease_expires_at": expires,
            }
        )
        if task.id in slots:
            permit_rows.append(
                {
                    "id": new_id(),
                    "namespace": task.namespace,
                    "concurrency_key": task.concurrency_key,
                    "slot": slots[task.id],
                    "task_id": task.id,
                    "attempt_id": attempt_id,
                    "acquired_at": now,
                }
            )
        event_rows.append(
            {
                "id": new_id(),
                "task_id": task.id,
                "namespace": task.namespace,
                "state_version": task.state_version + 1,
                "from_state": TaskState.WAITING.value,
                "to_state": TaskState.LEASED.value,
                "reason": "claimed",
                "attempt_id": attempt_id,
                "actor": session_id,
                "at": now,
            }
        )
        results.append(
            LeaseGrant(
                task_id=task.id,
                attempt_id=attempt_id,
                generation=generation,
                token=token,
                lease_expires_at=expires,
                namespace=task.namespace,
                queue=task.queue,
                handler=task.handler,
                params=task.params,
                safety=Safety(task.safety),
                state_version=task.state_version + 1,
                deadline_at=task.deadline_at,
                available_at=task.available_at,
                leased_at=now,
            )
        )
    conn.execute(task_attempts.insert(), attempt_rows)
    # One UPDATE for the whole batch; rows are locked by us, so every one must match.
    ids = list(attempt_of)
    updated = conn.execute(
        tasks.update()
        .where(tasks.c.id.in_(ids), tasks.c.state == TaskState.WAITING.value)
        .values(
            state=TaskState.LEASED.value,
            state_version=tasks.c.state_version + 1,
            attempts_used=tasks.c.attempts_used + 1,
            current_attempt_id=sa.case(attempt_of, value=tasks.c.id),
            updated_at=now,
        )
    )
    if updated.rowcount != len(ids):
        raise RuntimeError(f"claim updated {updated.rowcount} of {len(ids)} locked tasks")
    if permit_rows:
        conn.execute(concurrency_permits.insert(), permit_rows)
    conn.execute(task_events.insert(), event_rows)
    return results
