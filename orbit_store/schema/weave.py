"""Weave tables (seed §4 "流程定义" … "流程接续"): definitions, instances, steps, activations,
signals, waits, bounded poll rounds, the durable inbox, pending continuations and the history.

Every Weave transaction locks its instance row first, so these rows change one instance at a time.
``workflow_inbox`` deliberately has no foreign key to ``workflow_instances``: Pulse writes inbox
rows inside a task's outcome transaction, and an FK check would take a shared lock on the instance
row after the task lock — the reverse of Weave's order (instance → task).
"""

from __future__ import annotations

import sqlalchemy as sa

from .access import RESOURCE_SOURCES
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
STEP_STATES = (
    "PENDING",
    "ACTIVE",
    "PARKED",
    "SUCCEEDED",
    "FAILED",
    "TIMED_OUT",
    "SKIPPED",
    "CANCELLED",
)
ACTIVATION_STATES = ("ACTIVE", "PARKED", "SUCCEEDED", "FAILED", "TIMED_OUT", "CANCELLED")
STEP_KINDS = ("task", "wait", "sleep", "poll")
WAIT_KINDS = ("signal", "sleep")
WAIT_STATES = ("WAITING", "SATISFIED", "TIMED_OUT", "CANCELLED")
SIGNAL_STATES = ("PENDING", "CONSUMED", "EXPIRED")
POLL_ROUND_STATES = ("RUNNING", "MATCHED", "NOT_MATCHED", "FAILED", "CANCELLED")
INBOX_STATES = ("PENDING", "CONSUMED")

workflow_definitions = sa.Table(
    "workflow_definitions",
    metadata,
    id_column(),
    namespace_column(),
    sa.Column("name", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("latest_version", sa.Integer(), nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
    # Set when the definition was withdrawn (its resource deleted): no new starts; instances
    # already running keep their version (inv. 10).
    sa.Column("retired_at", UtcDateTime, nullable=True),
    created_at_column(),
    updated_at_column(),
    sa.UniqueConstraint("namespace", "name"),
    state_check("source", RESOURCE_SOURCES, "source"),
)

workflow_definition_versions = sa.Table(
    "workflow_definition_versions",
    metadata,
    id_column(),
    ref_column("definition_id", sa.ForeignKey("workflow_definitions.id"), nullable=False),
    namespace_column(),
    sa.Column("version", sa.Integer(), nullable=False),
    # sha256 of the canonical spec; a published version is never updated (inv. 10).
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("spec", Json, nullable=False),
    sa.Column("published_at", UtcDateTime, nullable=False),
    sa.Column("published_by", sa.String(KEY_LENGTH), nullable=True),
    sa.UniqueConstraint("definition_id", "version"),
)

workflow_instances = sa.Table(
    "workflow_instances",
    metadata,
    id_column(),
    namespace_column(),
    ref_column("definition_id", sa.ForeignKey("workflow_definitions.id"), nullable=False),
    # The version bound at start; never rebound (inv. 10).
    ref_column(
        "definition_version_id", sa.ForeignKey("workflow_definition_versions.id"), nullable=False
    ),
    sa.Column("definition_name", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("version", sa.Integer(), nullable=False),
    sa.Column("start_key", sa.String(KEY_LENGTH), nullable=False),
    # sha256 of the start request: same key + same request = replay, else conflict (inv. 6).
    sa.Column("start_digest", sa.String(64), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("state_version", sa.Integer(), nullable=False),
    sa.Column("paused", sa.Boolean(), nullable=False),
    # Moves together with the instance's execution gate, in the same transaction (inv. 12).
    sa.Column("control_version", sa.Integer(), nullable=False),
    ref_column("gate_id", sa.ForeignKey("execution_gates.id"), nullable=False),
    sa.Column("input", Json, nullable=False),
    sa.Column("output", Json, nullable=True),
    sa.Column("error", Json, nullable=True),
    # Number of workflow_events rows written; the next event gets event_seq + 1.
    sa.Column("event_seq", sa.Integer(), nullable=False),
    # Earliest timer of the instance (wait timeout, sleep, next poll round); the timer loop's key.
    sa.Column("wake_at", UtcDateTime, nullable=True),
    # A firing of the timers that failed (a quota refused the next step's task): failures in a
    # row, the last error and when the timer loop tries again; NULL while firing works.
    sa.Column("timer_failures", sa.Integer(), nullable=True),
    sa.Column("timer_retry_at", UtcDateTime, nullable=True),
    sa.Column("timer_error", sa.String(1024), nullable=True),
    sa.Column("started_by", sa.String(KEY_LENGTH), nullable=True),
    created_at_column(),
    updated_at_column(),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    sa.UniqueConstraint("namespace", "start_key"),
    sa.Index("ix_workflow_instances_state", "namespace", "state"),
    sa.Index("ix_workflow_instances_wake", "state", "wake_at"),
    sa.Index("ix_workflow_instances_definition", "definition_id", "state"),
    state_check("state", INSTANCE_STATES, "state"),
    sa.CheckConstraint(
        "(state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) = (finished_at IS NOT NULL)",
        name="finished_iff_terminal",
    ),
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
    ref_column("current_activation_id", nullable=True),
    sa.Column("result", Json, nullable=True),
    sa.Column("error", Json, nullable=True),
    updated_at_column(),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    sa.UniqueConstraint("instance_id", "name"),
    state_check("state", STEP_STATES, "state"),
    state_check("kind", STEP_KINDS, "kind"),
)

workflow_activations = sa.Table(
    "workflow_activations",
    metadata,
    id_column(),
    ref_column("instance_id", sa.ForeignKey("workflow_instances.id"), nullable=False),
    namespace_column(),
    sa.Column("step_name", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("seq", sa.Integer(), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    # The Pulse task currently serving this activation (a poll's current round); results of any
    # other task are ignored (inv. 10).
    ref_column("task_id", sa.ForeignKey("tasks.id"), nullable=True),
    # Poll checkpoint (inv. 11): rounds spent, the budget, the deadline, the next round's time.
    sa.Column("rounds_used", sa.Integer(), nullable=False),
    sa.Column("max_rounds", sa.Integer(), nullable=True),
    sa.Column("deadline_at", UtcDateTime, nullable=True),
    sa.Column("next_poll_at", UtcDateTime, nullable=True),
    sa.Column("result", Json, nullable=True),
    sa.Column("error", Json, nullable=True),
    created_at_column(),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    sa.UniqueConstraint("instance_id", "step_name", "seq"),
    state_check("state", ACTIVATION_STATES, "state"),
    state_check("kind", STEP_KINDS, "kind"),
    sa.CheckConstraint(
        "max_rounds IS NULL OR rounds_used <= max_rounds", name="rounds_within_budget"
    ),
)

workflow_signals = sa.Table(
    "workflow_signals",
    metadata,
    id_column(),
    ref_column("instance_id", sa.ForeignKey("workflow_instances.id"), nullable=False),
    namespace_column(),
    # The client's id: the same id again is a replay (inv. 6).
    sa.Column("signal_id", sa.String(KEY_LENGTH), nullable=False),
    sa.Column("name", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("payload", Json, nullable=True),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("sent_by", sa.String(KEY_LENGTH), nullable=True),
    sa.Column("received_at", UtcDateTime, nullable=False),
    sa.Column("consumed_at", UtcDateTime, nullable=True),
    ref_column("consumed_by_activation_id", nullable=True),
    sa.UniqueConstraint("instance_id", "signal_id"),
    sa.Index("ix_workflow_signals_pending", "instance_id", "state", "name"),
    state_check("state", SIGNAL_STATES, "state"),
    sa.CheckConstraint(
        "(state = 'CONSUMED') = (consumed_by_activation_id IS NOT NULL)",
        name="consumed_iff_consumer",
    ),
)

workflow_waits = sa.Table(
    "workflow_waits",
    metadata,
    id_column(),
    ref_column(
        "activation_id", sa.ForeignKey("workflow_activations.id"), nullable=False, unique=True
    ),
    ref_column("instance_id", sa.ForeignKey("workflow_instances.id"), nullable=False),
    namespace_column(),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("signal_name", sa.String(NAME_LENGTH), nullable=True),
    # Timeout of a signal wait, wake-up time of a sleep.
    sa.Column("deadline_at", UtcDateTime, nullable=True),
    sa.Column("state", sa.String(16), nullable=False),
    # A signal satisfies at most one wait (inv. 10).
    ref_column("satisfied_by_signal_id", nullable=True, unique=True),
    created_at_column(),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    sa.Index("ix_workflow_waits_instance", "instance_id", "state"),
    state_check("state", WAIT_STATES, "state"),
    state_check("kind", WAIT_KINDS, "kind"),
)

workflow_poll_rounds = sa.Table(
    "workflow_poll_rounds",
    metadata,
    id_column(),
    ref_column("activation_id", sa.ForeignKey("workflow_activations.id"), nullable=False),
    ref_column("instance_id", sa.ForeignKey("workflow_instances.id"), nullable=False),
    namespace_column(),
    # UNIQUE with activation_id: a round is created once, whatever restarts or retries (inv. 11).
    sa.Column("round", sa.Integer(), nullable=False),
    ref_column("task_id", sa.ForeignKey("tasks.id"), nullable=False, unique=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("result", Json, nullable=True),
    created_at_column(),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    sa.UniqueConstraint("activation_id", "round"),
    state_check("state", POLL_ROUND_STATES, "state"),
)

workflow_inbox = sa.Table(
    "workflow_inbox",
    metadata,
    id_column(),
    namespace_column(),
    # The Pulse outcome that produced this message: "task:<task id>:v<state_version>".
    sa.Column("source_event_id", sa.String(KEY_LENGTH), nullable=False),
    sa.Column("consumer", sa.String(32), nullable=False),
    ref_column("instance_id", nullable=False),
    ref_column("activation_id", nullable=True),
    ref_column("task_id", nullable=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("payload", Json, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    # What consuming it did (advanced, ignored and why, deferred while paused).
    sa.Column("outcome", sa.String(KEY_LENGTH), nullable=True),
    sa.Column("received_at", UtcDateTime, nullable=False),
    sa.Column("consumed_at", UtcDateTime, nullable=True),
    sa.Column("attempts", sa.Integer(), nullable=False),
    sa.Column("next_attempt_at", UtcDateTime, nullable=False),
    sa.Column("last_error", sa.String(1024), nullable=True),
    # Dedupe: a duplicate event never creates a second follow-up task (inv. 9).
    sa.UniqueConstraint("source_event_id", "consumer"),
    sa.Index("ix_workflow_inbox_backlog", "state", "next_attempt_at"),
    sa.Index("ix_workflow_inbox_instance", "instance_id", "state"),
    state_check("state", INBOX_STATES, "state"),
    sa.CheckConstraint(
        "(state = 'CONSUMED') = (consumed_at IS NOT NULL)", name="consumed_iff_consumed_at"
    ),
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
    # Set by the resume that applied it; a paused instance never stalls after resume (inv. 12).
    sa.Column("resumed_at", UtcDateTime, nullable=True),
    sa.Index("ix_workflow_continuations_pending", "instance_id", "resumed_at"),
)

workflow_events = sa.Table(
    "workflow_events",
    metadata,
    id_column(),
    ref_column("instance_id", sa.ForeignKey("workflow_instances.id"), nullable=False),
    namespace_column(),
    # 1, 2, 3 … per instance: the instance's full history in order.
    sa.Column("seq", sa.Integer(), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("step_name", sa.String(NAME_LENGTH), nullable=True),
    sa.Column("activation_seq", sa.Integer(), nullable=True),
    sa.Column("details", Json, nullable=True),
    sa.Column("actor", sa.String(KEY_LENGTH), nullable=True),
    sa.Column("at", UtcDateTime, nullable=False),
    sa.UniqueConstraint("instance_id", "seq"),
)
