"""Pull delivery (seed §6.2): a consumer leases a batch of its subscription's events with an ack
deadline, then acknowledges the event ids it processed. Unacknowledged events come back after the
deadline; one handed out ``max_attempts`` times without an ack is PARKED (kept, counted,
alerted)."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.errors import Conflict, InvalidRequest
from orbit_store.schema import event_deliveries

from .leasing import MAX_BATCH, lease_due
from .model import AckStatus, DeliveryState, Mode, PulledBatch
from .subscriptions import lock_subscription
from .transitions import move

MAX_ACK_DEADLINE_SECONDS = 12 * 3600


def pull_events(
    conn: sa.Connection, namespace: str, name: str, *, limit: int, ack_deadline_seconds: float
) -> PulledBatch:
    """Lease up to ``limit`` due events of pull subscription ``name`` until the ack deadline."""
    if not 1 <= limit <= MAX_BATCH:
        raise InvalidRequest(f"limit must be between 1 and {MAX_BATCH}")
    if not 1 <= ack_deadline_seconds <= MAX_ACK_DEADLINE_SECONDS:
        raise InvalidRequest(
            f"ack_deadline_seconds must be between 1 and {MAX_ACK_DEADLINE_SECONDS}"
        )
    subscription = lock_subscription(conn, namespace, name)
    if subscription.mode != Mode.PULL.value:
        raise Conflict(f"subscription {name!r} is a push subscription: its events are sent to it")
    now = db_now(conn)
    hold = dt.timedelta(seconds=ack_deadline_seconds)
    leased, parked = lease_due(conn, subscription, limit=limit, now=now, hold=hold)
    return PulledBatch([item.event for item in leased], now + hold, parked)


MAX_ACK_IDS = 1000


def ack_events(
    conn: sa.Connection, namespace: str, name: str, event_ids: list[str]
) -> dict[str, AckStatus]:
    """Acknowledge events of subscription ``name``: each becomes DELIVERED (idempotent; an ack
    that arrives after its delivery was parked still counts — the consumer did process it)."""
    if len(event_ids) > MAX_ACK_IDS:
        raise InvalidRequest(f"acknowledge at most {MAX_ACK_IDS} event ids per call")
    subscription = lock_subscription(conn, namespace, name)
    wanted = sorted(set(event_ids))
    rows = conn.execute(
        sa.select(event_deliveries)
        .where(
            event_deliveries.c.subscription_id == subscription.id,
            event_deliveries.c.event_id.in_(wanted),
        )
        .order_by(event_deliveries.c.id)
        .with_for_update()
    ).all()
    found = {row.event_id: row for row in rows}
    now = db_now(conn) if rows else None
    statuses: dict[str, AckStatus] = {}
    for event_id in wanted:
        row = found.get(event_id)
        if row is None:
            statuses[event_id] = AckStatus.UNKNOWN
        elif row.state == DeliveryState.DELIVERED.value:
            statuses[event_id] = AckStatus.ALREADY_ACKED
        else:
            assert now is not None
            move(conn, row, DeliveryState.DELIVERED, now=now, last_error=None)
            statuses[event_id] = AckStatus.ACKED
    return statuses
