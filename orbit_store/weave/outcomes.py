"""Pulse's one hook into Weave (seed §6.3, invariant 9): ``pulse.transitions.transition()``
calls :func:`record_task_outcome` in the very transaction that moves a workflow task to an
outcome (SUCCEEDED, FAILED, CANCELLED, NEEDS_REVIEW), so the internal event is persisted with
the outcome or not at all. It only INSERTs (no lock on the instance: see the package docstring);
the inbox loop consumes it (``weave.inbox``).

This module imports nothing of Weave's engine, so Pulse can import it without a cycle.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from orbit_store.ids import new_id
from orbit_store.schema import workflow_inbox

#: Who the inbox rows written by Pulse are for (UNIQUE with the source event id).
CONSUMER = "weave"


def source_event_id(task_id: str, state_version: int) -> str:
    """The identity of one outcome: a task's transition to one state_version (seed §6.3)."""
    return f"task:{task_id}:v{state_version}"


#: The inbox kind of a manual retry of a step's task (its successor carries the step).
TASK_RETRIED = "task.retried"


def record_task_retry(
    conn: sa.Connection, original: Any, successor_id: str, now: dt.datetime
) -> None:
    """A manual retry created ``successor_id`` for workflow task ``original``: a PENDING inbox
    row tells Weave, which moves the step's activation onto the successor if the step still
    waits for a decision (parked)."""
    conn.execute(
        workflow_inbox.insert().values(
            id=new_id(),
            namespace=original.namespace,
            source_event_id=f"retry:{successor_id}",
            consumer=CONSUMER,
            instance_id=original.workflow_instance_id,
            activation_id=original.workflow_activation_id,
            task_id=successor_id,
            kind=TASK_RETRIED,
            payload={"state": "RETRIED", "retry_of": original.id},
            state="PENDING",
            received_at=now,
            attempts=0,
            next_attempt_at=now,
        )
    )


def record_task_outcome(
    conn: sa.Connection,
    task: Any,
    state: str,
    state_version: int,
    now: dt.datetime,
    result: Any = None,
    error: Any = None,
) -> None:
    """Persist the outcome of a workflow task as a PENDING inbox row for Weave."""
    conn.execute(
        workflow_inbox.insert().values(
            **outcome_row(task, state, state_version, now, result, error)
        )
    )


def record_task_outcomes(conn: sa.Connection, rows: list[dict[str, Any]]) -> None:
    """Persist the outcomes of a batch of workflow tasks (rows by :func:`outcome_row`) in one
    multi-row INSERT."""
    if rows:
        conn.execute(workflow_inbox.insert(), rows)


def outcome_row(
    task: Any,
    state: str,
    state_version: int,
    now: dt.datetime,
    result: Any = None,
    error: Any = None,
) -> dict[str, Any]:
    """The PENDING inbox row of a workflow task's outcome."""
    state = str(state)
    return {
        "id": new_id(),
        "namespace": task.namespace,
        "source_event_id": source_event_id(task.id, state_version),
        "consumer": CONSUMER,
        "instance_id": task.workflow_instance_id,
        "activation_id": task.workflow_activation_id,
        "task_id": task.id,
        "kind": f"task.{state.lower()}",
        "payload": {"state": state, "result": result, "error": error},
        "state": "PENDING",
        "received_at": now,
        "attempts": 0,
        "next_attempt_at": now,
    }
