"""Delivery backlog per subscription: what the sender loop publishes as gauges each pass
(``orbit_delivery_backlog``, ``orbit_delivery_oldest_age_seconds``, ``orbit_deliveries_parked``).
A read-only snapshot across namespaces, like the queue-depth gauges."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.schema import event_deliveries, subscriptions

from .model import BacklogRow, DeliveryState

UNSETTLED = (DeliveryState.PENDING.value, DeliveryState.PARKED.value)


def delivery_backlog(conn: sa.Connection) -> list[BacklogRow]:
    """Every subscription (also those with nothing pending, so gauges drop back to 0). The
    counts are index range scans on (subscription_id, state): delivered history is not read."""
    now = db_now(conn)
    subs = conn.execute(
        sa.select(subscriptions.c.id, subscriptions.c.namespace, subscriptions.c.name)
    ).all()
    if not subs:
        return []
    counts = conn.execute(
        sa.select(
            event_deliveries.c.subscription_id,
            event_deliveries.c.state,
            sa.func.count(),
            sa.func.min(event_deliveries.c.created_at),
        )
        .where(
            event_deliveries.c.subscription_id.in_([sub.id for sub in subs]),
            event_deliveries.c.state.in_(UNSETTLED),
        )
        .group_by(event_deliveries.c.subscription_id, event_deliveries.c.state)
    ).all()
    by_subscription: dict[str, dict[str, tuple[int, dt.datetime | str | None]]] = {}
    for subscription_id, state, count, oldest in counts:
        by_subscription.setdefault(subscription_id, {})[state] = (int(count), oldest)
    rows = []
    for sub in subs:
        seen = by_subscription.get(sub.id, {})
        pending, oldest = seen.get(DeliveryState.PENDING.value, (0, None))
        parked, _ = seen.get(DeliveryState.PARKED.value, (0, None))
        age = 0.0
        if oldest is not None:
            first = dt.datetime.fromisoformat(oldest) if isinstance(oldest, str) else oldest
            age = max((now - first).total_seconds(), 0.0)
        rows.append(BacklogRow(sub.namespace, sub.name, pending, parked, age))
    return rows
