"""Which tasks a live worker can run (handler routing, as users see it).

A worker session serves queues and, when it declares them, only some handlers; a claim grants
nothing else (``lanes``). A WAITING task that no ACTIVE, unexpired session of its namespace can
run — its queue is not served, or nobody runs its handler — will not start until such a worker
comes: the task view says so (``runnable_by_live_worker``) and ``orbit_tasks_unrunnable``
counts them. Read-only.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.pulse.model import TaskState, WaitPath
from orbit_store.schema import tasks, worker_sessions


@dataclass(frozen=True)
class LiveWorkers:
    """What the live sessions of one namespace serve: (queues, handlers or None for any)."""

    serves: list[tuple[frozenset[str], frozenset[str] | None]] = field(default_factory=list)

    def can_run(self, queue: str, handler: str) -> bool:
        return any(
            queue in queues and (handlers is None or handler in handlers)
            for queues, handlers in self.serves
        )


def live_workers(conn: sa.Connection, namespace: str) -> LiveWorkers:
    """The ACTIVE, unexpired sessions of ``namespace`` (live sessions carry live_worker_name)."""
    rows = conn.execute(
        sa.select(worker_sessions.c.queues, worker_sessions.c.handlers).where(
            worker_sessions.c.namespace == namespace,
            worker_sessions.c.live_worker_name.is_not(None),
            worker_sessions.c.state == "ACTIVE",
            worker_sessions.c.expires_at > db_now(conn),
        )
    )
    return LiveWorkers(
        [(frozenset(r.queues), None if r.handlers is None else frozenset(r.handlers)) for r in rows]
    )


#: What users read for a WAITING task's path (``waiting_reason`` in the task view).
WAITING_REASONS = {
    WaitPath.READY.value: "ready",
    WaitPath.SCHEDULED.value: "scheduled",
    WaitPath.BLOCKED_GATE.value: "gate_closed",
    WaitPath.BLOCKED_KEY.value: "concurrency_limit",
}


def unrunnable_counts(conn: sa.Connection) -> list[tuple[str, str, int]]:
    """(namespace, queue, WAITING tasks no live worker can run), for the gauge."""
    waiting = conn.execute(
        sa.select(tasks.c.namespace, tasks.c.queue, tasks.c.handler, sa.func.count())
        .where(tasks.c.state == TaskState.WAITING.value)
        .group_by(tasks.c.namespace, tasks.c.queue, tasks.c.handler)
    ).all()
    workers: dict[str, LiveWorkers] = {}
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for namespace, queue, handler, n in waiting:
        if namespace not in workers:
            workers[namespace] = live_workers(conn, namespace)
        counts[(namespace, queue)] += 0 if workers[namespace].can_run(queue, handler) else n
    return [(ns, queue, n) for (ns, queue), n in sorted(counts.items())]
