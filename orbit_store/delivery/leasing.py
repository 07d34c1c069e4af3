"""Handing out due deliveries — shared by pull (a consumer leases a batch with an ack deadline)
and push (the sender leases a batch for the length of its HTTP calls).

Due rows are found by a plain read of the subscription's range of the due index, then locked by
primary key with ``FOR UPDATE SKIP LOCKED`` (two consumers or two server replicas never wait on,
nor receive, the same rows in one round) and each is moved by ``transitions.move``: a delivery
handed out ``max_attempts`` times already is PARKED instead of handed out again.

Why not one locking range scan: InnoDB also locks the first index entry past the range it scans
— the next subscription's first due entry, another namespace's perhaps. A lease of that next
subscription would then skip a committed, due delivery of its own for a lock it has nothing to
do with, for as long as the neighbour's transaction lasts (an empty pull; a push sent late).
Locking by primary key locks only the rows named. The price: two consumers pulling one
subscription at the same instant read the same first ``limit`` due ids, so the second gets only
those the first did not lock (often none) in that round, where a range scan would have gone on
to the next ones; it asks again, as it would after an empty round anyway.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.db import by_primary_key
from orbit_store.schema import event_deliveries, result_events

from .model import DeliveryState, ResultEvent
from .transitions import move

MAX_BATCH = 500


@dataclass(frozen=True)
class Leased:
    delivery_id: str
    state_version: int
    event: ResultEvent


def lease_due(
    conn: sa.Connection,
    subscription: Any,
    *,
    limit: int,
    now: dt.datetime,
    hold: dt.timedelta,
) -> tuple[list[Leased], int]:
    """Lease up to ``limit`` due deliveries of ``subscription`` until ``now + hold``;
    returns (leased, parked)."""
    is_due = (
        event_deliveries.c.subscription_id == subscription.id,
        event_deliveries.c.state == DeliveryState.PENDING.value,
        event_deliveries.c.next_attempt_at <= now,
    )
    in_order = (event_deliveries.c.next_attempt_at, event_deliveries.c.id)
    candidates = (
        conn.execute(
            sa.select(event_deliveries.c.id)
            .where(*is_due)
            .order_by(*in_order)
            .limit(min(limit, MAX_BATCH))
        )
        .scalars()
        .all()
    )
    if not candidates:
        return [], 0
    # Locked by primary key; the conditions again, on the latest committed row: one that a
    # concurrent lease took since the read above is locked (skipped) or no longer due.
    due = conn.execute(
        by_primary_key(
            sa.select(event_deliveries)
            .where(event_deliveries.c.id.in_(candidates), *is_due)
            .order_by(*in_order)
            .with_for_update(skip_locked=True),
            event_deliveries,
        )
    ).all()
    leased: list[tuple[Any, int]] = []
    parked = 0
    for row in due:
        if row.attempts >= subscription.max_attempts:
            move(
                conn,
                row,
                DeliveryState.PARKED,
                now=now,
                last_error=(row.last_error or f"not delivered after {row.attempts} attempts"),
            )
            parked += 1
            continue
        version = move(
            conn,
            row,
            DeliveryState.PENDING,
            now=now,
            attempts=row.attempts + 1,
            next_attempt_at=now + hold,
            last_attempt_at=now,
        )
        leased.append((row, version))
    events = _events(conn, subscription.namespace, [row.event_id for row, _ in leased])
    return [
        Leased(row.id, version, _event(events[row.event_id], row.attempts + 1))
        for row, version in leased
    ], parked


def _events(conn: sa.Connection, namespace: str, ids: list[str]) -> dict[str, Any]:
    if not ids:
        return {}
    rows = conn.execute(
        sa.select(result_events).where(
            result_events.c.namespace == namespace, result_events.c.id.in_(ids)
        )
    )
    return {row.id: row for row in rows}


def _event(row: Any, attempt: int) -> ResultEvent:
    return ResultEvent(
        id=row.id,
        namespace=row.namespace,
        kind=row.kind,
        task_id=row.task_id,
        task_state=row.task_state,
        state_version=row.state_version,
        queue=row.queue,
        handler=row.handler,
        payload=row.payload,
        created_at=row.created_at,
        attempt=attempt,
    )
