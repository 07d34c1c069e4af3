"""Weave: the workflow tables rebuilt for the engine that now uses them (issue 11).

The tables of 0001 were drafted before any code and never held rows, so they are dropped and
created again: instances gain their definition, event counter and timer key; activations carry
the poll checkpoint; signals, waits, poll rounds and the inbox gain states and the columns their
transactions need; workflow_events holds each instance's history. See docs/reference/data-model.md.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

# Frozen here on purpose: a migration must not change when orbit_store's types evolve.
UTC_DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# The weave tables were drafts no code read or wrote, and Pulse's outcome transaction of older code
# never writes the inbox, so older code runs unchanged on this schema. During a rolling upgrade an
# outcome recorded by an old replica for a workflow's task would not reach the inbox: finish the
# rollout before starting workflows.
expand_only = True

#: The drafts of 0001, dependants first.
DRAFT_TABLES = [
    "workflow_waits",
    "workflow_poll_rounds",
    "workflow_continuations",
    "workflow_steps",
    "workflow_signals",
    "workflow_inbox",
    "workflow_activations",
    "workflow_instances",
    "workflow_definition_versions",
    "workflow_definitions",
]

#: The tables created here, in creation order.
WEAVE_TABLES = [
    "workflow_definitions",
    "workflow_inbox",
    "workflow_definition_versions",
    "workflow_instances",
    "workflow_activations",
    "workflow_continuations",
    "workflow_events",
    "workflow_signals",
    "workflow_steps",
    "workflow_poll_rounds",
    "workflow_waits",
]


def upgrade() -> None:
    for table in DRAFT_TABLES:
        op.drop_table(table)
    create_weave_tables()


def downgrade() -> None:
    for table in reversed(WEAVE_TABLES):
        op.drop_table(table)
    create_draft_tables()


def create_weave_tables() -> None:
    op.create_table(
        "workflow_definitions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("latest_version", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("retired_at", UTC_DATETIME, nullable=True),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.CheckConstraint(
            "source IN ('api', 'manifest', 'operator', 'cli', 'dev')",
            name=op.f("ck_workflow_definitions_source"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_definitions")),
        sa.UniqueConstraint(
            "namespace", "name", name=op.f("uq_workflow_definitions_namespace_name")
        ),
    )
    op.create_table(
        "workflow_inbox",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("source_event_id", sa.String(length=255), nullable=False),
        sa.Column("consumer", sa.String(length=32), nullable=False),
        sa.Column("instance_id", sa.String(length=36), nullable=False),
        sa.Column("activation_id", sa.String(length=36), nullable=True),
        sa.Column("task_id", sa.String(length=36), nullable=True),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.String(length=255), nullable=True),
        sa.Column("received_at", UTC_DATETIME, nullable=False),
        sa.Column("consumed_at", UTC_DATETIME, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", UTC_DATETIME, nullable=False),
        sa.Column("last_error", sa.String(length=1024), nullable=True),
        sa.CheckConstraint(
            "(state = 'CONSUMED') = (consumed_at IS NOT NULL)",
            name=op.f("ck_workflow_inbox_consumed_iff_consumed_at"),
        ),
        sa.CheckConstraint(
            "state IN ('PENDING', 'CONSUMED')", name=op.f("ck_workflow_inbox_state")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_inbox")),
        sa.UniqueConstraint(
            "source_event_id", "consumer", name=op.f("uq_workflow_inbox_source_event_id_consumer")
        ),
    )
    op.create_index(
        "ix_workflow_inbox_backlog", "workflow_inbox", ["state", "next_attempt_at"], unique=False
    )
    op.create_index(
        "ix_workflow_inbox_instance", "workflow_inbox", ["instance_id", "state"], unique=False
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
            "version",
            name=op.f("uq_workflow_definition_versions_definition_id_version"),
        ),
    )
    op.create_table(
        "workflow_instances",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("definition_id", sa.String(length=36), nullable=False),
        sa.Column("definition_version_id", sa.String(length=36), nullable=False),
        sa.Column("definition_name", sa.String(length=63), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("start_key", sa.String(length=255), nullable=False),
        sa.Column("start_digest", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("state_version", sa.Integer(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("control_version", sa.Integer(), nullable=False),
        sa.Column("gate_id", sa.String(length=36), nullable=False),
        sa.Column("input", sa.JSON(), nullable=False),
        sa.Column("output", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("event_seq", sa.Integer(), nullable=False),
        sa.Column("wake_at", UTC_DATETIME, nullable=True),
        sa.Column("started_by", sa.String(length=255), nullable=True),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.Column("finished_at", UTC_DATETIME, nullable=True),
        sa.CheckConstraint(
            "(state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) = (finished_at IS NOT NULL)",
            name=op.f("ck_workflow_instances_finished_iff_terminal"),
        ),
        sa.CheckConstraint(
            "state IN ('RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')",
            name=op.f("ck_workflow_instances_state"),
        ),
        sa.ForeignKeyConstraint(
            ["definition_id"],
            ["workflow_definitions.id"],
            name=op.f("fk_workflow_instances_definition_id"),
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
    op.create_index(
        "ix_workflow_instances_definition",
        "workflow_instances",
        ["definition_id", "state"],
        unique=False,
    )
    op.create_index(
        "ix_workflow_instances_wake", "workflow_instances", ["state", "wake_at"], unique=False
    )
    op.create_table(
        "workflow_activations",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("instance_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("step_name", sa.String(length=63), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("task_id", sa.String(length=36), nullable=True),
        sa.Column("rounds_used", sa.Integer(), nullable=False),
        sa.Column("max_rounds", sa.Integer(), nullable=True),
        sa.Column("deadline_at", UTC_DATETIME, nullable=True),
        sa.Column("next_poll_at", UTC_DATETIME, nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("finished_at", UTC_DATETIME, nullable=True),
        sa.CheckConstraint(
            "kind IN ('task', 'wait', 'sleep', 'poll')", name=op.f("ck_workflow_activations_kind")
        ),
        sa.CheckConstraint(
            "state IN ('ACTIVE', 'PARKED', 'SUCCEEDED', 'FAILED', 'TIMED_OUT', 'CANCELLED')",
            name=op.f("ck_workflow_activations_state"),
        ),
        sa.CheckConstraint(
            "max_rounds IS NULL OR rounds_used <= max_rounds",
            name=op.f("ck_workflow_activations_rounds_within_budget"),
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
        "workflow_events",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("instance_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("step_name", sa.String(length=63), nullable=True),
        sa.Column("activation_seq", sa.Integer(), nullable=True),
        sa.Column("details", sa.JSON(), nullable=True),
        sa.Column("actor", sa.String(length=255), nullable=True),
        sa.Column("at", UTC_DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["instance_id"], ["workflow_instances.id"], name=op.f("fk_workflow_events_instance_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_events")),
        sa.UniqueConstraint("instance_id", "seq", name=op.f("uq_workflow_events_instance_id_seq")),
    )
    op.create_table(
        "workflow_signals",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("instance_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("signal_id", sa.String(length=255), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("sent_by", sa.String(length=255), nullable=True),
        sa.Column("received_at", UTC_DATETIME, nullable=False),
        sa.Column("consumed_at", UTC_DATETIME, nullable=True),
        sa.Column("consumed_by_activation_id", sa.String(length=36), nullable=True),
        sa.CheckConstraint(
            "(state = 'CONSUMED') = (consumed_by_activation_id IS NOT NULL)",
            name=op.f("ck_workflow_signals_consumed_iff_consumer"),
        ),
        sa.CheckConstraint(
            "state IN ('PENDING', 'CONSUMED', 'EXPIRED')", name=op.f("ck_workflow_signals_state")
        ),
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
        ["instance_id", "state", "name"],
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
        sa.Column("current_activation_id", sa.String(length=36), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.Column("finished_at", UTC_DATETIME, nullable=True),
        sa.CheckConstraint(
            "kind IN ('task', 'wait', 'sleep', 'poll')", name=op.f("ck_workflow_steps_kind")
        ),
        sa.CheckConstraint(
            "state IN ('PENDING', 'ACTIVE', 'PARKED', 'SUCCEEDED', 'FAILED', 'TIMED_OUT', 'SKIPPED', 'CANCELLED')",
            name=op.f("ck_workflow_steps_state"),
        ),
        sa.ForeignKeyConstraint(
            ["instance_id"], ["workflow_instances.id"], name=op.f("fk_workflow_steps_instance_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_steps")),
        sa.UniqueConstraint("instance_id", "name", name=op.f("uq_workflow_steps_instance_id_name")),
    )
    op.create_table(
        "workflow_poll_rounds",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("activation_id", sa.String(length=36), nullable=False),
        sa.Column("instance_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.String(length=36), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("finished_at", UTC_DATETIME, nullable=True),
        sa.CheckConstraint(
            "state IN ('RUNNING', 'MATCHED', 'NOT_MATCHED', 'FAILED', 'CANCELLED')",
            name=op.f("ck_workflow_poll_rounds_state"),
        ),
        sa.ForeignKeyConstraint(
            ["activation_id"],
            ["workflow_activations.id"],
            name=op.f("fk_workflow_poll_rounds_activation_id"),
        ),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["workflow_instances.id"],
            name=op.f("fk_workflow_poll_rounds_instance_id"),
        ),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_workflow_poll_rounds_task_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_poll_rounds")),
        sa.UniqueConstraint(
            "activation_id", "round", name=op.f("uq_workflow_poll_rounds_activation_id_round")
        ),
        sa.UniqueConstraint("task_id", name=op.f("uq_workflow_poll_rounds_task_id")),
    )
    op.create_table(
        "workflow_waits",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("activation_id", sa.String(length=36), nullable=False),
        sa.Column("instance_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("signal_name", sa.String(length=63), nullable=True),
        sa.Column("deadline_at", UTC_DATETIME, nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("satisfied_by_signal_id", sa.String(length=36), nullable=True),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("finished_at", UTC_DATETIME, nullable=True),
        sa.CheckConstraint("kind IN ('signal', 'sleep')", name=op.f("ck_workflow_waits_kind")),
        sa.CheckConstraint(
            "state IN ('WAITING', 'SATISFIED', 'TIMED_OUT', 'CANCELLED')",
            name=op.f("ck_workflow_waits_state"),
        ),
        sa.ForeignKeyConstraint(
            ["activation_id"],
            ["workflow_activations.id"],
            name=op.f("fk_workflow_waits_activation_id"),
        ),
        sa.ForeignKeyConstraint(
            ["instance_id"], ["workflow_instances.id"], name=op.f("fk_workflow_waits_instance_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_waits")),
        sa.UniqueConstraint("activation_id", name=op.f("uq_workflow_waits_activation_id")),
        sa.UniqueConstraint(
            "satisfied_by_signal_id", name=op.f("uq_workflow_waits_satisfied_by_signal_id")
        ),
    )
    op.create_index(
        "ix_workflow_waits_instance", "workflow_waits", ["instance_id", "state"], unique=False
    )


def create_draft_tables() -> None:
    """The 0001 drafts, exactly as 0001 created them."""
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
