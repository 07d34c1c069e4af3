"""Pulse tables (seed §4): tasks, submission keys, attempts, task events, concurrency permits."""

from __future__ import annotations

import sqlalchemy as sa

from .access import SAFETY_CLASSES
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

TASK_STATES = (
    "WAITING",
    "LEASED",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
    "NEEDS_REVIEW",
    "CANCELLED",
)
#: Which path a WAITING task is on (NULL for every other state): the claim path (READY), due
#: later (SCHEDULED), behind a closed execution gate (BLOCKED_GATE) or waiting for a concurrency
#: permit (BLOCKED_KEY). Claims read only READY rows; see orbit_store/pulse/limits/paths.py.
WAIT_PATHS = ("READY", "SCHEDULED", "BLOCKED_GATE", "BLOCKED_KEY")
ATTEMPT_STATES = ("LEASED", "RUNNING", "FINISHED")
ATTEMPT_OUTCOMES = ("SUCCEEDED", "FAILED", "UNKNOWN", "LAPSED", "CANCELLED", "RELEASED")

tasks = sa.Table(
    "tasks",
    metadata,
    id_column(),
    namespace_column(),
    sa.Column("queue", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("handler", sa.String(KEY_LENGTH), nullable=False),
    sa.Column("params", Json, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    # Bumped by every transition; task_events has exactly one row per value (invariant 2, 4).
    sa.Column("state_version", sa.Integer(), nullable=False),
    # Internal: the path a WAITING task is on (WAIT_PATHS); users see WAITING either way.
    sa.Column("wait_path", sa.String(16), nullable=True),
    # Counted in the quotas of its scope (namespace '*' and its queue) while unfinished.
    sa.Column("quota_counted", sa.Boolean(), nullable=False, server_default=sa.false()),
    sa.Column("priority", sa.Integer(), nullable=False),
    sa.Column("available_at", UtcDateTime, nullable=False),
    sa.Column("deadline_at", UtcDateTime, nullable=True),
    created_at_column(),
    updated_at_column(),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    # Policy snapshot taken at submission; later queue edits never change a submitted task.
    sa.Column("max_attempts", sa.Integer(), nullable=False),
    sa.Column("attempts_used", sa.Integer(), nullable=False),
    sa.Column("backoff_initial_ms", sa.Integer(), nullable=False),
    sa.Column("backoff_max_ms", sa.Integer(), nullable=False),
    sa.Column("backoff_multiplier", sa.Double(), nullable=False),
    sa.Column("lease_seconds", sa.Integer(), nullable=False),
    sa.Column("attempt_timeout_seconds", sa.Integer(), nullable=True),
    sa.Column("safety", sa.String(8), nullable=False),
    sa.Column("concurrency_key", sa.String(KEY_LENGTH), nullable=True),
    # The limit this submission declared (or inherited); the key's row holds the one in force.
    sa.Column("concurrency_limit", sa.Integer(), nullable=False),
    # The live attempt (LEASED/RUNNING only); NULL otherwise.
    ref_column("current_attempt_id", nullable=True),
    sa.Column("cancel_requested", sa.Boolean(), nullable=False),
    sa.Column("cancel_requested_at", UtcDateTime, nullable=True),
    sa.Column("cancel_reason", sa.String(KEY_LENGTH), nullable=True),
    ref_column("gate_id", sa.ForeignKey("execution_gates.id"), nullable=True),
    # Manual retry creates a new task pointing here; UNIQUE = one direct successor (seed §2).
    ref_column("retry_of", sa.ForeignKey("tasks.id"), nullable=True, unique=True),
    ref_column("workflow_instance_id", nullable=True),
    ref_column("workflow_activation_id", nullable=True),
    ref_column("schedule_id", nullable=True),
    sa.Column("result", Json, nullable=True),
    sa.Column("error", Json, nullable=True),
    sa.Column("submitted_by", sa.String(KEY_LENGTH), nullable=True),
    # Claim path: READY rows of a queue (any handler / one handler), in priority order. Blocked
    # and future rows sit in other ranges of these indexes, so a claim never reads them.
    sa.Index("ix_tasks_ready", "namespace", "queue", "wait_path", "priority", "available_at"),
    sa.Index(
        "ix_tasks_ready_by_handler",
        "namespace",
        "queue",
        "wait_path",
        "handler",
        "priority",
        "available_at",
    ),
    # Promotion of SCHEDULED rows when they fall due; release of BLOCKED_KEY rows by key;
    # the tasks of one execution gate.
    sa.Index("ix_tasks_due", "namespace", "wait_path", "available_at"),
    sa.Index(
        "ix_tasks_key_waiting",
        "namespace",
        "wait_path",
        "concurrency_key",
        "priority",
        "available_at",
    ),
    # wait_path first on purpose: the gate_id foreign key keeps an index of its own (gate_id
    # only). Were this index the foreign key's, every path change would re-check the parent
    # and take a shared lock on the gate row — a hidden lock out of the documented order.
    sa.Index("ix_tasks_gate", "wait_path", "gate_id"),
    sa.Index("ix_tasks_queue_state", "namespace", "queue", "state"),
    sa.Index("ix_tasks_deadline", "state", "deadline_at"),
    sa.Index("ix_tasks_by_namespace", "namespace", "state", "id"),
    sa.Index("ix_tasks_activation", "workflow_activation_id"),
    sa.Index("ix_tasks_schedule", "schedule_id", "state"),
    state_check("state", TASK_STATES, "state"),
    state_check("wait_path", WAIT_PATHS, "wait_path"),
    sa.CheckConstraint(
        "(state = 'WAITING') = (wait_path IS NOT NULL)", name="waiting_iff_on_a_path"
    ),
    state_check("safety", SAFETY_CLASSES, "safety"),
    sa.CheckConstraint(
        "(state IN ('LEASED', 'RUNNING')) = (current_attempt_id IS NOT NULL)",
        name="live_iff_current_attempt",
    ),
    sa.CheckConstraint(
        "(state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) = (finished_at IS NOT NULL)",
        name="finished_iff_terminal",
    ),
    sa.CheckConstraint("attempts_used >= 0 AND max_attempts >= 1", name="attempt_budget"),
    sa.CheckConstraint("concurrency_limit >= 1", name="concurrency_limit_positive"),
)

submission_keys = sa.Table(
    "submission_keys",
    metadata,
    namespace_column(),
    sa.Column("idempotency_key", sa.String(KEY_LENGTH), nullable=False),
    # sha256 of the canonical request: same key + same digest = replay, else conflict (inv. 6).
    sa.Column("request_digest", sa.String(64), nullable=False),
    ref_column("task_id", sa.ForeignKey("tasks.id"), nullable=False),
    created_at_column(),
    # Purging a task never purges its key before this instant (seed §7).
    sa.Column("expires_at", UtcDateTime, nullable=False),
    sa.PrimaryKeyConstraint("namespace", "idempotency_key"),
    sa.Index("ix_submission_keys_expiry", "expires_at"),
    sa.Index("ix_submission_keys_task", "task_id"),
)

task_attempts = sa.Table(
    "task_attempts",
    metadata,
    id_column(),
    ref_column("task_id", sa.ForeignKey("tasks.id"), nullable=False),
    namespace_column(),
    # Fencing number: strictly increasing per task, handed to handlers for resource-side checks.
    sa.Column("generation", sa.Integer(), nullable=False),
    # The restore epoch it was granted under (dispatch_fence): after a restore fence, attempts of
    # an older epoch can neither start, renew nor complete. (epoch, generation) is the fencing
    # token handed to handlers: it keeps increasing even when a restore repeats generations.
    sa.Column("epoch", sa.BigInteger(), nullable=False, server_default="0"),
    ref_column("worker_session_id", sa.ForeignKey("worker_sessions.id"), nullable=True),
    # sha256 of the secret lease token; kept apart from the (guessable) generation (seed §3).
    sa.Column("token_hash", sa.String(64), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("leased_at", UtcDateTime, nullable=False),
    sa.Column("lease_expires_at", UtcDateTime, nullable=False),
    sa.Column("started_at", UtcDateTime, nullable=True),
    sa.Column("heartbeat_at", UtcDateTime, nullable=True),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    sa.Column("outcome", sa.String(16), nullable=True),
    sa.Column("outcome_reason", sa.String(KEY_LENGTH), nullable=True),
    sa.Column("result", Json, nullable=True),
    sa.Column("error", Json, nullable=True),
    # A report that arrived after the attempt was superseded: evidence, never applied (seed §2).
    sa.Column("late_outcome", sa.String(16), nullable=True),
    sa.Column("late_result", Json, nullable=True),
    sa.Column("late_error", Json, nullable=True),
    sa.Column("late_reported_at", UtcDateTime, nullable=True),
    # What the handler last reported through its heartbeat (pulse/state/progress.py keeps the
    # bounds).
    sa.Column("progress_fraction", sa.Float(), nullable=True),
    sa.Column("progress_message", sa.String(500), nullable=True),
    sa.Column("progress_details", Json, nullable=True),
    sa.Column("progress_at", UtcDateTime, nullable=True),
    sa.UniqueConstraint("task_id", "generation"),
    sa.Index("ix_task_attempts_lease_reaper", "state", "lease_expires_at"),
    # worker_session_id alone (the foreign key's index): with `state` in it every attempt state
    # change re-checked the session row under a shared lock, against the lock order.
    sa.Index("ix_task_attempts_by_session", "worker_session_id"),
    state_check("state", ATTEMPT_STATES, "state"),
    state_check("outcome", ATTEMPT_OUTCOMES, "outcome"),
    sa.CheckConstraint(
        "(state = 'FINISHED') = (finished_at IS NOT NULL AND outcome IS NOT NULL)",
        name="finished_iff_outcome",
    ),
    sa.CheckConstraint("state <> 'RUNNING' OR started_at IS NOT NULL", name="running_was_started"),
)

task_events = sa.Table(
    "task_events",
    metadata,
    id_column(),
    ref_column("task_id", sa.ForeignKey("tasks.id"), nullable=False),
    namespace_column(),
    sa.Column("state_version", sa.Integer(), nullable=False),
    sa.Column("from_state", sa.String(16), nullable=True),
    sa.Column("to_state", sa.String(16), nullable=False),
    sa.Column("reason", sa.String(KEY_LENGTH), nullable=False),
    ref_column("attempt_id", nullable=True),
    sa.Column("actor", sa.String(KEY_LENGTH), nullable=True),
    sa.Column("details", Json, nullable=True),
    sa.Column("at", UtcDateTime, nullable=False),
    sa.UniqueConstraint("task_id", "state_version"),
    state_check("to_state", TASK_STATES, "to_state"),
)

concurrency_keys = sa.Table(
    "concurrency_keys",
    metadata,
    namespace_column(),
    sa.Column("concurrency_key", sa.String(KEY_LENGTH), nullable=False),
    created_at_column(),
    # A semaphore (Solid Queue's model): at most permit_limit permits are held at once. The
    # newest declared limit wins; lowering it never revokes a permit already held.
    sa.Column("permit_limit", sa.Integer(), nullable=False, server_default="1"),
    sa.Column("held", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("limit_changed_at", UtcDateTime, nullable=True),
    sa.PrimaryKeyConstraint("namespace", "concurrency_key"),
    sa.CheckConstraint("permit_limit >= 1 AND held >= 0", name="semaphore_in_range"),
)

concurrency_permits = sa.Table(
    "concurrency_permits",
    metadata,
    # One permit per task at most: held from the moment the task is READY until its attempt
    # ends (or it leaves the claim path); `held` on the key row counts these rows.
    ref_column("task_id", sa.ForeignKey("tasks.id"), primary_key=True),
    namespace_column(),
    sa.Column("concurrency_key", sa.String(KEY_LENGTH), nullable=False),
    sa.Column("acquired_at", UtcDateTime, nullable=False),
    sa.ForeignKeyConstraint(
        ["namespace", "concurrency_key"],
        ["concurrency_keys.namespace", "concurrency_keys.concurrency_key"],
    ),
)
