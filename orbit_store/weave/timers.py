"""The timer loop's transactions: sleeps that are over, signal waits that timed out, poll rounds
that are due (the firing itself is ``firing``, run by ``advance``).

Every timer is persisted state — a wait's ``deadline_at``, a poll activation's ``next_poll_at``
— and the instance's ``wake_at`` is the earliest of them. The server's timer loop lists running,
unpaused instances whose ``wake_at`` has passed (:func:`due_instances`) and runs
:func:`wake_instance` for each: one transaction that fires what is due under the instance lock
(conditional updates, so a timer fires once) and advances. A paused instance's timers fire on
resume instead.
"""

from __future__ import annotations

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES
from orbit_store.schema import workflow_instances

from .advance import advance
from .context import lock_instance
from .model import AdvanceReport, InstanceState


def due_instances(
    conn: sa.Connection, *, limit: int = 100, namespace: str | None = None
) -> list[tuple[str, str]]:
    """(namespace, instance id) of running, unpaused instances with a timer due (no locks)."""
    query = (
        sa.select(workflow_instances.c.namespace, workflow_instances.c.id)
        .where(
            workflow_instances.c.state == InstanceState.RUNNING.value,
            workflow_instances.c.wake_at <= db_now(conn),
            workflow_instances.c.paused.is_(False),
        )
        .order_by(workflow_instances.c.wake_at)
        .limit(limit)
    )
    if namespace is not None:
        query = query.where(workflow_instances.c.namespace == namespace)
    return [(ns, instance_id) for ns, instance_id in conn.execute(query)]


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
