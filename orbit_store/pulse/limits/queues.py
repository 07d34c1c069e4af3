"""Queue policies: reading a queue's defaults, and declaring/removing queues (used by the
reconcile functions of the operator and ``orbit apply``)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import as_db_time, db_now, utc_now
from orbit_store.declared import upsert_declared
from orbit_store.namespaces import ensure_namespace
from orbit_store.pulse.model import DEFAULT_QUEUE, QueuePolicy, RetryPolicy, Safety, TaskState
from orbit_store.schema import namespaces, queues, tasks


def _policy_from_row(row: sa.Row[Any]) -> QueuePolicy:
    return QueuePolicy(
        name=row.name,
        paused=bool(row.paused),
        priority=row.priority,
        retry=RetryPolicy(
            max_attempts=row.max_attempts,
            backoff_initial_ms=row.backoff_initial_ms,
            backoff_max_ms=row.backoff_max_ms,
            backoff_multiplier=row.backoff_multiplier,
        ),
        lease_seconds=row.lease_seconds,
        attempt_timeout_seconds=row.attempt_timeout_seconds,
        safety_default=Safety(row.safety_default),
        concurrency_limit=row.concurrency_limit,
        draining=row.draining_since is not None,
    )


def get_queue_policy(conn: sa.Connection, namespace: str, name: str) -> QueuePolicy | None:
    """The queue's policy; the implicit ``default`` queue exists even when not declared."""
    row = conn.execute(
        sa.select(queues).where(queues.c.namespace == namespace, queues.c.name == name)
    ).one_or_none()
    if row is not None:
        return _policy_from_row(row)
    return QueuePolicy(name=DEFAULT_QUEUE) if name == DEFAULT_QUEUE else None


@dataclass(frozen=True)
class SubmissionScope:
    """What a submission needs to know about where it goes, read under shared locks."""

    policy: QueuePolicy | None  # None: the queue is not declared
    has_quotas: bool
    #: The database's time, read by the same statement (one round trip less per submission).
    #: It is the statement's start: a submission that waited for a queue's deletion to end is
    #: dated from before the wait, which no rule orders it by.
    now: dt.datetime


#: Built once (every submission reads its scope); values are bound per call.
_SCOPE = (
    sa.select(utc_now().label("db_now"), namespaces.c.has_quotas, queues)
    .select_from(
        namespaces.outerjoin(
            queues,
            sa.and_(
                queues.c.namespace == namespaces.c.name, queues.c.name == sa.bindparam("queue")
            ),
        )
    )
    .where(namespaces.c.name == sa.bindparam("namespace"))
    .with_for_update(read=True)
)


def lock_submission_scope(conn: sa.Connection, namespace: str, queue: str) -> SubmissionScope:
    """The namespace and queue rows under a shared lock (one statement): deleting the queue
    (exclusive lock, ``lock_queue``) and declaring a namespace's first quota wait for the
    submissions in flight, and later submissions see what they did. The namespace row is
    created on the namespace's first submission."""
    params = {"namespace": namespace, "queue": queue}
    row = conn.execute(_SCOPE, params).one_or_none()
    if row is None:
        ensure_namespace(conn, namespace, db_now(conn))
        row = conn.execute(_SCOPE, params).one()
    now = as_db_time(conn, row.db_now)
    if row.name is not None:
        return SubmissionScope(_policy_from_row(row), bool(row.has_quotas), now)
    default = QueuePolicy(name=DEFAULT_QUEUE) if queue == DEFAULT_QUEUE else None
    return SubmissionScope(default, bool(row.has_quotas), now)


def lock_queue(conn: sa.Connection, namespace: str, name: str) -> bool:
    """Lock the queue row exclusively (deletion): submissions in flight finish first and later
    ones see the outcome. False when the queue does not exist."""
    found = conn.execute(
        sa.select(queues.c.id)
        .where(queues.c.namespace == namespace, queues.c.name == name)
        .with_for_update()
    ).one_or_none()
    return found is not None


def put_queue(
    conn: sa.Connection,
    namespace: str,
    policy: QueuePolicy,
    *,
    deletion_policy: str = "Block",
    source: str = "api",
    spec_generation: int = 1,
) -> bool:
    """Create or update a queue to match ``policy`` (level-based); True when anything changed."""
    now = db_now(conn)
    ensure_namespace(conn, namespace, now)
    values = {
        "paused": policy.paused,
        "priority": policy.priority,
        "max_attempts": policy.retry.max_attempts,
        "backoff_initial_ms": policy.retry.backoff_initial_ms,
        "backoff_max_ms": policy.retry.backoff_max_ms,
        "backoff_multiplier": policy.retry.backoff_multiplier,
        "lease_seconds": policy.lease_seconds,
        "attempt_timeout_seconds": policy.attempt_timeout_seconds,
        "safety_default": policy.safety_default.value,
        "concurrency_limit": policy.concurrency_limit,
        "deletion_policy": deletion_policy,
        "source": source,
        "spec_generation": spec_generation,
    }
    return upsert_declared(conn, queues, namespace, policy.name, values, now)


UNFINISHED_STATES = (
    TaskState.WAITING.value,
    TaskState.LEASED.value,
    TaskState.RUNNING.value,
    TaskState.NEEDS_REVIEW.value,
)


def queue_counts(conn: sa.Connection, namespace: str, name: str) -> dict[str, int]:
    """Tasks of the queue per unfinished state (for CR status and deletion decisions)."""
    rows = conn.execute(
        sa.select(tasks.c.state, sa.func.count())
        .where(
            tasks.c.namespace == namespace,
            tasks.c.queue == name,
            tasks.c.state.in_(UNFINISHED_STATES),
        )
        .group_by(tasks.c.state)
    )
    counts = dict.fromkeys(UNFINISHED_STATES, 0)
    counts.update({state: int(n) for state, n in rows})
    return counts


def begin_queue_deletion(conn: sa.Connection, namespace: str, name: str) -> None:
    """Stop accepting submissions; claims continue so the queue can drain."""
    conn.execute(
        queues.update()
        .where(
            queues.c.namespace == namespace,
            queues.c.name == name,
            queues.c.draining_since.is_(None),
        )
        .values(draining_since=db_now(conn))
    )


def delete_queue(conn: sa.Connection, namespace: str, name: str) -> bool:
    """Remove the queue's row (its tasks keep their history). True when a row was removed."""
    deleted = conn.execute(
        queues.delete().where(queues.c.namespace == namespace, queues.c.name == name)
    )
    return deleted.rowcount == 1


def list_queues(conn: sa.Connection, namespace: str | None = None) -> list[tuple[str, str, str]]:
    """(namespace, name, source) of every declared queue."""
    query = sa.select(queues.c.namespace, queues.c.name, queues.c.source)
    if namespace is not None:
        query = query.where(queues.c.namespace == namespace)
    return [(r.namespace, r.name, r.source) for r in conn.execute(query)]


def undeclared_queues(conn: sa.Connection, namespace: str, names: list[str]) -> list[str]:
    """The names (other than the implicit default queue) no Queue declares in ``namespace``."""
    wanted = sorted({n for n in names if n != DEFAULT_QUEUE})
    if not wanted:
        return []
    found = set(
        conn.execute(
            sa.select(queues.c.name).where(
                queues.c.namespace == namespace, queues.c.name.in_(wanted)
            )
        ).scalars()
    )
    return [n for n in wanted if n not in found]
