"""A whole-server outage is not charged to the workers (its server-side half; the SDK keeps the
other, a lease deadline on its own clock).

While no server replica serves, no worker can renew its lease or report its outcome. A lease
(or a worker session) that ran out in such a gap — or runs out so soon after service resumed
that its holder had no fair chance to renew — is given a grace instead of being lapsed: it now
ends ``lease_seconds`` (the session: its TTL) after service resumed, as if renewed at that
moment. Its worker then renews or reports as usual; a worker that died meanwhile is lapsed when
the grace ends, by the ordinary rules (invariant 3: still only the current attempt applies;
invariant 7: an unsafe task still goes to review when its worker is truly lost).

A lease that ran out while a replica was serving is not touched: its worker had the chance.
All replicas decide from the same rows (``orbit_store.replicas``) and database time.
"""

from __future__ import annotations

import datetime as dt
import logging

import sqlalchemy as sa

from orbit_store.db import by_primary_key
from orbit_store.fencing import is_fenced
from orbit_store.replicas import ServingWindow, serving_window

__all__ = ["extend_lease_after_outage", "grace_expiry", "serving_window"]
from orbit_store.pulse.model import LIVE_SESSION_STATES
from orbit_store.pulse.state.attempts import LIVE_ATTEMPT_STATES
from orbit_store.schema import task_attempts, worker_sessions

log = logging.getLogger(__name__)


def grace_expiry(
    window: ServingWindow | None, expired_at: dt.datetime, renew_seconds: float
) -> dt.datetime | None:
    """The new expiry for a lease or session that ran out at ``expired_at``, or None when it
    is to lapse. ``renew_seconds``: what one renewal grants it (lease_seconds, session TTL)."""
    if window is None:
        return None
    if window.gap_began_at is not None and expired_at < window.gap_began_at:
        return None  # ran out while a replica was serving
    until = window.resumed_at + dt.timedelta(seconds=renew_seconds)
    if expired_at >= until:
        return None  # renewed (or granted) after service resumed: no outage to excuse
    return until


def extend_lease_after_outage(
    conn: sa.Connection, attempt_id: str, lease_seconds: float, now: dt.datetime
) -> dt.datetime | None:
    """Give a live attempt whose lease ran out in an outage its grace; returns the new expiry,
    or None when the lease is to lapse (or is no longer live and expired). A conditional update
    on the expiry that was read: a renewal or a lapse racing it wins."""
    row = conn.execute(
        sa.select(
            task_attempts.c.lease_expires_at,
            task_attempts.c.state,
            task_attempts.c.epoch,
            task_attempts.c.worker_session_id,
        ).where(task_attempts.c.id == attempt_id)
    ).one_or_none()
    if row is None or row.state not in LIVE_ATTEMPT_STATES or row.lease_expires_at > now:
        return None
    # Cut on purpose, not by an outage — a restore fence, or the end of the worker's session
    # (pod deleted, name re-registered, drained and closed): such a lease lapses at once.
    if is_fenced(conn, row.epoch) or _session_ended(conn, row.worker_session_id):
        return None
    until = grace_expiry(serving_window(conn, now), row.lease_expires_at, lease_seconds)
    if until is None or until <= now:
        return None
    extend = (
        task_attempts.update()
        .where(
            task_attempts.c.id == attempt_id,
            task_attempts.c.state.in_(LIVE_ATTEMPT_STATES),
            task_attempts.c.lease_expires_at == row.lease_expires_at,
        )
        .values(lease_expires_at=until)
    )
    updated = conn.execute(by_primary_key(extend, task_attempts))
    if updated.rowcount != 1:
        return None
    log.info(
        "lease ran out while no server replica was serving; extended",
        extra={"attempt_id": attempt_id, "until": until.isoformat()},
    )
    return until


def _session_ended(conn: sa.Connection, session_id: str | None) -> bool:
    """A plain read, not ``sessions.session_is_live``'s shared lock: every caller already holds
    the task's row lock, and the lock order puts sessions before task rows. A session that ends
    just after this read lapses its attempts itself when its end commits (``sessions``), so a
    grace given meanwhile does not outlive it. The id (a UUID of the attempt's own session)
    names one row; the attempt's namespace is the session's."""
    if session_id is None:
        return False
    state = conn.execute(
        sa.select(worker_sessions.c.state).where(worker_sessions.c.id == session_id)
    ).scalar_one_or_none()
    return state not in LIVE_SESSION_STATES
