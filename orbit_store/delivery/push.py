"""Push delivery (seed §6.2): the webhook sender leases a batch of one subscription's due
deliveries (one namespace per transaction), sends them outside any transaction, then records
each outcome in its own transaction, guarded by the state_version its lease created.

A failure is retried after an exponential, capped, jittered backoff; the ``max_attempts``-th
failure PARKS the delivery (never dropped: counted in ``orbit_deliveries_parked``, redriven by an
admin). A report whose lease lapsed meanwhile is STALE and changes nothing.
"""

from __future__ import annotations

import datetime as dt
import random

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.errors import NotFound
from orbit_store.schema import event_deliveries, subscriptions

from .leasing import lease_due
from .model import DeliveryState, Mode, PushItem, PushResult
from .subscriptions import lock_subscription, subscription_from_row
from .transitions import LostRace, move

#: Extra time a lease gives beyond the HTTP timeout, for queuing in the sender's pool.
LEASE_MARGIN = dt.timedelta(seconds=30)


def push_subscriptions(conn: sa.Connection, namespace: str | None = None) -> list[tuple[str, str]]:
    """(namespace, name) of every push subscription (of ``namespace``, when given): the
    sender's work list (a read)."""
    query = sa.select(subscriptions.c.namespace, subscriptions.c.name).where(
        subscriptions.c.mode == Mode.PUSH.value
    )
    if namespace is not None:
        query = query.where(subscriptions.c.namespace == namespace)
    rows = conn.execute(query.order_by(subscriptions.c.namespace, subscriptions.c.name))
    return [(row.namespace, row.name) for row in rows]


def push_secret_refs(conn: sa.Connection, secret_refs: list[str]) -> list[tuple[str, str]]:
    """(namespace, secret_ref) of the push subscriptions naming any of ``secret_refs``, across
    namespaces: for the operator's log when secrets must move to their namespaces' folders (a
    read)."""
    rows = conn.execute(
        sa.select(subscriptions.c.namespace, subscriptions.c.secret_ref).where(
            subscriptions.c.mode == Mode.PUSH.value, subscriptions.c.secret_ref.in_(secret_refs)
        )
    )
    return [(row.namespace, row.secret_ref) for row in rows]


def lease_push_batch(
    conn: sa.Connection, namespace: str, name: str, *, limit: int, send_slots: int = 1
) -> list[PushItem]:
    """Lease up to ``limit`` due deliveries of push subscription ``name``. The lease lasts long
    enough for every item to be sent through ``send_slots`` parallel senders."""
    try:
        row = lock_subscription(conn, namespace, name)
    except NotFound:
        return []  # deleted since the sender listed it
    subscription = subscription_from_row(row)
    timeout = dt.timedelta(milliseconds=subscription.policy.timeout_ms)
    rounds = -(-limit // max(send_slots, 1))
    now = db_now(conn)
    hold = timeout * rounds + LEASE_MARGIN
    leased, _parked = lease_due(conn, row, limit=limit, now=now, hold=hold)
    assert subscription.url is not None and subscription.secret_ref is not None
    return [
        PushItem(
            delivery_id=item.delivery_id,
            namespace=namespace,
            subscription=name,
            state_version=item.state_version,
            url=subscription.url,
            secret_ref=subscription.secret_ref,
            timeout_seconds=timeout.total_seconds(),
            event=item.event,
        )
        for item in leased
    ]


def record_push_result(
    conn: sa.Connection,
    item: PushItem,
    *,
    error: str | None,
    rng: random.Random | None = None,
) -> PushResult:
    """Record one send: ``error`` None means the receiver answered 2xx."""
    row = conn.execute(
        sa.select(event_deliveries).where(
            event_deliveries.c.id == item.delivery_id,
            event_deliveries.c.namespace == item.namespace,
        )
    ).one_or_none()
    if row is None or row.state_version != item.state_version:
        return PushResult.STALE
    policy = subscription_from_row(
        conn.execute(
            sa.select(subscriptions).where(subscriptions.c.id == row.subscription_id)
        ).one()
    ).policy
    now = db_now(conn)
    try:
        if error is None:
            move(conn, row, DeliveryState.DELIVERED, now=now, last_error=None)
            return PushResult.DELIVERED
        if row.attempts >= policy.max_attempts:
            move(conn, row, DeliveryState.PARKED, now=now, last_error=error[:1024])
            return PushResult.PARKED
        delay = policy.backoff_after(row.attempts, rng)
        move(
            conn,
            row,
            DeliveryState.PENDING,
            now=now,
            next_attempt_at=now + delay,
            last_error=error[:1024],
        )
        return PushResult.FAILED
    except LostRace:
        return PushResult.STALE
