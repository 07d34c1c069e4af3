"""Worker sessions as people look at them (``GET …/worker-sessions``, the console's Workers page):
who is connected, from which pod, serving what, when it last renewed. Read-only, one namespace.

Live sessions (ACTIVE, DRAINING) first, then the most recently ended ones, so a worker that just
went away is still visible with its end reason.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.pulse.model import LIVE_SESSION_STATES
from orbit_store.pulse.state.attempts import LIVE_ATTEMPT_STATES
from orbit_store.schema import task_attempts, worker_pods, worker_sessions

MAX_ENDED = 200


@dataclass(frozen=True)
class SessionView:
    id: str
    worker_name: str
    generation: int
    state: str
    queues: list[str]
    handlers: list[str] | None
    pod_uid: str | None
    pod_name: str | None
    pool: str | None
    node: str | None
    created_at: dt.datetime
    renewed_at: dt.datetime
    expires_at: dt.datetime
    ended_at: dt.datetime | None
    end_reason: str | None
    live_attempts: int


def list_sessions(
    conn: sa.Connection, namespace: str, *, ended: int = 20
) -> tuple[dt.datetime, list[SessionView]]:
    """Database now, and the live sessions of ``namespace`` then up to ``ended`` ended ones
    (newest first), each with its count of live attempts."""
    s = worker_sessions.c
    columns = [*worker_sessions.c, worker_pods.c.pod_name]
    base = sa.select(*columns).select_from(
        worker_sessions.outerjoin(worker_pods, worker_pods.c.uid == s.pod_uid)
    )
    live = conn.execute(
        base.where(s.namespace == namespace, s.state.in_(LIVE_SESSION_STATES)).order_by(s.id)
    ).all()
    gone: list[Any] = []
    if ended > 0:
        gone = list(
            conn.execute(
                base.where(s.namespace == namespace, s.state.not_in(LIVE_SESSION_STATES))
                .order_by(s.id.desc())
                .limit(min(ended, MAX_ENDED))
            )
        )
    rows = [*live, *gone]
    attempts = _live_attempts(conn, [r.id for r in live])
    return db_now(conn), [_view(r, attempts.get(r.id, 0)) for r in rows]


def _live_attempts(conn: sa.Connection, session_ids: list[str]) -> dict[str, int]:
    if not session_ids:
        return {}
    rows = conn.execute(
        sa.select(task_attempts.c.worker_session_id, sa.func.count())
        .where(
            task_attempts.c.worker_session_id.in_(session_ids),
            task_attempts.c.state.in_(LIVE_ATTEMPT_STATES),
        )
        .group_by(task_attempts.c.worker_session_id)
    ).all()
    return {session_id: int(n) for session_id, n in rows}


def _view(row: Any, live_attempts: int) -> SessionView:
    return SessionView(
        id=row.id,
        worker_name=row.worker_name,
        generation=row.generation,
        state=row.state,
        queues=list(row.queues),
        handlers=None if row.handlers is None else list(row.handlers),
        pod_uid=row.pod_uid,
        pod_name=row.pod_name,
        pool=row.pool,
        node=row.node,
        created_at=row.created_at,
        renewed_at=row.renewed_at,
        expires_at=row.expires_at,
        ended_at=row.ended_at,
        end_reason=row.end_reason,
        live_attempts=live_attempts,
    )
