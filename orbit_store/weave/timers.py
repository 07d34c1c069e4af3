"""The timer loop's transactions: sleeps that are over, signal waits that timed out, poll rounds
that are due (the firing itself is ``firing``, run by ``advance``).

Every timer is persisted state — a wait's ``deadline_at``, a poll activation's ``next_poll_at``
— and the instance's ``wake_at`` is the earliest of them. The server's timer loop lists running,
unpaused instances whose ``wake_at`` has passed (:func:`due_instances`) and fires them in sets
(``timer_set``); :func:`wake_instance` fires an instance a set leaves alone: one transaction that
fires what is due under the instance lock (conditional updates, so a timer fires once) and
advances. A paused instance's timers fire on resume instead. Between passes the loop sleeps
until the next timer (:func:`seconds_to_next_timer`).

A firing that fails (a quota refuses the next step's task) rolls back; :func:`record_failure`
then backs that instance off alone — failures in a row, the error and the retry time on the
instance — and :func:`due_instances` skips it until then, so it never takes the batch that
other instances' timers need. The next firing that works clears the record (``flush``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import as_db_time, db_now, utc_now
from orbit_store.passes import in_turn
from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES
from orbit_store.schema import workflow_instances

from .advance import advance
from .context import lock_instance
from .model import AdvanceReport, InstanceState

#: Retry delays of an instance whose timers failed to fire (doubling, capped).
RETRY_BASE_SECONDS, RETRY_MAX_SECONDS = 1.0, 300.0


def _may_fire(now: Any) -> list[Any]:
    """An instance whose timers may fire: running, unpaused and not backing off at ``now``."""
    return [
        workflow_instances.c.state == InstanceState.RUNNING.value,
        workflow_instances.c.paused.is_(False),
        sa.or_(
            workflow_instances.c.timer_retry_at.is_(None),
            workflow_instances.c.timer_retry_at <= now,
        ),
    ]


def due_instances(
    conn: sa.Connection, *, limit: int = 100, namespace: str | None = None
) -> list[tuple[str, str]]:
    """(namespace, instance id) of running, unpaused instances with a timer due and not
    backing off (no locks): every namespace's oldest in turn — its first, then its second, … —
    so a burst of due timers in one namespace never holds back another's."""
    now = db_now(conn)
    # An instance backing off queues at its retry time, behind timers due before it.
    due_at = sa.func.coalesce(workflow_instances.c.timer_retry_at, workflow_instances.c.wake_at)
    due = sa.select(workflow_instances.c.namespace, workflow_instances.c.id).where(
        workflow_instances.c.wake_at <= now, *_may_fire(now)
    )
    if namespace is not None:
        due = due.where(workflow_instances.c.namespace == namespace)
    query = in_turn(due, workflow_instances.c.namespace, due_at, limit)
    return [(ns, instance_id) for ns, instance_id in conn.execute(query)]


def seconds_to_next_timer(conn: sa.Connection, *, namespace: str | None = None) -> float | None:
    """Seconds from now (database time) to the earliest ``wake_at`` of a running, unpaused
    instance that is not backing off, zero if one is due, None if there is none: the timer loop
    wakes for it instead of finding it up to a poll interval late. An instance backing off is
    left out (its retry is found by the next poll), so a failing firing never makes the loop
    spin. Walks ``ix_workflow_instances_wake`` (state, wake_at) in order and reads one row."""
    now = db_now(conn)
    query = (
        sa.select(workflow_instances.c.wake_at)
        .where(workflow_instances.c.wake_at.is_not(None), *_may_fire(now))
        .order_by(workflow_instances.c.wake_at)
        .limit(1)
    )
    if namespace is not None:
        query = query.where(workflow_instances.c.namespace == namespace)
    earliest = conn.execute(query).scalar_one_or_none()
    return None if earliest is None else max(0.0, (earliest - now).total_seconds())


def wake_instance(
    conn: sa.Connection,
    *,
    namespace: str,
    instance_id: str,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> AdvanceReport:
    """Fire the instance's due timers and advance it (a no-op if another replica did)."""
    ctx = lock_instance(conn, namespace, instance_id, max_payload_bytes=max_payload_bytes)
    advance(ctx)
    ctx.flush()
    return ctx.report


def record_failure(conn: sa.Connection, *, namespace: str, instance_id: str, error: str) -> None:
    """The instance's firing failed and rolled back: count it, keep the error for the
    instance's view, and retry it alone after a doubling delay (ORBIT.md §3)."""
    row = conn.execute(
        sa.select(workflow_instances.c.timer_failures, utc_now().label("db_now"))
        .where(
            workflow_instances.c.id == instance_id,
            workflow_instances.c.namespace == namespace,
        )
        .with_for_update()
    ).one_or_none()
    if row is None:
        return
    failures = row.timer_failures or 0
    delay = min(RETRY_BASE_SECONDS * 2 ** min(failures, 16), RETRY_MAX_SECONDS)
    conn.execute(
        workflow_instances.update()
        .where(workflow_instances.c.id == instance_id)
        .values(
            timer_failures=failures + 1,
            timer_retry_at=as_db_time(conn, row.db_now) + dt.timedelta(seconds=delay),
            timer_error=error[:1024],
        )
    )
