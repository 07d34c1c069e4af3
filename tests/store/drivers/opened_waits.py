"""What an instance looks like once its next step opened a signal wait or a sleep, compared
between the set path and the single path (tests of ``inbox_set`` and ``timer_set``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from orbit_store.schema import workflow_activations, workflow_waits

from .weave_driver import WeaveDriver


def end_state(weave: WeaveDriver, wf: str) -> dict[str, Any]:
    """Its steps, history and waits — each wait's deadline as an offset from its activation's
    start, as the two paths ran at different instants — and whether ``wake_at`` is the
    earliest deadline of its waits still WAITING."""
    query = (
        sa.select(
            workflow_activations.c.step_name,
            workflow_activations.c.created_at.label("opened_at"),
            workflow_activations.c.deadline_at.label("activation_deadline"),
            workflow_waits.c.kind,
            workflow_waits.c.signal_name,
            workflow_waits.c.state,
            workflow_waits.c.deadline_at,
            workflow_waits.c.created_at,
        )
        .join(workflow_activations, workflow_activations.c.id == workflow_waits.c.activation_id)
        .where(workflow_waits.c.instance_id == wf)
        .order_by(workflow_activations.c.step_name, workflow_waits.c.created_at)
    )
    rows = weave.tx(lambda conn: list(conn.execute(query)))
    waits = [
        (
            row.step_name,
            row.kind,
            row.signal_name,
            row.state,
            _offset(row.deadline_at, row.opened_at),
            row.deadline_at == row.activation_deadline and row.created_at == row.opened_at,
        )
        for row in rows
    ]
    waiting = [row.deadline_at for row in rows if row.state == "WAITING" and row.deadline_at]
    return {
        "steps": weave.step_states(wf),
        "history": weave.history(wf),
        "waits": waits,
        "wake_at_is_earliest_wait": weave.instance(wf).wake_at == min(waiting, default=None),
    }


def _offset(deadline: dt.datetime | None, opened: dt.datetime) -> float | None:
    return None if deadline is None else (deadline - opened).total_seconds()
