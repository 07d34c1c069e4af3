"""Renewing leases (seed §5 "续租"): a batch, with a result per item.

Invariant 3: a renewal is a conditional UPDATE of the attempt row that matches only a live
attempt presenting its token, whose lease has not lapsed and whose session is still live. Every
path that supersedes an attempt finishes that same row first, so a stale holder can never extend.
A lease is never extended past the attempt timeout or the task's deadline: from there it lapses
and the reaper applies the retry-safety rules.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.schema import task_attempts, tasks, worker_sessions

from .attempts import LIVE_ATTEMPT_STATES, token_matches
from .model import RenewRequest, RenewResult, RenewStatus

LIVE_SESSION_STATES = ("ACTIVE", "DRAINING")


def renew_leases(
    conn: sa.Connection, *, namespace: str, items: list[RenewRequest]
) -> list[RenewResult]:
    """Extend each attempt's lease; report extended / cancel_requested / lost per item."""
    if not items:
        return []
    now = db_now(conn)
    rows: dict[str, Any] = {
        row.id: row
        for row in conn.execute(
            sa.select(
                task_attempts.c.id,
                task_attempts.c.token_hash,
                task_attempts.c.state,
                task_attempts.c.lease_expires_at,
                task_attempts.c.started_at,
                tasks.c.lease_seconds,
                tasks.c.attempt_timeout_seconds,
                tasks.c.deadline_at,
                tasks.c.cancel_requested,
                tasks.c.current_attempt_id,
                worker_sessions.c.state.label("session_state"),
            )
            .join(tasks, tasks.c.id == task_attempts.c.task_id)
            .outerjoin(worker_sessions, worker_sessions.c.id == task_attempts.c.worker_session_id)
            .where(
                task_attempts.c.namespace == namespace,
                task_attempts.c.id.in_([item.attempt_id for item in items]),
            )
        )
    }
    return [_renew_one(conn, item, rows.get(item.attempt_id), now) for item in items]


def _renew_one(
    conn: sa.Connection, item: RenewRequest, row: sa.Row[Any] | None, now: dt.datetime
) -> RenewResult:
    def lost(reason: str) -> RenewResult:
        return RenewResult(item.attempt_id, RenewStatus.LOST, reason=reason)

    if row is None or not token_matches(item.token, row.token_hash):
        return lost("unknown attempt or wrong token")
    if row.state not in LIVE_ATTEMPT_STATES or row.current_attempt_id != item.attempt_id:
        return lost("attempt is no longer current")
    if row.session_state is not None and row.session_state not in LIVE_SESSION_STATES:
        return lost(f"worker session is {row.session_state}")
    if row.lease_expires_at <= now:
        return lost("lease lapsed")
    expires = now + dt.timedelta(seconds=row.lease_seconds)
    caps = [row.deadline_at]
    if row.attempt_timeout_seconds is not None and row.started_at is not None:
        caps.append(row.started_at + dt.timedelta(seconds=row.attempt_timeout_seconds))
    for cap in caps:
        if cap is not None:
            expires = min(expires, cap)
    if expires <= now:
        return lost("attempt timeout or task deadline reached")
    updated = conn.execute(
        task_attempts.update()
        .where(
            task_attempts.c.id == item.attempt_id,
            task_attempts.c.state.in_(LIVE_ATTEMPT_STATES),
            task_attempts.c.lease_expires_at > now,
        )
        .values(lease_expires_at=expires, heartbeat_at=now)
    )
    if updated.rowcount != 1:
        return lost("attempt was superseded meanwhile")
    status = RenewStatus.CANCEL_REQUESTED if row.cancel_requested else RenewStatus.EXTENDED
    return RenewResult(item.attempt_id, status, lease_expires_at=expires)
