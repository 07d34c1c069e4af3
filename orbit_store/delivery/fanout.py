"""Fan-out (seed §5 "完成": 必要结果通知 in the outcome transaction; §6.2; invariant 6): one
delivery row per result event and matching subscription, inserted by the transaction that wrote
the event. UNIQUE (event_id, subscription_id) makes a duplicate impossible."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from orbit_store.ids import new_id
from orbit_store.schema import event_deliveries, subscriptions

from .model import DeliveryState, EventFilter

# Inserts built once: a fresh insert() costs its construction and cache key per call.
_INSERT_EVENT_DELIVERIES = event_deliveries.insert()


#: Built once (every outcome reads its namespace's subscriptions); the namespace is bound.
_SUBSCRIPTIONS = (
    sa.select(subscriptions.c.id, subscriptions.c.filter)
    .where(subscriptions.c.namespace == sa.bindparam("namespace"))
    .order_by(subscriptions.c.id)
    .with_for_update(read=True)
)


def fan_out(
    conn: sa.Connection, event_id: str, task: Any, task_state: str, *, now: dt.datetime
) -> int:
    """Insert the deliveries of result event ``event_id`` (of ``task``, now ``task_state``);
    returns how many. Runs inside Pulse's outcome transaction, after its own locks: the
    namespace's subscriptions are read in share mode, so none can be deleted before this
    transaction commits the deliveries that reference it."""
    return fan_out_many(conn, task.namespace, [(event_id, task, task_state)], now=now)


def fan_out_many(
    conn: sa.Connection,
    namespace: str,
    events: list[tuple[str, Any, str]],
    *,
    now: dt.datetime,
) -> int:
    """:func:`fan_out` for several result events of ``namespace`` — ``(event_id, task,
    task_state)`` each — written by one transaction: the subscriptions are read once and the
    deliveries inserted in one multi-row INSERT (a batch of completions). Returns how many."""
    if not events:
        return 0
    rows = conn.execute(_SUBSCRIPTIONS, {"namespace": namespace}).all()
    filters = [(row.id, EventFilter.from_json(row.filter)) for row in rows]
    deliveries = [
        _delivery(event_id, subscription_id, namespace, now)
        for event_id, task, task_state in events
        for subscription_id, event_filter in filters
        if event_filter.matches(queue=task.queue, handler=task.handler, task_state=task_state)
    ]
    if deliveries:
        conn.execute(_INSERT_EVENT_DELIVERIES, deliveries)
    return len(deliveries)


def _delivery(
    event_id: str, subscription_id: str, namespace: str, now: dt.datetime
) -> dict[str, Any]:
    return {
        "id": new_id(),
        "event_id": event_id,
        "subscription_id": subscription_id,
        "namespace": namespace,
        "state": DeliveryState.PENDING.value,
        "state_version": 1,
        "attempts": 0,
        "next_attempt_at": now,
        "created_at": now,
    }
