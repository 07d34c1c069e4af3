"""Queue: mirrors spec into the `queues` row; status shows the backlog measured in MySQL.

Deletion follows ``spec.deletionPolicy``: Block keeps the queue while any task is unfinished;
Drain stops new submissions and waits for the backlog to finish; Cancel also cancels what can be
cancelled (running tasks get a cancel request) and waits for the rest.
"""

from __future__ import annotations

import sqlalchemy as sa

from orbit_store.pulse.limits.queues import (
    begin_queue_deletion,
    delete_queue,
    lock_queue,
    put_queue,
    queue_counts,
    undeclared_queues,
)
from orbit_store.pulse.manual.cancel import cancel_tasks
from orbit_store.pulse.model import QueuePolicy, RetryPolicy, Safety
from orbit_store.schema import tasks

from .resource import (
    HAS_UNFINISHED_TASKS,
    QUEUE_NOT_FOUND,
    Deletion,
    NotDeclaredYet,
    Outcome,
    Resource,
)

OPERATOR_ACTOR = "orbit-operator"
CANCEL_BATCH = 200


def require_declared_queues(
    conn: sa.Connection, resource: Resource, field_path: str, names: list[str]
) -> None:
    """NotDeclaredYet when ``names`` include a queue no Queue resource declares in the
    namespace (the implicit ``default`` queue always exists). Used by kinds that name queues."""
    missing = undeclared_queues(conn, resource.namespace, names)
    if missing:
        quoted = ", ".join(repr(name) for name in missing)
        raise NotDeclaredYet(
            field_path,
            f"waiting for Queue {', '.join(missing)}: queue {quoted} is not declared in "
            f"namespace {resource.namespace!r} yet; apply the Queue (retried until it is)",
            reason=QUEUE_NOT_FOUND,
        )


def policy_of(resource: Resource) -> QueuePolicy:
    spec = resource.spec
    backoff = spec["retry"]["backoff"]
    return QueuePolicy(
        name=resource.name,
        paused=spec["paused"],
        priority=spec["priority"],
        retry=RetryPolicy(
            max_attempts=spec["retry"]["maxAttempts"],
            backoff_initial_ms=round(backoff["initialSeconds"] * 1000),
            backoff_max_ms=round(backoff["maxSeconds"] * 1000),
            backoff_multiplier=float(backoff["multiplier"]),
        ),
        lease_seconds=spec["leaseSeconds"],
        attempt_timeout_seconds=spec.get("attemptTimeoutSeconds"),
        safety_default=Safety(spec["safetyDefault"]),
        concurrency_limit=(spec.get("concurrency") or {}).get("limit"),
    )


def status_of(conn: sa.Connection, resource: Resource) -> dict[str, object]:
    counts = queue_counts(conn, resource.namespace, resource.name)
    return {
        "waiting": counts["WAITING"],
        "running": counts["LEASED"] + counts["RUNNING"],
        "needsReview": counts["NEEDS_REVIEW"],
        "paused": bool(resource.spec["paused"]),
    }


def reconcile(conn: sa.Connection, resource: Resource) -> Outcome:
    changed = put_queue(
        conn,
        resource.namespace,
        policy_of(resource),
        deletion_policy=resource.spec["deletionPolicy"],
        source=resource.source,
        spec_generation=resource.generation,
    )
    status = status_of(conn, resource)
    message = f"{status['waiting']} waiting, {status['running']} running" + (
        " (paused: no new leases)" if status["paused"] else ""
    )
    return Outcome(changed=changed, message=message, status=status)


def delete(conn: sa.Connection, resource: Resource) -> Deletion:
    """One transaction. It locks the queue row first: submissions hold it shared, so the count
    below sees every task accepted before, and any submission after finds the queue draining
    or gone — a 201 never names a task stranded in a deleted queue."""
    policy = resource.spec["deletionPolicy"]
    if not lock_queue(conn, resource.namespace, resource.name):
        return Deletion(done=True, message="queue removed")
    if policy != "Block":
        begin_queue_deletion(conn, resource.namespace, resource.name)
    if policy == "Cancel":
        _cancel_some(conn, resource)
    counts = queue_counts(conn, resource.namespace, resource.name)
    unfinished = sum(counts.values())
    if unfinished == 0:
        delete_queue(conn, resource.namespace, resource.name)
        return Deletion(done=True, message="queue removed")
    detail = (
        f"{unfinished} unfinished tasks ({counts['WAITING']} waiting, "
        f"{counts['LEASED'] + counts['RUNNING']} running, "
        f"{counts['NEEDS_REVIEW']} awaiting review)"
    )
    advice = {
        "Block": "finish or cancel them, or set spec.deletionPolicy to Drain or Cancel",
        "Drain": "draining: no new submissions; deletion completes when they finish",
        "Cancel": "cancelling: waiting tasks are cancelled, running ones asked to stop; "
        "tasks awaiting review must be reviewed",
    }[policy]
    return Deletion(done=False, reason=HAS_UNFINISHED_TASKS, message=f"{detail}: {advice}")


def _cancel_some(conn: sa.Connection, resource: Resource) -> None:
    ids = (
        conn.execute(
            sa.select(tasks.c.id)
            .where(
                tasks.c.namespace == resource.namespace,
                tasks.c.queue == resource.name,
                tasks.c.state.in_(["WAITING", "LEASED", "RUNNING"]),
                tasks.c.cancel_requested.is_(False),
            )
            .limit(CANCEL_BATCH)
        )
        .scalars()
        .all()
    )
    cancel_tasks(
        conn,
        namespace=resource.namespace,
        task_ids=list(ids),
        actor=OPERATOR_ACTOR,
        reason=f"queue {resource.name} deleted with deletionPolicy Cancel",
    )
