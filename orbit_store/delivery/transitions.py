"""The one way a delivery changes: a conditional UPDATE guarded by (state, state_version) whose
affected-row count is checked (invariant 6: a report from a lapsed sender never overwrites a
newer attempt)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from orbit_store.schema import event_deliveries

from .model import LEGAL_MOVES, DeliveryState


class LostRace(Exception):
    """The delivery is no longer at the state/version that was read."""


def move(
    conn: sa.Connection,
    delivery: Any,
    to_state: DeliveryState,
    *,
    now: dt.datetime,
    **values: Any,
) -> int:
    """Move ``delivery`` (a row read under lock, or the version a lease handed out) to
    ``to_state``; returns the new state_version. Raises :class:`LostRace` when it moved on."""
    from_state = DeliveryState(delivery.state)
    if (from_state, to_state) not in LEGAL_MOVES:
        raise ValueError(f"illegal delivery move {from_state} -> {to_state} ({delivery.id})")
    values.setdefault("delivered_at", now if to_state is DeliveryState.DELIVERED else None)
    values.setdefault("parked_at", now if to_state is DeliveryState.PARKED else None)
    new_version = int(delivery.state_version) + 1
    updated = conn.execute(
        event_deliveries.update()
        .where(
            event_deliveries.c.id == delivery.id,
            event_deliveries.c.state == from_state.value,
            event_deliveries.c.state_version == delivery.state_version,
        )
        .values(state=to_state.value, state_version=new_version, **values)
    )
    if updated.rowcount != 1:
        seen = f"{from_state}@{delivery.state_version}"
        raise LostRace(f"delivery {delivery.id} moved on from {seen}")
    return new_version
