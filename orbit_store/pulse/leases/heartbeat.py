"""Renewing leases (seed §5 "续租"): a batch, with a result per item.

Invariant 3: a renewal is a conditional UPDATE of the attempt row that matches only a live
attempt presenting its token, whose lease has not lapsed and whose session is still live. Every
path that supersedes an attempt finishes that same row first, so a stale holder can never extend.
The sessions are read under shared locks and the time after them: a revoke that commits first
makes the renewal lost; one that comes later waits, then cuts the renewed lease.
A lease is never extended past the attempt timeout or the task's deadline: from there it lapses
and the reaper applies the retry-safety rules.
A lease that ran out while no server replica was serving is renewable again (``outages``).
A renewal carries the handler's latest progress, written by the same UPDATE (``progress``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.db import by_primary_key
from orbit_store.fencing import current_epoch
from orbit_store.pulse.model import RenewRequest, RenewResult, RenewStatus
from orbit_store.pulse.state.attempts import LIVE_ATTEMPT_STATES, token_matches
from orbit_store.pulse.state.outages import extend_lease_after_outage
from orbit_store.pulse.state.progress import progress_columns, progress_problem
from orbit_store.schema import task_attempts, tasks, worker_sessions

LIVE_SESSION_STATES = ("ACTIVE", "DRAINING")


def renew_leases(
    conn: sa.Connection, *, namespace: str, items: list[RenewRequest]
) -> list[RenewResult]:
    """Extend each attempt's lease; report extended / cancel_requested / lost per item."""
    if not items:
        return []
    rows: dict[str, Any] = {
        row.id: row
        for row in conn.execute(
            sa.select(
                task_attempts.c.id,
                task_attempts.c.token_hash,
                task_attempts.c.state,
                task_attempts.c.lease_expires_at,
                task_attempts.c.started_at,
                task_attempts.c.worker_session_id,
                task_attempts.c.epoch,
                tasks.c.lease_seconds,
                tasks.c.attempt_timeout_seconds,
                tasks.c.deadline_at,
                tasks.c.cancel_requested,
                tasks.c.current_attempt_id,
            )
            .join(tasks, tasks.c.id == task_attempts.c.task_id)
            .where(
                task_attempts.c.namespace == namespace,
                task_attempts.c.id.in_([item.attempt_id for item in items]),
            )
        )
    }
    sessions = _lock_sessions(conn, namespace, {r.worker_session_id for r in rows.values()})
    now = db_now(conn)
    epoch = current_epoch(conn)  # restore fence (orbit_store/fencing.py)
    return [
        _renew_one(conn, item, rows.get(item.attempt_id), sessions, now, epoch) for item in items
    ]


def _lock_sessions(conn: sa.Connection, namespace: str, ids: set[str | None]) -> dict[str, str]:
    """The state of each session, under a shared lock (in id order)."""
    wanted = sorted(i for i in ids if i is not None)
    if not wanted:
        return {}
    rows = conn.execute(
        sa.select(worker_sessions.c.id, worker_sessions.c.state)
        .where(worker_sessions.c.namespace == namespace, worker_sessions.c.id.in_(wanted))
        .order_by(worker_sessions.c.id)
        .with_for_update(read=True)
    )
    return {row.id: row.state for row in rows}


def _renew_one(
    conn: sa.Connection,
    item: RenewRequest,
    row: sa.Row[Any] | None,
    sessions: dict[str, str],
    now: dt.datetime,
    epoch: int,
) -> RenewResult:
    def lost(reason: str) -> RenewResult:
        return RenewResult(item.attempt_id, RenewStatus.LOST, reason=reason)

    if row is None or not token_matches(item.token, row.token_hash):
        return lost("unknown attempt or wrong token")
    if row.epoch < epoch:  # restore fence (orbit_store/fencing.py)
        return lost(f"granted before a restore fence (epoch {row.epoch} < {epoch})")
    if row.state not in LIVE_ATTEMPT_STATES or row.current_attempt_id != item.attempt_id:
        return lost("attempt is no longer current")
    session_state = sessions.get(row.worker_session_id) if row.worker_session_id else None
    if session_state is not None and session_state not in LIVE_SESSION_STATES:
        return lost(f"worker session is {session_state}")
    if row.lease_expires_at <= now and (
        extend_lease_after_outage(conn, item.attempt_id, row.lease_seconds, now) is None
    ):
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
    refused = progress_problem(item.progress) if item.progress is not None else None
    values = {"lease_expires_at": expires, "heartbeat_at": now}
    if item.progress is not None and refused is None:
        values |= progress_columns(item.progress, now)
    extend = (
        task_attempts.update()
        .where(
            task_attempts.c.id == item.attempt_id,
            task_attempts.c.state.in_(LIVE_ATTEMPT_STATES),
            task_attempts.c.lease_expires_at > now,
        )
        .values(**values)
    )
    updated = conn.execute(by_primary_key(extend, task_attempts))
    if updated.rowcount != 1:
        return lost("attempt was superseded meanwhile")
    status = RenewStatus.CANCEL_REQUESTED if row.cancel_requested else RenewStatus.EXTENDED
    return RenewResult(
        item.attempt_id,
        status,
        lease_expires_at=expires,
        lease_remaining_seconds=(expires - now).total_seconds(),
        progress_refused=refused,
    )
