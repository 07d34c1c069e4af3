"""Redrive (an admin action, invariant 8): PARKED deliveries of a subscription go back to
PENDING with a fresh attempt budget, audited in the same transaction."""

from __future__ import annotations

import sqlalchemy as sa

from orbit_store.audit import record_audit
from orbit_store.clock import db_now
from orbit_store.schema import event_deliveries

from .model import DeliveryState
from .subscriptions import RESOURCE_KIND, lock_subscription
from .transitions import move

MAX_REDRIVE = 10_000


def redrive_parked(
    conn: sa.Connection,
    namespace: str,
    name: str,
    *,
    actor: str,
    reason: str,
    event_ids: list[str] | None = None,
) -> int:
    """Send parked deliveries again (all of them, or those of ``event_ids``); returns how many."""
    subscription = lock_subscription(conn, namespace, name)
    query = (
        sa.select(event_deliveries)
        .where(
            event_deliveries.c.subscription_id == subscription.id,
            event_deliveries.c.state == DeliveryState.PARKED.value,
        )
        .order_by(event_deliveries.c.id)
        .limit(MAX_REDRIVE)
        .with_for_update()
    )
    if event_ids is not None:
        query = query.where(event_deliveries.c.event_id.in_(event_ids))
    rows = conn.execute(query).all()
    now = db_now(conn)
    for row in rows:
        move(conn, row, DeliveryState.PENDING, now=now, attempts=0, next_attempt_at=now)
    record_audit(
        conn,
        namespace=namespace,
        actor=actor,
        action="subscription.redrive",
        resource_kind=RESOURCE_KIND,
        resource_id=name,
        resource_version=subscription.version,
        reason=reason,
        before={"parked": len(rows)},
        after={"redriven_event_ids": [row.event_id for row in rows][:100], "count": len(rows)},
        now=now,
    )
    return len(rows)
