"""Weave tables (seed §4 "流程定义" … "流程接续"): definitions, instances, steps, activations,
signals, waits, bounded poll rounds, the durable inbox and pending continuations."""

from __future__ import annotations

import sqlalchemy as sa

from .base import metadata
from .types import (
    KEY_LENGTH,
    NAME_LENGTH,
    Json,
    UtcDateTime,
    created_at_column,
    id_column,
    namespace_column,
    ref_column,
    state_check,
    updated_at_column,
)

INSTANCE_STATES = ("RUNNING", "SUCCEEDED", "FAILED", "CANCELLED")
STEP_STATES = ("PENDING", "ACTIVE", "SUCCEEDED", "FAILED", "SKIPPED", "CANCELLED")
ACTIVATION_STATES = ("ACTIVE", "SUCCEEDED", "FAILED", "TIMED_OUT", "CANCELLED")
WAIT_STATES = ("WAITING", "SATISFIED", "TIMED_OUT", "CANCELLED")
POLL_ROUND_STATES = ("SCHEDULED", "RUNNING", "MATCHED", "NOT_MATCHED", "FAILED")
INBOX_STATES = ("PENDING", "CONSUMED", "PARKED")

workflow_definitions = sa.Table(
    "workflow_definitions",
    metadata,
    id_column(),
    namespace_column(),
    sa.Column("name", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("latest_version", sa.Integer(), nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
    created_at_column(),
    updated_at_column(),
    sa.UniqueConstraint("namespace", "name"),
)

workflow_definition_versions = sa.Table(
    "workflow_definition_versions",
    metadata,
    id_column(),
    ref_column("definition_id", sa.ForeignKey("workflow_definitions.id"), nullable=False),
    namespace_column(),
    sa.Column("version", sa.Integer(), nullable=False),
    # sha256 of the canonical spec; a published version never changes (inv. 10).
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("spec", Json, nullable=False),
    sa.Column("published_at", UtcDateTime, nullable=False),
    sa.Column("published_by", sa.String(KEY_LENGTH), nullable=True),
    sa.UniqueConstraint("definition_id", "version"),
    sa.UniqueConstraint("definition_id", "digest"),
)

workflow_instances = sa.Table(
    "workflow_instances",
    metadata,
    id_column(),
    namespace_column(),
    ref_column(
        "definition_version_id", sa.ForeignKey("workflow_definition_versions.id"), nullable=False
    ),
    sa.Column("start_key", sa.String(KEY_LENGTH), nullable=False),
    sa.Column("start_digest", sa.String(64), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("state_version", sa.Integer(), nullable=False),
    sa.Column("paused", sa.Boolean(), nullable=False),
    # Moves together with the instance's execution gate (inv. 12).
    sa.Column("control_version", sa.Integer(), nullable=False),
    ref_column("gate_id", sa.ForeignKey("execution_gates.id"), nullable=False),
    sa.Column("input", Json, nullable=False),
    sa.Column("output", Json, nullable=True),
    sa.Column("policy", Json, nullable=True),
    created_at_column(),
    updated_at_column(),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    sa.UniqueConstraint("namespace", "start_key"),
    sa.Index("ix_workflow_instances_state", "namespace", "state"),
    state_check("state", INSTANCE_STATES, "state"),
)

workflow_steps = sa.Table(
    "workflow_steps",
    metadata,
    id_column(),
    ref_column("instance_id", sa.ForeignKey("workflow_instances.id"), nullable=False),
    namespace_column(),
    sa.Column("name", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("activation_count", sa.Integer(), nullable=False),
    sa.Column("result", Json, nullable=True),
    updated_at_column(),
    sa.UniqueConstraint("instance_id", "name"),
    state_check("state", STEP_STATES, "state"),
)

workflow_activations = sa.Table(
    "workflow_activations",
    metadata,
    id_column(),
    ref_column("instance_id", sa.ForeignKey("workflow_instances.id"), nullable=False),
    namespace_column(),
    sa.Column("step_name", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("seq", sa.Integer(), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    # The Pulse task currently serving this activation; results for any other task are ignored.
    ref_column("task_id", sa.ForeignKey("tasks.id"), nullable=True),
    created_at_column(),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    sa.UniqueConstraint("instance_id", "step_name", "seq"),
    state_check("state", ACTIVATION_STATES, "state"),
)

workflow_signals = sa.Table(
    "workflow_signals",
    metadata,
    id_column(),
    ref_column("instance_id", sa.ForeignKey("workflow_instances.id"), nullable=False),
    namespace_column(),
    sa.Column("signal_id", sa.String(KEY_LENGTH), nullable=False),
    sa.Column("name", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("payload", Json, nullable=True),
    sa.Column("received_at", UtcDateTime, nullable=False),
    sa.Column("consumed_at", UtcDateTime, nullable=True),
    ref_column("consumed_by_activation_id", nullable=True),
    sa.UniqueConstraint("instance_id", "signal_id"),
    sa.Index("ix_workflow_signals_pending", "instance_id", "name", "consumed_at"),
)

workflow_waits = sa.Table(
    "workflow_waits",
    metadata,
    id_column(),
    ref_column(
        "activation_id", sa.ForeignKey("workflow_activations.id"), nullable=False, unique=True
    ),
    namespace_column(),
    sa.Column("signal_name", sa.String(NAME_LENGTH), nullable=True),
    sa.Column("deadline_at", UtcDateTime, nullable=True),
    sa.Column("state", sa.String(16), nullable=False),
    ref_column("satisfied_by_signal_id", nullable=True),
    created_at_column(),
    sa.Index("ix_workflow_waits_deadline", "state", "deadline_at"),
    state_check("state", WAIT_STATES, "state"),
)

workflow_poll_rounds = sa.Table(
    "workflow_poll_rounds",
    metadata,
    id_column(),
    ref_column("activation_id", sa.ForeignKey("workflow_activations.id"), nullable=False),
    namespace_column(),
    # UNIQUE with activation_id: a round is created once, whatever restarts or retries (inv. 11).
    sa.Column("round", sa.Integer(), nullable=False),
    sa.Column("rounds_used", sa.Integer(), nullable=False),
    sa.Column("max_rounds", sa.Integer(), nullable=False),
    sa.Column("deadline_at", UtcDateTime, nullable=True),
    sa.Column("next_poll_at", UtcDateTime, nullable=True),
    ref_column("task_id", sa.ForeignKey("tasks.id"), nullable=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("result", Json, nullable=True),
    created_at_column(),
    sa.UniqueConstraint("activation_id", "round"),
    sa.Index("ix_workflow_poll_rounds_due", "state", "next_poll_at"),
    state_check("state", POLL_ROUND_STATES, "state"),
)

workflow_inbox = sa.Table(
    "workflow_inbox",
    metadata,
    id_column(),
    namespace_column(),
    # The Pulse result event (or timer/signal) that produced this message.
    sa.Column("source_event_id", sa.String(64), nullable=False),
    sa.Column("consumer", sa.String(64), nullable=False),
    ref_column("instance_id", sa.ForeignKey("workflow_instances.id"), nullable=False),
    ref_column("activation_id", nullable=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("payload", Json, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("received_at", UtcDateTime, nullable=False),
    sa.Column("consumed_at", UtcDateTime, nullable=True),
    sa.Column("attempts", sa.Integer(), nullable=False),
    sa.Column("next_attempt_at", UtcDateTime, nullable=False),
    # Dedupe: a duplicate event never creates a second follow-up task (inv. 9).
    sa.UniqueConstraint("source_event_id", "consumer"),
    sa.Index("ix_workflow_inbox_backlog", "state", "next_attempt_at"),
    state_check("state", INBOX_STATES, "state"),
)

workflow_continuations = sa.Table(
    "workflow_continuations",
    metadata,
    id_column(),
    ref_column("instance_id", sa.ForeignKey("workflow_instances.id"), nullable=False),
    namespace_column(),
    ref_column("inbox_id", sa.ForeignKey("workflow_inbox.id"), nullable=True),
    ref_column("activation_id", nullable=True),
    sa.Column("reason", sa.String(KEY_LENGTH), nullable=False),
    created_at_column(),
    # Set when resume picks it up; a paused instance never stalls after resume (inv. 12).
    sa.Column("resumed_at", UtcDateTime, nullable=True),
    sa.Index("ix_workflow_continuations_pending", "instance_id", "resumed_at"),
)
