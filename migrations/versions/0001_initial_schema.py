"""Initial schema: every table of ORBIT.md §4 (see docs/reference/data-model.md).

Revision ID: 0001
Revises:
Create Date: 2026-11-29

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

# Frozen here on purpose: a migration must not change when orbit_store's types evolve.
UTC_DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

CREATED_TABLES = [
    "audit_log",
    "concurrency_keys",
    "credentials",
    "execution_gates",
    "namespaces",
    "queues",
    "quotas",
    "schedules",
    "subscriptions",
    "worker_pods",
    "workflow_definitions",
    "tasks",
    "worker_sessions",
    "workflow_definition_versions",
    "result_events",
    "schedule_occurrences",
    "submission_keys",
    "task_attempts",
    "task_events",
    "workflow_instances",
    "concurrency_permits",
    "event_deliveries",
    "workflow_activations",
    "workflow_inbox",
    "workflow_signals",
    "workflow_steps",
    "workflow_continuations",
    "workflow_poll_rounds",
    "workflow_waits",
]

# revision identifiers, used by Alembic.
revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Creates everything: no older code exists to run on it.
expand_only = False


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table(
        "audit_log",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("at", UTC_DATETIME, nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("resource_kind", sa.String(length=64), nullable=False),
        sa.Column("resource_id", sa.String(length=255), nullable=False),
        sa.Column("resource_version", sa.Integer(), nullable=True),
        sa.Column("reason", sa.String(length=1024), nullable=False),
        sa.Column("evidence_ref", sa.String(length=1024), nullable=True),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.Column("corrects_id", sa.String(length=36), nullable=True),
        sa.ForeignKeyConstraint(
            ["corrects_id"], ["audit_log.id"], name=op.f("fk_audit_log_corrects_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(
        "ix_audit_log_resource",
        "audit_log",
        ["namespace", "resource_kind", "resource_id"],
        unique=False,
    )
    op.create_table(
        "concurrency_keys",
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("concurrency_key", sa.String(length=255), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("namespace", "concurrency_key", name=op.f("pk_concurrency_keys")),
    )
    op.create_table(
        "credentials",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("roles", sa.String(length=255), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("expires_at", UTC_DATETIME, nullable=True),
        sa.Column("revoked_at", UTC_DATETIME, nullable=True),
        sa.CheckConstraint(
            "source IN ('api', 'manifest', 'operator', 'cli', 'dev')",
            name=op.f("ck_credentials_source"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_credentials")),
        sa.UniqueConstraint("namespace", "name", name=op.f("uq_credentials_namespace_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_credentials_token_hash")),
    )
    op.create_table(
        "execution_gates",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("owner_kind", sa.String(length=32), nullable=False),
        sa.Column("owner_id", sa.String(length=64), nullable=False),
        sa.Column("allowed", sa.Boolean(), nullable=False),
        sa.Column("control_version", sa.Integer(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_execution_gates")),
        sa.UniqueConstraint(
            "owner_kind", "owner_id", name=op.f("uq_execution_gates_owner_kind_owner_id")
        ),
    )
    op.create_table(
        "namespaces",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_namespaces")),
        comment="Routing unit for every row; one transaction never spans two namespaces.",
    )
    op.create_table(
        "queues",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("backoff_initial_ms", sa.Integer(), nullable=False),
        sa.Column("backoff_max_ms", sa.Integer(), nullable=False),
        sa.Column("backoff_multiplier", sa.Double(), nullable=False),
        sa.Column("lease_seconds", sa.Integer(), nullable=False),
        sa.Column("attempt_timeout_seconds", sa.Integer(), nullable=True),
        sa.Column("safety_default", sa.String(length=8), nullable=False),
        sa.Column("concurrency_limit", sa.Integer(), nullable=True),
        sa.Column("deletion_policy", sa.String(length=8), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("spec_generation", sa.Integer(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.CheckConstraint(
            "deletion_policy IN ('Block', 'Drain', 'Cancel')",
            name=op.f("ck_queues_deletion_policy"),
        ),
        sa.CheckConstraint(
            "safety_default IN ('safe', 'unsafe')", name=op.f("ck_queues_safety_default")
        ),
        sa.CheckConstraint(
            "source IN ('api', 'manifest', 'operator', 'cli', 'dev')", name=op.f("ck_queues_source")
        ),
        sa.CheckConstraint("lease_seconds >= 1", name=op.f("ck_queues_lease_seconds_positive")),
        sa.CheckConstraint("max_attempts >= 1", name=op.f("ck_queues_max_attempts_positive")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queues")),
        sa.UniqueConstraint("namespace", "name", name=op.f("uq_queues_namespace_name")),
    )
    op.create_table(
        "quotas",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("queue", sa.String(length=63), nullable=False),
        sa.Column("max_waiting", sa.Integer(), nullable=True),
        sa.Column("max_running", sa.Integer(), nullable=True),
        sa.Column("submit_rate_per_second", sa.Double(), nullable=True),
        sa.Column("submit_burst", sa.Integer(), nullable=True),
        sa.Column("rate_tokens", sa.Double(), nullable=True),
        sa.Column("rate_refilled_at", UTC_DATETIME, nullable=True),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("spec_generation", sa.Integer(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.CheckConstraint(
            "source IN ('api', 'manifest', 'operator', 'cli', 'dev')", name=op.f("ck_quotas_source")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quotas")),
        sa.UniqueConstraint("namespace", "name", name=op.f("uq_quotas_namespace_name")),
    )
    op.create_index("ix_quotas_scope", "quotas", ["namespace", "queue"], unique=False)
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("cron", sa.String(length=255), nullable=False),
        sa.Column("time_zone", sa.String(length=64), nullable=False),
        sa.Column("start_at", UTC_DATETIME, nullable=True),
        sa.Column("end_at", UTC_DATETIME, nullable=True),
        sa.Column("suspended", sa.Boolean(), nullable=False),
        sa.Column("concurrency_policy", sa.String(length=8), nullable=False),
        sa.Column("starting_deadline_seconds", sa.Integer(), nullable=True),
        sa.Column("misfire_policy", sa.String(length=16), nullable=False),
        sa.Column("catch_up_limit", sa.Integer(), nullable=False),
        sa.Column("task_template", sa.JSON(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("next_fire_at", UTC_DATETIME, nullable=True),
        sa.Column("last_fire_at", UTC_DATETIME, nullable=True),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.CheckConstraint(
            "concurrency_policy IN ('Allow', 'Forbid', 'Replace')",
            name=op.f("ck_schedules_concurrency_policy"),
        ),
        sa.CheckConstraint(
            "misfire_policy IN ('Skip', 'FireOnce', 'CatchUp')",
            name=op.f("ck_schedules_misfire_policy"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
        sa.UniqueConstraint("namespace", "name", name=op.f("uq_schedules_namespace_name")),
    )
    op.create_index("ix_schedules_due", "schedules", ["suspended", "next_fire_at"], unique=False)
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("mode", sa.String(length=8), nullable=False),
        sa.Column("filter", sa.JSON(), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=True),
        sa.Column("secret_ref", sa.String(length=255), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.CheckConstraint("mode IN ('pull', 'push')", name=op.f("ck_subscriptions_mode")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscriptions")),
        sa.UniqueConstraint("namespace", "name", name=op.f("uq_subscriptions_namespace_name")),
    )
    op.create_table(
        "worker_pods",
        sa.Column("uid", sa.String(length=64), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("pod_name", sa.String(length=255), nullable=False),
        sa.Column("pool", sa.String(length=63), nullable=False),
        sa.Column("node", sa.String(length=255), nullable=True),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.Column("registered_at", UTC_DATETIME, nullable=False),
        sa.Column("deleted_at", UTC_DATETIME, nullable=True),
        sa.CheckConstraint(
            "phase IN ('Pending', 'Running', 'Succeeded', 'Failed', 'Unknown', 'Deleted')",
            name=op.f("ck_worker_pods_phase"),
        ),
        sa.PrimaryKeyConstraint("uid", name=op.f("pk_worker_pods")),
    )
    op.create_index("ix_worker_pods_pool", "worker_pods", ["namespace", "pool"], unique=False)
    op.create_table(
        "workflow_definitions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("latest_version", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_definitions")),
        sa.UniqueConstraint(
            "namespace", "name", name=op.f("uq_workflow_definitions_namespace_name")
        ),
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("queue", sa.String(length=63), nullable=False),
        sa.Column("handler", sa.String(length=255), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("state_version", sa.Integer(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("available_at", UTC_DATETIME, nullable=False),
        sa.Column("deadline_at", UTC_DATETIME, nullable=True),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.Column("finished_at", UTC_DATETIME, nullable=True),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("attempts_used", sa.Integer(), nullable=False),
        sa.Column("backoff_initial_ms", sa.Integer(), nullable=False),
        sa.Column("backoff_max_ms", sa.Integer(), nullable=False),
        sa.Column("backoff_multiplier", sa.Double(), nullable=False),
        sa.Column("lease_seconds", sa.Integer(), nullable=False),
        sa.Column("attempt_timeout_seconds", sa.Integer(), nullable=True),
        sa.Column("safety", sa.String(length=8), nullable=False),
        sa.Column("concurrency_key", sa.String(length=255), nullable=True),
        sa.Column("concurrency_limit", sa.Integer(), nullable=False),
        sa.Column("current_attempt_id", sa.String(length=36), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("cancel_requested_at", UTC_DATETIME, nullable=True),
        sa.Column("cancel_reason", sa.String(length=255), nullable=True),
        sa.Column("gate_id", sa.String(length=36), nullable=True),
        sa.Column("retry_of", sa.String(length=36), nullable=True),
        sa.Column("workflow_instance_id", sa.String(length=36), nullable=True),
        sa.Column("workflow_activation_id", sa.String(length=36), nullable=True),
        sa.Column("schedule_id", sa.String(length=36), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("submitted_by", sa.String(length=255), nullable=True),
        sa.CheckConstraint(
            "(state IN ('LEASED', 'RUNNING')) = (current_attempt_id IS NOT NULL)",
            name=op.f("ck_tasks_live_iff_current_attempt"),
        ),
        sa.CheckConstraint(
            "(state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) = (finished_at IS NOT NULL)",
            name=op.f("ck_tasks_finished_iff_terminal"),
        ),
        sa.CheckConstraint("safety IN ('safe', 'unsafe')", name=op.f("ck_tasks_safety")),
        sa.CheckConstraint(
            "state IN ('WAITING', 'LEASED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'NEEDS_REVIEW', 'CANCELLED')",
            name=op.f("ck_tasks_state"),
        ),
        sa.CheckConstraint(
            "attempts_used >= 0 AND max_attempts >= 1", name=op.f("ck_tasks_attempt_budget")
        ),
        sa.CheckConstraint(
            "concurrency_limit >= 1", name=op.f("ck_tasks_concurrency_limit_positive")
        ),
        sa.ForeignKeyConstraint(["gate_id"], ["execution_gates.id"], name=op.f("fk_tasks_gate_id")),
        sa.ForeignKeyConstraint(["retry_of"], ["tasks.id"], name=op.f("fk_tasks_retry_of")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tasks")),
        sa.UniqueConstraint("retry_of", name=op.f("uq_tasks_retry_of")),
    )
    op.create_index("ix_tasks_activation", "tasks", ["workflow_activation_id"], unique=False)
    op.create_index("ix_tasks_by_namespace", "tasks", ["namespace", "state", "id"], unique=False)
    op.create_index(
        "ix_tasks_claim",
        "tasks",
        ["namespace", "queue", "state", "priority", "available_at"],
        unique=False,
    )
    op.create_index("ix_tasks_deadline", "tasks", ["state", "deadline_at"], unique=False)
    op.create_index("ix_tasks_schedule", "tasks", ["schedule_id", "state"], unique=False)
    op.create_table(
        "worker_sessions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("worker_name", sa.String(length=255), nullable=False),
        sa.Column("pod_uid", sa.String(length=64), nullable=True),
        sa.Column("pool", sa.String(length=63), nullable=True),
        sa.Column("node", sa.String(length=255), nullable=True),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("queues", sa.JSON(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("renewed_at", UTC_DATETIME, nullable=False),
        sa.Column("expires_at", UTC_DATETIME, nullable=False),
        sa.Column("ended_at", UTC_DATETIME, nullable=True),
        sa.Column("end_reason", sa.String(length=255), nullable=True),
        sa.CheckConstraint(
            "(state IN ('ACTIVE', 'DRAINING')) = (ended_at IS NULL)",
            name=op.f("ck_worker_sessions_ended_iff_not_live"),
        ),
        sa.CheckConstraint(
            "state IN ('ACTIVE', 'DRAINING', 'CLOSED', 'REVOKED', 'EXPIRED')",
            name=op.f("ck_worker_sessions_state"),
        ),
        sa.ForeignKeyConstraint(
            ["pod_uid"], ["worker_pods.uid"], name=op.f("fk_worker_sessions_pod_uid")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worker_sessions")),
    )
    op.create_index(
        "ix_worker_sessions_expiry", "worker_sessions", ["state", "expires_at"], unique=False
    )
    op.create_index("ix_worker_sessions_pod", "worker_sessions", ["pod_uid"], unique=False)
    op.create_index(
        "ix_worker_sessions_worker", "worker_sessions", ["namespace", "worker_name"], unique=False
    )
    op.create_table(
        "workflow_definition_versions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("definition_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("published_at", UTC_DATETIME, nullable=False),
        sa.Column("published_by", sa.String(length=255), nullable=True),
        sa.ForeignKeyConstraint(
            ["definition_id"],
            ["workflow_definitions.id"],
            name=op.f("fk_workflow_definition_versions_definition_id"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_definition_versions")),
        sa.UniqueConstraint(
            "definition_id",
            "digest",
            name=op.f("uq_workflow_definition_versions_definition_id_digest"),
        ),
        sa.UniqueConstraint(
            "definition_id",
            "version",
            name=op.f("uq_workflow_definition_versions_definition_id_version"),
        ),
    )
    op.create_table(
        "result_events",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("task_id", sa.String(length=36), nullable=False),
        sa.Column("state_version", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("task_state", sa.String(length=16), nullable=False),
        sa.Column("queue", sa.String(length=63), nullable=False),
        sa.Column("handler", sa.String(length=255), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name=op.f("fk_result_events_task_id")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_result_events")),
        sa.UniqueConstraint(
            "task_id", "state_version", name=op.f("uq_result_events_task_id_state_version")
        ),
    )
    op.create_index(
        "ix_result_events_by_namespace", "result_events", ["namespace", "id"], unique=False
    )
    op.create_table(
        "schedule_occurrences",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("schedule_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("scheduled_at", UTC_DATETIME, nullable=False),
        sa.Column("fired_at", UTC_DATETIME, nullable=False),
        sa.Column("schedule_version", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("task_id", sa.String(length=36), nullable=True),
        sa.CheckConstraint(
            "outcome IN ('FIRED', 'SKIPPED_MISFIRE', 'SKIPPED_FORBID', 'FIRED_REPLACING')",
            name=op.f("ck_schedule_occurrences_outcome"),
        ),
        sa.ForeignKeyConstraint(
            ["schedule_id"], ["schedules.id"], name=op.f("fk_schedule_occurrences_schedule_id")
        ),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_schedule_occurrences_task_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedule_occurrences")),
        sa.UniqueConstraint(
            "schedule_id",
            "scheduled_at",
            name=op.f("uq_schedule_occurrences_schedule_id_scheduled_at"),
        ),
    )
    op.create_table(
        "submission_keys",
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=False),
        sa.Column("request_digest", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.String(length=36), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("expires_at", UTC_DATETIME, nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name=op.f("fk_submission_keys_task_id")),
        sa.PrimaryKeyConstraint("namespace", "idempotency_key", name=op.f("pk_submission_keys")),
    )
    op.create_index("ix_submission_keys_expiry", "submission_keys", ["expires_at"], unique=False)
    op.create_index("ix_submission_keys_task", "submission_keys", ["task_id"], unique=False)
    op.create_table(
        "task_attempts",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("task_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("worker_session_id", sa.String(length=36), nullable=True),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("leased_at", UTC_DATETIME, nullable=False),
        sa.Column("lease_expires_at", UTC_DATETIME, nullable=False),
        sa.Column("started_at", UTC_DATETIME, nullable=True),
        sa.Column("heartbeat_at", UTC_DATETIME, nullable=True),
        sa.Column("finished_at", UTC_DATETIME, nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("outcome_reason", sa.String(length=255), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("late_outcome", sa.String(length=16), nullable=True),
        sa.Column("late_result", sa.JSON(), nullable=True),
        sa.Column("late_error", sa.JSON(), nullable=True),
        sa.Column("late_reported_at", UTC_DATETIME, nullable=True),
        sa.CheckConstraint(
            "(state = 'FINISHED') = (finished_at IS NOT NULL AND outcome IS NOT NULL)",
            name=op.f("ck_task_attempts_finished_iff_outcome"),
        ),
        sa.CheckConstraint(
            "outcome IN ('SUCCEEDED', 'FAILED', 'UNKNOWN', 'LAPSED', 'CANCELLED', 'RELEASED')",
            name=op.f("ck_task_attempts_outcome"),
        ),
        sa.CheckConstraint(
            "state <> 'RUNNING' OR started_at IS NOT NULL",
            name=op.f("ck_task_attempts_running_was_started"),
        ),
        sa.CheckConstraint(
            "state IN ('LEASED', 'RUNNING', 'FINISHED')", name=op.f("ck_task_attempts_state")
        ),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name=op.f("fk_task_attempts_task_id")),
        sa.ForeignKeyConstraint(
            ["worker_session_id"],
            ["worker_sessions.id"],
            name=op.f("fk_task_attempts_worker_session_id"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_attempts")),
        sa.UniqueConstraint(
            "task_id", "generation", name=op.f("uq_task_attempts_task_id_generation")
        ),
    )
    op.create_index(
        "ix_task_attempts_lease_reaper",
        "task_attempts",
        ["state", "lease_expires_at"],
        unique=False,
    )
    op.create_index(
        "ix_task_attempts_session", "task_attempts", ["worker_session_id", "state"], unique=False
    )
    op.create_table(
        "task_events",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("task_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("state_version", sa.Integer(), nullable=False),
        sa.Column("from_state", sa.String(length=16), nullable=True),
        sa.Column("to_state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=255), nullable=False),
        sa.Column("attempt_id", sa.String(length=36), nullable=True),
        sa.Column("actor", sa.String(length=255), nullable=True),
        sa.Column("details", sa.JSON(), nullable=True),
        sa.Column("at", UTC_DATETIME, nullable=False),
        sa.CheckConstraint(
            "to_state IN ('WAITING', 'LEASED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'NEEDS_REVIEW', 'CANCELLED')",
            name=op.f("ck_task_events_to_state"),
        ),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name=op.f("fk_task_events_task_id")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_events")),
        sa.UniqueConstraint(
            "task_id", "state_version", name=op.f("uq_task_events_task_id_state_version")
        ),
    )
    op.create_table(
        "workflow_instances",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("definition_version_id", sa.String(length=36), nullable=False),
        sa.Column("start_key", sa.String(length=255), nullable=False),
        sa.Column("start_digest", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("state_version", sa.Integer(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("control_version", sa.Integer(), nullable=False),
        sa.Column("gate_id", sa.String(length=36), nullable=False),
        sa.Column("input", sa.JSON(), nullable=False),
        sa.Column("output", sa.JSON(), nullable=True),
        sa.Column("policy", sa.JSON(), nullable=True),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.Column("finished_at", UTC_DATETIME, nullable=True),
        sa.CheckConstraint(
            "state IN ('RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')",
            name=op.f("ck_workflow_instances_state"),
        ),
        sa.ForeignKeyConstraint(
            ["definition_version_id"],
            ["workflow_definition_versions.id"],
            name=op.f("fk_workflow_instances_definition_version_id"),
        ),
        sa.ForeignKeyConstraint(
            ["gate_id"], ["execution_gates.id"], name=op.f("fk_workflow_instances_gate_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_instances")),
        sa.UniqueConstraint(
            "namespace", "start_key", name=op.f("uq_workflow_instances_namespace_start_key")
        ),
    )
    op.create_index(
        "ix_workflow_instances_state", "workflow_instances", ["namespace", "state"], unique=False
    )
    op.create_table(
        "concurrency_permits",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("concurrency_key", sa.String(length=255), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.String(length=36), nullable=False),
        sa.Column("attempt_id", sa.String(length=36), nullable=False),
        sa.Column("acquired_at", UTC_DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"], ["task_attempts.id"], name=op.f("fk_concurrency_permits_attempt_id")
        ),
        sa.ForeignKeyConstraint(
            ["namespace", "concurrency_key"],
            ["concurrency_keys.namespace", "concurrency_keys.concurrency_key"],
            name=op.f("fk_concurrency_permits_namespace"),
        ),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_concurrency_permits_task_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_concurrency_permits")),
        sa.UniqueConstraint("attempt_id", name=op.f("uq_concurrency_permits_attempt_id")),
        sa.UniqueConstraint(
            "namespace",
            "concurrency_key",
            "slot",
            name=op.f("uq_concurrency_permits_namespace_concurrency_key_slot"),
        ),
    )
    op.create_table(
        "event_deliveries",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("event_id", sa.String(length=36), nullable=False),
        sa.Column("subscription_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("state", sa.String(length=8), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", UTC_DATETIME, nullable=False),
        sa.Column("last_error", sa.String(length=1024), nullable=True),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("acked_at", UTC_DATETIME, nullable=True),
        sa.CheckConstraint(
            "(state = 'ACKED') = (acked_at IS NOT NULL)",
            name=op.f("ck_event_deliveries_acked_iff_acked_at"),
        ),
        sa.CheckConstraint(
            "state IN ('PENDING', 'ACKED', 'DEAD')", name=op.f("ck_event_deliveries_state")
        ),
        sa.ForeignKeyConstraint(
            ["event_id"], ["result_events.id"], name=op.f("fk_event_deliveries_event_id")
        ),
        sa.ForeignKeyConstraint(
            ["subscription_id"],
            ["subscriptions.id"],
            name=op.f("fk_event_deliveries_subscription_id"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_deliveries")),
        sa.UniqueConstraint(
            "event_id", "subscription_id", name=op.f("uq_event_deliveries_event_id_subscription_id")
        ),
    )
    op.create_index(
        "ix_event_deliveries_backlog",
        "event_deliveries",
        ["subscription_id", "state", "next_attempt_at"],
        unique=False,
    )
    op.create_table(
        "workflow_activations",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("instance_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("step_name", sa.String(length=63), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("task_id", sa.String(length=36), nullable=True),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("finished_at", UTC_DATETIME, nullable=True),
        sa.CheckConstraint(
            "state IN ('ACTIVE', 'SUCCEEDED', 'FAILED', 'TIMED_OUT', 'CANCELLED')",
            name=op.f("ck_workflow_activations_state"),
        ),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["workflow_instances.id"],
            name=op.f("fk_workflow_activations_instance_id"),
        ),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_workflow_activations_task_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_activations")),
        sa.UniqueConstraint(
            "instance_id",
            "step_name",
            "seq",
            name=op.f("uq_workflow_activations_instance_id_step_name_seq"),
        ),
    )
    op.create_table(
        "workflow_inbox",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("source_event_id", sa.String(length=64), nullable=False),
        sa.Column("consumer", sa.String(length=64), nullable=False),
        sa.Column("instance_id", sa.String(length=36), nullable=False),
        sa.Column("activation_id", sa.String(length=36), nullable=True),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("received_at", UTC_DATETIME, nullable=False),
        sa.Column("consumed_at", UTC_DATETIME, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", UTC_DATETIME, nullable=False),
        sa.CheckConstraint(
            "state IN ('PENDING', 'CONSUMED', 'PARKED')", name=op.f("ck_workflow_inbox_state")
        ),
        sa.ForeignKeyConstraint(
            ["instance_id"], ["workflow_instances.id"], name=op.f("fk_workflow_inbox_instance_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_inbox")),
        sa.UniqueConstraint(
            "source_event_id", "consumer", name=op.f("uq_workflow_inbox_source_event_id_consumer")
        ),
    )
    op.create_index(
        "ix_workflow_inbox_backlog", "workflow_inbox", ["state", "next_attempt_at"], unique=False
    )
    op.create_table(
        "workflow_signals",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("instance_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("signal_id", sa.String(length=255), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("received_at", UTC_DATETIME, nullable=False),
        sa.Column("consumed_at", UTC_DATETIME, nullable=True),
        sa.Column("consumed_by_activation_id", sa.String(length=36), nullable=True),
        sa.ForeignKeyConstraint(
            ["instance_id"], ["workflow_instances.id"], name=op.f("fk_workflow_signals_instance_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_signals")),
        sa.UniqueConstraint(
            "instance_id", "signal_id", name=op.f("uq_workflow_signals_instance_id_signal_id")
        ),
    )
    op.create_index(
        "ix_workflow_signals_pending",
        "workflow_signals",
        ["instance_id", "name", "consumed_at"],
        unique=False,
    )
    op.create_table(
        "workflow_steps",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("instance_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("activation_count", sa.Integer(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.CheckConstraint(
            "state IN ('PENDING', 'ACTIVE', 'SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED')",
            name=op.f("ck_workflow_steps_state"),
        ),
        sa.ForeignKeyConstraint(
            ["instance_id"], ["workflow_instances.id"], name=op.f("fk_workflow_steps_instance_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_steps")),
        sa.UniqueConstraint("instance_id", "name", name=op.f("uq_workflow_steps_instance_id_name")),
    )
    op.create_table(
        "workflow_continuations",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("instance_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("inbox_id", sa.String(length=36), nullable=True),
        sa.Column("activation_id", sa.String(length=36), nullable=True),
        sa.Column("reason", sa.String(length=255), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("resumed_at", UTC_DATETIME, nullable=True),
        sa.ForeignKeyConstraint(
            ["inbox_id"], ["workflow_inbox.id"], name=op.f("fk_workflow_continuations_inbox_id")
        ),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["workflow_instances.id"],
            name=op.f("fk_workflow_continuations_instance_id"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_continuations")),
    )
    op.create_index(
        "ix_workflow_continuations_pending",
        "workflow_continuations",
        ["instance_id", "resumed_at"],
        unique=False,
    )
    op.create_table(
        "workflow_poll_rounds",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("activation_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("rounds_used", sa.Integer(), nullable=False),
        sa.Column("max_rounds", sa.Integer(), nullable=False),
        sa.Column("deadline_at", UTC_DATETIME, nullable=True),
        sa.Column("next_poll_at", UTC_DATETIME, nullable=True),
        sa.Column("task_id", sa.String(length=36), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.CheckConstraint(
            "state IN ('SCHEDULED', 'RUNNING', 'MATCHED', 'NOT_MATCHED', 'FAILED')",
            name=op.f("ck_workflow_poll_rounds_state"),
        ),
        sa.ForeignKeyConstraint(
            ["activation_id"],
            ["workflow_activations.id"],
            name=op.f("fk_workflow_poll_rounds_activation_id"),
        ),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_workflow_poll_rounds_task_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_poll_rounds")),
        sa.UniqueConstraint(
            "activation_id", "round", name=op.f("uq_workflow_poll_rounds_activation_id_round")
        ),
    )
    op.create_index(
        "ix_workflow_poll_rounds_due",
        "workflow_poll_rounds",
        ["state", "next_poll_at"],
        unique=False,
    )
    op.create_table(
        "workflow_waits",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("activation_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("signal_name", sa.String(length=63), nullable=True),
        sa.Column("deadline_at", UTC_DATETIME, nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("satisfied_by_signal_id", sa.String(length=36), nullable=True),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.CheckConstraint(
            "state IN ('WAITING', 'SATISFIED', 'TIMED_OUT', 'CANCELLED')",
            name=op.f("ck_workflow_waits_state"),
        ),
        sa.ForeignKeyConstraint(
            ["activation_id"],
            ["workflow_activations.id"],
            name=op.f("fk_workflow_waits_activation_id"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_waits")),
        sa.UniqueConstraint("activation_id", name=op.f("uq_workflow_waits_activation_id")),
    )
    op.create_index(
        "ix_workflow_waits_deadline", "workflow_waits", ["state", "deadline_at"], unique=False
    )


def downgrade() -> None:
    """Drop every table, dependants first (their indexes go with them)."""
    for table in reversed(CREATED_TABLES):
        op.drop_table(table)
