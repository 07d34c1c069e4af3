"""Worker sessions (seed §3, ORBIT.md §6): register, renew, drain, close, revoke, expire.

Ending a session never decides a task's fate directly: it sets its attempts' leases to lapse
now, and the reaper applies the usual rules (safe tasks retried, unsafe ones to NEEDS_REVIEW).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.errors import Conflict, NotFound
from orbit_store.ids import new_id
from orbit_store.schema import task_attempts, worker_pods, worker_sessions

from .attempts import LIVE_ATTEMPT_STATES

LIVE = ("ACTIVE", "DRAINING")


@dataclass(frozen=True)
class WorkerSession:
    id: str
    namespace: str
    worker_name: str
    generation: int
    state: str
    expires_at: dt.datetime


def _view(row: sa.Row[Any]) -> WorkerSession:
    return WorkerSession(
        row.id, row.namespace, row.worker_name, row.generation, row.state, row.expires_at
    )


def register_session(
    conn: sa.Connection,
    *,
    namespace: str,
    worker_name: str,
    queues: list[str],
    ttl_seconds: int = 60,
    pod_uid: str | None = None,
    require_registered_pod: bool = False,
) -> WorkerSession:
    """Open a session. The same worker name re-registering closes its older live sessions."""
    now = db_now(conn)
    pool = node = None
    if pod_uid is not None or require_registered_pod:
        pod = conn.execute(sa.select(worker_pods).where(worker_pods.c.uid == pod_uid)).one_or_none()
        if pod is None or pod.deleted_at is not None or pod.namespace != namespace:
            raise Conflict(
                f"pod {pod_uid!r} is not a registered worker pod of namespace {namespace!r}; "
                "in cluster mode workers must run in a WorkerPool"
            )
        pool, node = pod.pool, pod.node
    previous = conn.execute(
        sa.select(worker_sessions.c.id, worker_sessions.c.generation, worker_sessions.c.state)
        .where(
            worker_sessions.c.namespace == namespace, worker_sessions.c.worker_name == worker_name
        )
        .with_for_update()
    ).all()
    for old in previous:
        if old.state in LIVE:
            end_session(
                conn, old.id, "CLOSED", "replaced by a newer session of the same worker", now
            )
    session_id = new_id()
    generation = max((p.generation for p in previous), default=0) + 1
    conn.execute(
        worker_sessions.insert().values(
            id=session_id,
            namespace=namespace,
            worker_name=worker_name,
            pod_uid=pod_uid,
            pool=pool,
            node=node,
            generation=generation,
            state="ACTIVE",
            queues=queues,
            created_at=now,
            renewed_at=now,
            expires_at=now + dt.timedelta(seconds=ttl_seconds),
        )
    )
    return WorkerSession(
        session_id,
        namespace,
        worker_name,
        generation,
        "ACTIVE",
        now + dt.timedelta(seconds=ttl_seconds),
    )


def _lock(conn: sa.Connection, namespace: str, session_id: str) -> sa.Row[Any]:
    row = conn.execute(
        sa.select(worker_sessions)
        .where(worker_sessions.c.id == session_id, worker_sessions.c.namespace == namespace)
        .with_for_update()
    ).one_or_none()
    if row is None:
        raise NotFound(f"worker session {session_id} not found in namespace {namespace!r}")
    return row


def renew_session(
    conn: sa.Connection, *, namespace: str, session_id: str, ttl_seconds: int | None = None
) -> WorkerSession:
    """Extend the session by its own TTL (the one it registered with) unless told otherwise."""
    row = _lock(conn, namespace, session_id)
    if row.state not in LIVE:
        raise Conflict(f"worker session {session_id} is {row.state}; register a new one")
    now = db_now(conn)
    ttl = (
        row.expires_at - row.renewed_at
        if ttl_seconds is None
        else dt.timedelta(seconds=ttl_seconds)
    )
    expires = now + ttl
    conn.execute(
        worker_sessions.update()
        .where(worker_sessions.c.id == session_id)
        .values(renewed_at=now, expires_at=expires)
    )
    return WorkerSession(row.id, row.namespace, row.worker_name, row.generation, row.state, expires)


def drain_session(conn: sa.Connection, *, namespace: str, session_id: str) -> WorkerSession:
    """Stop leasing new tasks; heartbeats and completions of running attempts continue."""
    row = _lock(conn, namespace, session_id)
    if row.state == "ACTIVE":
        conn.execute(
            worker_sessions.update()
            .where(worker_sessions.c.id == session_id)
            .values(state="DRAINING")
        )
        return WorkerSession(
            row.id, row.namespace, row.worker_name, row.generation, "DRAINING", row.expires_at
        )
    return _view(row)


def close_session(conn: sa.Connection, *, namespace: str, session_id: str) -> None:
    """The worker is leaving cleanly; anything it still holds lapses now."""
    row = _lock(conn, namespace, session_id)
    if row.state in LIVE:
        end_session(conn, session_id, "CLOSED", "closed by worker", db_now(conn))


def revoke_session(conn: sa.Connection, *, namespace: str, session_id: str, reason: str) -> None:
    """Revoke (pod deleted or failed, admin action); its leases lapse through Pulse's rules."""
    row = _lock(conn, namespace, session_id)
    if row.state in LIVE:
        end_session(conn, session_id, "REVOKED", reason, db_now(conn))


def expire_sessions(conn: sa.Connection, *, limit: int = 100, namespace: str | None = None) -> int:
    """End live sessions whose TTL passed without renewal."""
    now = db_now(conn)
    query = (
        sa.select(worker_sessions.c.id)
        .where(worker_sessions.c.state.in_(LIVE), worker_sessions.c.expires_at <= now)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    if namespace is not None:
        query = query.where(worker_sessions.c.namespace == namespace)
    ids = conn.execute(query).scalars().all()
    for session_id in ids:
        end_session(conn, session_id, "EXPIRED", "not renewed in time", now)
    return len(ids)


def end_session(
    conn: sa.Connection, session_id: str, state: str, reason: str, now: dt.datetime
) -> None:
    """End a live session and make its leases lapse now (the reaper decides each task)."""
    conn.execute(
        worker_sessions.update()
        .where(worker_sessions.c.id == session_id)
        .values(state=state, ended_at=now, end_reason=reason[:255])
    )
    conn.execute(
        task_attempts.update()
        .where(
            task_attempts.c.worker_session_id == session_id,
            task_attempts.c.state.in_(LIVE_ATTEMPT_STATES),
            task_attempts.c.lease_expires_at > now,
        )
        .values(lease_expires_at=now)
    )
