"""Attempt rows: secret-token hashing and the guarded update that ends an attempt exactly once.
(Concurrency permits belong to tasks, not attempts: ``transition`` releases them.)"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
from typing import Any

import sqlalchemy as sa

from orbit_store.db import by_primary_key
from orbit_store.fencing import current_epoch_column
from orbit_store.pulse.model import AttemptOutcome, AttemptState
from orbit_store.schema import task_attempts, tasks

LIVE_ATTEMPT_STATES = (AttemptState.LEASED.value, AttemptState.RUNNING.value)


def cut_leases(conn: sa.Connection, attempt_ids: list[str], now: dt.datetime) -> None:
    """Make these live attempts' leases end ``now`` (the reaper then settles each task by the
    lease rules, invariants 3 and 7). By primary key, in id order: a lock taken through a
    secondary index could deadlock with a completion holding the attempt."""
    if not attempt_ids:
        return
    cut = (
        task_attempts.update()
        .where(
            task_attempts.c.id.in_(sorted(attempt_ids)),
            task_attempts.c.state.in_(LIVE_ATTEMPT_STATES),
            task_attempts.c.lease_expires_at > now,
        )
        .values(lease_expires_at=now)
    )
    conn.execute(by_primary_key(cut, task_attempts))


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(token: str, token_hash: str) -> bool:
    return hmac.compare_digest(hash_token(token), token_hash)


def lock_attempt(conn: sa.Connection, attempt_id: str) -> sa.Row[Any] | None:
    query = sa.select(task_attempts).where(task_attempts.c.id == attempt_id).with_for_update()
    return conn.execute(by_primary_key(query, task_attempts)).one_or_none()


def find_attempt(conn: sa.Connection, namespace: str, attempt_id: str) -> sa.Row[Any] | None:
    """Non-locking read of the attempt and its task's gate (a gate_id never changes), used to
    learn what to lock first (lock order: gate → task → attempt), with the current restore
    epoch as ``fence_epoch`` (read beside it rather than in a round trip of its own, as the
    batches read it; :func:`granted_before_fence`)."""
    return conn.execute(_FIND, {"attempt_id": attempt_id, "namespace": namespace}).one_or_none()


def granted_before_fence(found: sa.Row[Any]) -> bool:
    """Whether the attempt ``find_attempt`` read was granted before the current restore fence
    (``orbit_store/fencing.py``): invariant 3, such a grant is refused whatever it presents."""
    return int(found.epoch) < int(found.fence_epoch)


#: Built once (hot path: every start and completion); values are bound per call.
_FIND = (
    sa.select(task_attempts, tasks.c.gate_id, current_epoch_column().label("fence_epoch"))
    .join(tasks, tasks.c.id == task_attempts.c.task_id)
    .where(
        task_attempts.c.id == sa.bindparam("attempt_id"),
        task_attempts.c.namespace == sa.bindparam("namespace"),
    )
)


def finish_attempt(
    conn: sa.Connection,
    attempt_id: str,
    outcome: AttemptOutcome,
    *,
    now: dt.datetime,
    reason: str,
    result: Any = None,
    error: Any = None,
    only_if_expired: bool = False,
) -> bool:
    """End a live attempt. Returns False when it was already finished (or, with
    ``only_if_expired``, when a renewal extended its lease meanwhile). Outcomes are never
    overwritten: the WHERE clause only matches a live attempt."""
    conditions = [
        task_attempts.c.id == attempt_id,
        task_attempts.c.state.in_(LIVE_ATTEMPT_STATES),
    ]
    if only_if_expired:
        conditions.append(task_attempts.c.lease_expires_at <= now)
    finish = (
        task_attempts.update()
        .where(*conditions)
        .values(
            state=AttemptState.FINISHED.value,
            finished_at=now,
            outcome=outcome.value,
            outcome_reason=reason[:255],
            result=result,
            error=error,
        )
    )
    updated = conn.execute(by_primary_key(finish, task_attempts))
    return bool(updated.rowcount == 1)
