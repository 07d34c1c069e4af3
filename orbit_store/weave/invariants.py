"""Weave's checks for ``orbit admin verify`` (``orbit_store.recovery.verify``): read-only queries
that look for workflow states invariants 9-12 forbid. Each returns the ids it finds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from orbit_store.schema import (
    execution_gates,
    tasks,
    workflow_activations,
    workflow_continuations,
    workflow_inbox,
    workflow_instances,
    workflow_poll_rounds,
    workflow_signals,
    workflow_steps,
    workflow_waits,
)

from .outcomes import CONSUMER

Check = Callable[[sa.Connection, str | None], list[str]]
OUTCOME_STATES = ("SUCCEEDED", "FAILED", "CANCELLED", "NEEDS_REVIEW")
LIVE = ("ACTIVE", "PARKED")
OPEN = ("PENDING", "ACTIVE", "PARKED")


def _scoped(query: sa.Select[Any], table: sa.Table, namespace: str | None) -> sa.Select[Any]:
    return query if namespace is None else query.where(table.c.namespace == namespace)


def _ids(conn: sa.Connection, query: sa.Select[Any]) -> list[str]:
    return [str(row[0]) for row in conn.execute(query)]


def _task_created_twice(conn: sa.Connection, ns: str | None) -> list[str]:
    """Each activation has one task (a poll: one per round); manual retries are not counted."""
    counts = (
        _scoped(
            sa.select(
                tasks.c.workflow_activation_id.label("activation_id"), sa.func.count().label("n")
            ),
            tasks,
            ns,
        )
        .where(tasks.c.workflow_activation_id.is_not(None), tasks.c.retry_of.is_(None))
        .group_by(tasks.c.workflow_activation_id)
        .subquery()
    )
    query = (
        sa.select(workflow_activations.c.id)
        .join(counts, counts.c.activation_id == workflow_activations.c.id)
        .where(
            sa.or_(
                sa.and_(workflow_activations.c.kind != "poll", counts.c.n > 1),
                sa.and_(
                    workflow_activations.c.kind == "poll",
                    counts.c.n != workflow_activations.c.rounds_used,
                ),
            )
        )
    )
    return _ids(conn, _scoped(query, workflow_activations, ns))


def _rounds_over_budget(conn: sa.Connection, ns: str | None) -> list[str]:
    counts = (
        _scoped(
            sa.select(
                workflow_poll_rounds.c.activation_id,
                sa.func.count().label("n"),
                sa.func.max(workflow_poll_rounds.c.round).label("top"),
            ),
            workflow_poll_rounds,
            ns,
        )
        .group_by(workflow_poll_rounds.c.activation_id)
        .subquery()
    )
    query = (
        sa.select(workflow_activations.c.id)
        .join(counts, counts.c.activation_id == workflow_activations.c.id)
        .where(
            sa.or_(
                counts.c.n > workflow_activations.c.max_rounds,
                counts.c.n != workflow_activations.c.rounds_used,
                counts.c.top != counts.c.n,
            )
        )
    )
    return _ids(conn, _scoped(query, workflow_activations, ns))


def _consumed_without_effect(conn: sa.Connection, ns: str | None) -> list[str]:
    """A consumed final outcome of a task its step (or poll round) still waits on."""
    final = ["task.succeeded", "task.failed", "task.cancelled"]
    steps = (
        sa.select(workflow_inbox.c.id)
        .join(workflow_activations, workflow_activations.c.id == workflow_inbox.c.activation_id)
        .where(
            workflow_inbox.c.state == "CONSUMED",
            workflow_inbox.c.kind.in_(final),
            workflow_activations.c.kind != "poll",
            workflow_activations.c.task_id == workflow_inbox.c.task_id,
            workflow_activations.c.state.in_(LIVE),
            # A failure settled on review keeps its step parked for a retry (inbox.KEPT_PARKED).
            sa.not_(
                sa.and_(
                    workflow_activations.c.state == "PARKED",
                    workflow_inbox.c.outcome.like("kept parked%"),
                )
            ),
        )
    )
    rounds = (
        sa.select(workflow_inbox.c.id)
        .join(workflow_poll_rounds, workflow_poll_rounds.c.task_id == workflow_inbox.c.task_id)
        .join(
            workflow_activations, workflow_activations.c.id == workflow_poll_rounds.c.activation_id
        )
        .where(
            workflow_inbox.c.state == "CONSUMED",
            workflow_inbox.c.kind.in_(final),
            workflow_poll_rounds.c.state == "RUNNING",
            workflow_activations.c.state.in_(LIVE),
        )
    )
    return _ids(conn, _scoped(steps, workflow_inbox, ns)) + _ids(
        conn, _scoped(rounds, workflow_inbox, ns)
    )


def _outcome_not_delivered(conn: sa.Connection, ns: str | None) -> list[str]:
    """A workflow task's current outcome has no inbox row (seed §6.3)."""
    source = sa.literal("task:") + tasks.c.id + ":v" + sa.cast(tasks.c.state_version, sa.String)
    query = (
        sa.select(tasks.c.id)
        .outerjoin(
            workflow_inbox,
            sa.and_(
                workflow_inbox.c.namespace == tasks.c.namespace,
                workflow_inbox.c.source_event_id == source,
                workflow_inbox.c.consumer == CONSUMER,
            ),
        )
        .where(
            tasks.c.workflow_instance_id.is_not(None),
            tasks.c.state.in_(OUTCOME_STATES),
            workflow_inbox.c.id.is_(None),
        )
    )
    return _ids(conn, _scoped(query, tasks, ns))


def _paused_gate_mismatch(conn: sa.Connection, ns: str | None) -> list[str]:
    """Paused ⇔ gate closed, with the same control version (invariant 12)."""
    query = (
        sa.select(workflow_instances.c.id)
        .join(execution_gates, execution_gates.c.id == workflow_instances.c.gate_id)
        .where(
            sa.or_(
                workflow_instances.c.paused == execution_gates.c.allowed,
                workflow_instances.c.control_version != execution_gates.c.control_version,
            )
        )
    )
    return _ids(conn, _scoped(query, workflow_instances, ns))


def _deferred_without_continuation(conn: sa.Connection, ns: str | None) -> list[str]:
    query = (
        sa.select(workflow_inbox.c.id)
        .outerjoin(workflow_continuations, workflow_continuations.c.inbox_id == workflow_inbox.c.id)
        .where(workflow_inbox.c.outcome.like("deferred%"), workflow_continuations.c.id.is_(None))
    )
    return _ids(conn, _scoped(query, workflow_inbox, ns))


def _continuation_left_behind(conn: sa.Connection, ns: str | None) -> list[str]:
    """A running, unpaused instance with a continuation no resume picked up."""
    query = (
        sa.select(workflow_continuations.c.id)
        .join(workflow_instances, workflow_instances.c.id == workflow_continuations.c.instance_id)
        .where(
            workflow_continuations.c.resumed_at.is_(None),
            workflow_instances.c.paused.is_(False),
            workflow_instances.c.state == "RUNNING",
        )
    )
    return _ids(conn, _scoped(query, workflow_continuations, ns))


def _stalled(conn: sa.Connection, ns: str | None) -> list[str]:
    """Running and unpaused, yet nothing live and nothing in the inbox: it can never move."""
    live = sa.exists().where(
        workflow_steps.c.instance_id == workflow_instances.c.id,
        workflow_steps.c.state.in_(LIVE),
    )
    pending = sa.exists().where(
        workflow_inbox.c.instance_id == workflow_instances.c.id,
        workflow_inbox.c.state == "PENDING",
    )
    query = sa.select(workflow_instances.c.id).where(
        workflow_instances.c.state == "RUNNING",
        workflow_instances.c.paused.is_(False),
        ~live,
        ~pending,
    )
    return _ids(conn, _scoped(query, workflow_instances, ns))


def _finished_with_open_steps(conn: sa.Connection, ns: str | None) -> list[str]:
    query = (
        sa.select(workflow_instances.c.id)
        .join(workflow_steps, workflow_steps.c.instance_id == workflow_instances.c.id)
        .where(workflow_instances.c.state != "RUNNING", workflow_steps.c.state.in_(OPEN))
    )
    return _ids(conn, _scoped(query, workflow_instances, ns))


def _signal_wait_mismatch(conn: sa.Connection, ns: str | None) -> list[str]:
    """A satisfied wait and the signal it took must name each other (invariant 10)."""
    query = (
        sa.select(workflow_waits.c.id)
        .outerjoin(
            workflow_signals, workflow_signals.c.id == workflow_waits.c.satisfied_by_signal_id
        )
        .where(
            workflow_waits.c.kind == "signal",
            workflow_waits.c.state == "SATISFIED",
            sa.or_(
                workflow_signals.c.id.is_(None),
                workflow_signals.c.consumed_by_activation_id != workflow_waits.c.activation_id,
            ),
        )
    )
    return _ids(conn, _scoped(query, workflow_waits, ns))


WORKFLOW_CHECKS: dict[str, tuple[str, str, Check]] = {
    "workflow_task_created_twice": (
        "9",
        "an activation with more than one task (a poll: other than one per round)",
        _task_created_twice,
    ),
    "workflow_outcome_not_delivered": (
        "9",
        "a workflow task's outcome with no inbox row",
        _outcome_not_delivered,
    ),
    "workflow_consumed_without_effect": (
        "9",
        "a consumed final outcome whose activation still waits for that task",
        _consumed_without_effect,
    ),
    "workflow_signal_wait_mismatch": (
        "10",
        "a satisfied wait and its signal do not name each other",
        _signal_wait_mismatch,
    ),
    "workflow_poll_rounds_over_budget": (
        "11",
        "poll rounds beyond maxRounds, miscounted, or with gaps",
        _rounds_over_budget,
    ),
    "workflow_paused_gate_mismatch": (
        "12",
        "paused differs from the closed gate, or the control versions differ",
        _paused_gate_mismatch,
    ),
    "workflow_deferred_without_continuation": (
        "12",
        "an outcome consumed while paused without a continuation record",
        _deferred_without_continuation,
    ),
    "workflow_continuation_left_behind": (
        "12",
        "a resumed workflow with a continuation never applied",
        _continuation_left_behind,
    ),
    "workflow_stalled": (
        "9, 12",
        "a running, unpaused workflow with nothing live and nothing to consume",
        _stalled,
    ),
    "workflow_finished_with_open_steps": (
        "9",
        "a finished workflow with steps still pending or active",
        _finished_with_open_steps,
    ),
}
