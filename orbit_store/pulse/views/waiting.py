"""Why a WAITING task has not started, as causes a person can act on: the task page's "why it
waits" (``waiting_causes`` in ``GET …/tasks/{id}``). Read-only, one namespace, a handful of
primary-key and index reads, for one task at a time (never per row of a list).

A cause names what holds the task and says so in words: not due yet (``scheduled``); its
workflow is paused (``gate_closed``, with the gate's owner); its concurrency key has no free
permit (``concurrency_limit``, permits held of the limit); its queue is paused
(``queue_paused``); a max-running quota of its scope is full (``quota_full``: claims skip it,
``claim``); no live worker session serves its queue and handler (``no_live_worker``). No cause:
it is ready and the next free worker takes it.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.pulse.limits.quota import WHOLE_NAMESPACE
from orbit_store.pulse.model import TaskState, WaitPath
from orbit_store.pulse.views.routing import live_workers
from orbit_store.schema import concurrency_keys, execution_gates, queues, quotas, tasks


@dataclass(frozen=True)
class WaitCause:
    kind: str
    detail: str


def waiting_causes(conn: sa.Connection, namespace: str, task_id: str) -> list[WaitCause]:
    """Every cause that holds the WAITING task ``task_id`` now; [] for a task in another state,
    one that is ready, or none at all."""
    task = conn.execute(
        sa.select(tasks).where(tasks.c.id == task_id, tasks.c.namespace == namespace)
    ).one_or_none()
    if task is None or task.state != TaskState.WAITING.value:
        return []
    causes = []
    if task.wait_path == WaitPath.SCHEDULED.value and task.available_at > db_now(conn):
        causes.append(WaitCause("scheduled", f"not before {task.available_at:%Y-%m-%dT%H:%M:%S}Z"))
    if task.wait_path == WaitPath.BLOCKED_GATE.value:
        causes.append(_gate(conn, task.gate_id))
    if task.wait_path == WaitPath.BLOCKED_KEY.value:
        causes.append(_key(conn, namespace, task.concurrency_key))
    paused = conn.execute(
        sa.select(queues.c.paused).where(
            queues.c.namespace == namespace, queues.c.name == task.queue
        )
    ).scalar_one_or_none()
    if paused:
        causes.append(WaitCause("queue_paused", f"queue {task.queue!r} is paused"))
    if task.quota_counted:
        causes += _full_quotas(conn, namespace, task.queue)
    if not live_workers(conn, namespace).can_run(task.queue, task.handler):
        causes.append(
            WaitCause(
                "no_live_worker",
                f"no live worker session serves queue {task.queue!r} with handler {task.handler!r}",
            )
        )
    return causes


def _gate(conn: sa.Connection, gate_id: str | None) -> WaitCause:
    owner = conn.execute(
        sa.select(execution_gates.c.owner_kind, execution_gates.c.owner_id).where(
            execution_gates.c.id == gate_id
        )
    ).one_or_none()
    what = f"{owner.owner_kind.replace('_', ' ')} {owner.owner_id}" if owner else "its owner"
    return WaitCause("gate_closed", f"its execution gate is closed: {what} is paused")


def _key(conn: sa.Connection, namespace: str, key: str | None) -> WaitCause:
    row = conn.execute(
        sa.select(concurrency_keys.c.held, concurrency_keys.c.permit_limit).where(
            concurrency_keys.c.namespace == namespace, concurrency_keys.c.concurrency_key == key
        )
    ).one_or_none()
    held = f": {row.held} of {row.permit_limit} permits held" if row else ""
    return WaitCause("concurrency_limit", f"concurrency key {key!r} has no free permit{held}")


def _full_quotas(conn: sa.Connection, namespace: str, queue: str) -> list[WaitCause]:
    rows = conn.execute(
        sa.select(quotas.c.name, quotas.c.queue, quotas.c.running, quotas.c.max_running)
        .where(
            quotas.c.namespace == namespace,
            quotas.c.queue.in_([queue, WHOLE_NAMESPACE]),
            quotas.c.max_running.is_not(None),
            quotas.c.running >= quotas.c.max_running,
        )
        .order_by(quotas.c.name)
    ).all()
    return [
        WaitCause(
            "quota_full",
            f"quota {r.name!r} allows {r.max_running} running tasks in "
            f"{'the namespace' if r.queue == WHOLE_NAMESPACE else f'queue {r.queue!r}'} "
            f"and {r.running} run",
        )
        for r in rows
    ]
