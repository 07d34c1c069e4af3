"""Worker pods the operator registered (ORBIT.md §10): in cluster mode a worker session must
name a registered, live pod; when the pod goes away its sessions are revoked and their leases
lapse through Pulse's rules."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.pulse.workers.sessions import LIVE, end_session, lock_session
from orbit_store.schema import worker_pods, worker_sessions


@dataclass(frozen=True)
class PodInfo:
    uid: str
    namespace: str
    pod_name: str
    pool: str
    node: str | None
    phase: str


def register_pod(conn: sa.Connection, pod: PodInfo) -> bool:
    """Create or update the pod's row; True when anything changed."""
    now = db_now(conn)
    row = conn.execute(
        sa.select(worker_pods).where(worker_pods.c.uid == pod.uid).with_for_update()
    ).one_or_none()
    values = {
        "namespace": pod.namespace,
        "pod_name": pod.pod_name,
        "pool": pod.pool,
        "node": pod.node,
        "phase": pod.phase,
    }
    if row is None:
        conn.execute(worker_pods.insert().values(uid=pod.uid, registered_at=now, **values))
        return True
    if row.deleted_at is None and all(getattr(row, k) == v for k, v in values.items()):
        return False
    conn.execute(
        worker_pods.update().where(worker_pods.c.uid == pod.uid).values(deleted_at=None, **values)
    )
    return True


def forget_pod(conn: sa.Connection, uid: str, reason: str) -> int:
    """The pod is gone (deleted, failed): mark it and revoke its live sessions. Returns how many
    sessions were revoked; their leases lapse now and the reaper applies the usual rules."""
    now = db_now(conn)
    conn.execute(
        worker_pods.update()
        .where(worker_pods.c.uid == uid, worker_pods.c.deleted_at.is_(None))
        .values(deleted_at=now, phase="Deleted")
    )
    # The pod's sessions are of its namespace (register_session checks it): one namespace
    # per transaction. Found by a plain read, then each locked by primary key (lock order; a
    # registration in flight holds the pod row shared, so none can appear once we hold it
    # exclusively).
    pod_namespace = conn.execute(
        sa.select(worker_pods.c.namespace).where(worker_pods.c.uid == uid)
    ).scalar_one_or_none()
    found = conn.execute(
        sa.select(worker_sessions.c.id, worker_sessions.c.namespace).where(
            worker_sessions.c.namespace == pod_namespace,
            worker_sessions.c.pod_uid == uid,
            worker_sessions.c.state.in_(LIVE),
        )
    ).all()
    revoked = 0
    for session_id, namespace in sorted(found):
        if lock_session(conn, namespace, session_id).state in LIVE:
            end_session(conn, namespace, session_id, "REVOKED", reason, now)
            revoked += 1
    return revoked


def pool_pods(conn: sa.Connection, namespace: str, pool: str) -> list[PodInfo]:
    rows = conn.execute(
        sa.select(worker_pods).where(
            worker_pods.c.namespace == namespace,
            worker_pods.c.pool == pool,
            worker_pods.c.deleted_at.is_(None),
        )
    )
    return [PodInfo(r.uid, r.namespace, r.pod_name, r.pool, r.node, r.phase) for r in rows]


def pool_live_sessions(conn: sa.Connection, namespace: str, pool: str) -> int:
    """Workers of the pool with a live session (the WorkerPool's WORKERS column)."""
    return int(
        conn.execute(
            sa.select(sa.func.count())
            .select_from(worker_sessions)
            .where(
                worker_sessions.c.namespace == namespace,
                worker_sessions.c.pool == pool,
                worker_sessions.c.state.in_(LIVE),
            )
        ).scalar_one()
    )
