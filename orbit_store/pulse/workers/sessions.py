"""Worker sessions (seed §3, ORBIT.md §6): register, renew, drain, close, revoke, expire.

Ending a session never decides a task's fate directly: it sets its attempts' leases to lapse
now, and the reaper applies the usual rules (safe tasks retried, unsafe ones to NEEDS_REVIEW).
Ending takes the session row exclusively; claims, starts and renewals read it under a shared
lock, so an end that commits first refuses them and one that comes later waits for them and
then cuts their leases (lock order: pod → session → gate → task → attempt).

A session declares the handlers it runs (``handlers``; NULL: any) and is granted only those.
Two live sessions never share a worker name: ``live_worker_name`` is unique per namespace and
set only while the session is live.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.errors import Conflict, NotFound
from orbit_store.ids import new_id
from orbit_store.passes import in_turn
from orbit_store.pulse.model import LIVE_SESSION_STATES
from orbit_store.pulse.state.attempts import LIVE_ATTEMPT_STATES, cut_leases
from orbit_store.pulse.state.outages import grace_expiry, serving_window
from orbit_store.schema import task_attempts, worker_pods, worker_sessions

LIVE = LIVE_SESSION_STATES


@dataclass(frozen=True)
class WorkerSession:
    id: str
    namespace: str
    worker_name: str
    generation: int
    state: str
    expires_at: dt.datetime
    handlers: list[str] | None = None


def _view(row: sa.Row[Any]) -> WorkerSession:
    return WorkerSession(
        row.id,
        row.namespace,
        row.worker_name,
        row.generation,
        row.state,
        row.expires_at,
        row.handlers,
    )


def session_is_live(conn: sa.Connection, namespace: str, session_id: str | None) -> bool:
    """Whether the session is ACTIVE or DRAINING, read under a shared lock (an end in flight
    waits for us, or we for it). No session (store-level callers): live."""
    if session_id is None:
        return True
    state = conn.execute(
        _SESSION_STATE, {"session_id": session_id, "namespace": namespace}
    ).scalar_one_or_none()
    return state in LIVE


#: Built once (hot path: every start); values are bound per call.
_SESSION_STATE = (
    sa.select(worker_sessions.c.state)
    .where(
        worker_sessions.c.id == sa.bindparam("session_id"),
        worker_sessions.c.namespace == sa.bindparam("namespace"),
    )
    .with_for_update(read=True)
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
    handlers: list[str] | None = None,
    registration_key: str | None = None,
) -> WorkerSession:
    """Open a session. The same worker name re-registering closes its older live sessions.

    ``registration_key`` (the client's, one per registration it means to make): a copy of a
    registration that already opened a session — a resend whose first try reached the database
    late — answers that session, whatever its state, and changes nothing. Without it a late
    copy would replace the session the worker is using and lapse the leases it is running.

    In cluster mode the pod's row is read under a shared lock: a pod deletion in flight either
    commits first (this registration is refused) or waits and then revokes this session too.
    Two registrations of one name racing: the loser hits the live-name unique key and raises
    IntegrityError; ``service.register`` runs it again, which then replaces the winner."""
    if registration_key is not None:
        made = _registered(conn, namespace, worker_name, registration_key)
        if made is not None:
            return made
    now = db_now(conn)
    pool = node = None
    if pod_uid is not None or require_registered_pod:
        # Only this namespace's pods: another namespace's pod is as unknown as no pod at all,
        # and its row is never read or locked here (one namespace per transaction).
        pod = conn.execute(
            sa.select(worker_pods)
            .where(worker_pods.c.uid == pod_uid, worker_pods.c.namespace == namespace)
            .with_for_update(read=True)
        ).one_or_none()
        if pod is None or pod.deleted_at is not None:
            raise Conflict(
                f"pod {pod_uid!r} is not a registered worker pod of namespace {namespace!r}; "
                "in cluster mode workers must run in a WorkerPool"
            )
        pool, node = pod.pool, pod.node
    live = conn.execute(
        sa.select(worker_sessions.c.id).where(
            worker_sessions.c.namespace == namespace,
            worker_sessions.c.live_worker_name == worker_name,
        )
    ).scalar_one_or_none()
    if live is not None and lock_session(conn, namespace, live).state in LIVE:  # by primary key
        end_session(
            conn, namespace, live, "CLOSED", "replaced by a newer session of the same worker", now
        )
    last = conn.execute(
        sa.select(sa.func.max(worker_sessions.c.generation)).where(
            worker_sessions.c.namespace == namespace, worker_sessions.c.worker_name == worker_name
        )
    ).scalar_one()
    session_id = new_id()
    generation = (last or 0) + 1
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
            handlers=sorted(set(handlers)) if handlers is not None else None,
            live_worker_name=worker_name,
            registration_key=registration_key,
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
        sorted(set(handlers)) if handlers is not None else None,
    )


def _registered(
    conn: sa.Connection, namespace: str, worker_name: str, registration_key: str
) -> WorkerSession | None:
    """The session ``registration_key`` already opened, if any (locked: an end in flight
    commits first or waits)."""
    row = conn.execute(
        sa.select(worker_sessions)
        .where(
            worker_sessions.c.namespace == namespace,
            worker_sessions.c.registration_key == registration_key,
        )
        .with_for_update(read=True)
    ).one_or_none()
    if row is None:
        return None
    if row.worker_name != worker_name:
        raise Conflict(
            f"registration_key {registration_key!r} opened a session of worker "
            f"{row.worker_name!r}, not {worker_name!r}: send a new key with each registration"
        )
    return _view(row)


def lock_session(conn: sa.Connection, namespace: str, session_id: str) -> sa.Row[Any]:
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
    row = lock_session(conn, namespace, session_id)
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
    return WorkerSession(
        row.id, row.namespace, row.worker_name, row.generation, row.state, expires, row.handlers
    )


def drain_session(conn: sa.Connection, *, namespace: str, session_id: str) -> WorkerSession:
    """Stop leasing new tasks; heartbeats and completions of running attempts continue."""
    row = lock_session(conn, namespace, session_id)
    if row.state == "ACTIVE":
        conn.execute(
            worker_sessions.update()
            .where(worker_sessions.c.id == session_id)
            .values(state="DRAINING")
        )
        return WorkerSession(
            row.id,
            row.namespace,
            row.worker_name,
            row.generation,
            "DRAINING",
            row.expires_at,
            row.handlers,
        )
    return _view(row)


def close_session(conn: sa.Connection, *, namespace: str, session_id: str) -> None:
    """The worker is leaving cleanly; anything it still holds lapses now."""
    row = lock_session(conn, namespace, session_id)
    if row.state in LIVE:
        end_session(conn, namespace, session_id, "CLOSED", "closed by worker", db_now(conn))


def revoke_session(conn: sa.Connection, *, namespace: str, session_id: str, reason: str) -> None:
    """Revoke (pod deleted or failed, admin action); its leases lapse through Pulse's rules."""
    row = lock_session(conn, namespace, session_id)
    if row.state in LIVE:
        end_session(conn, namespace, session_id, "REVOKED", reason, db_now(conn))


@dataclass(frozen=True)
class ExpiredSession:
    namespace: str
    session_id: str


def find_expired_sessions(
    conn: sa.Connection,
    *,
    limit: int = 100,
    namespace: str | None = None,
    skip: Collection[str] = (),
) -> list[ExpiredSession]:
    """Live sessions whose TTL passed without renewal, every namespace's oldest in turn; those
    in ``skip`` (backing off) are left out. A read: each is ended in its own one-namespace
    transaction by :func:`expire_session`."""
    query = sa.select(worker_sessions.c.namespace, worker_sessions.c.id).where(
        worker_sessions.c.state.in_(LIVE), worker_sessions.c.expires_at <= db_now(conn)
    )
    if namespace is not None:
        query = query.where(worker_sessions.c.namespace == namespace)
    if skip:
        query = query.where(worker_sessions.c.id.not_in(list(skip)))
    fair = in_turn(query, worker_sessions.c.namespace, worker_sessions.c.expires_at, limit)
    return [ExpiredSession(r.namespace, r.id) for r in conn.execute(fair)]


def expire_session(conn: sa.Connection, expired: ExpiredSession) -> bool:
    """End the session if it is still live and still past its TTL (re-checked under lock)."""
    row = lock_session(conn, expired.namespace, expired.session_id)
    now = db_now(conn)
    if row.state not in LIVE or row.expires_at > now:
        return False
    ttl = (row.expires_at - row.renewed_at).total_seconds()
    until = grace_expiry(serving_window(conn, now), row.expires_at, ttl)
    if until is not None and until > now:  # ran out in a server outage (pulse.outages)
        conn.execute(
            worker_sessions.update()
            .where(worker_sessions.c.id == expired.session_id)
            .values(expires_at=until)
        )
        return False
    end_session(conn, expired.namespace, expired.session_id, "EXPIRED", "not renewed in time", now)
    return True


def end_session(
    conn: sa.Connection, namespace: str, session_id: str, state: str, reason: str, now: dt.datetime
) -> None:
    """End a live session (its row is locked by the caller) and make its leases lapse now (the
    reaper decides each task). The session's attempts are found by a plain read and updated by
    primary key: no new one can appear (claims hold the session row shared), and a waiting lock
    through ix_task_attempts_session would deadlock with a completion that holds the attempt
    and changes its state."""
    conn.execute(
        worker_sessions.update()
        .where(worker_sessions.c.id == session_id)
        .values(state=state, ended_at=now, end_reason=reason[:255], live_worker_name=None)
    )
    attempts = conn.execute(
        sa.select(task_attempts.c.id).where(
            task_attempts.c.namespace == namespace,
            task_attempts.c.worker_session_id == session_id,
            task_attempts.c.state.in_(LIVE_ATTEMPT_STATES),
        )
    ).scalars()
    cut_leases(conn, list(attempts), now)
