"""Schedules take their working shape: occurrences record fired | skipped | missed with a reason
(a missed run may span several instants), outlive their schedule, and link a task only when
fired; schedules gain spec_generation and CHECKs (suspended never due, positive limits).

The tables were drafted in 0001 before any code used them, so they are recreated rather than
altered (no release ever held rows in them).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

UTC_DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# The tables were drafts: older code has no scheduler loop, API or resource that reads or writes
# them, so it runs unchanged on this schema.
expand_only = True


def _schedule_columns() -> list[sa.Column[object]]:
    return [
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
    ]


def _schedule_keys() -> list[sa.Constraint]:
    """The constraints 0001's draft and this revision share."""
    return [
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
    ]


def upgrade() -> None:
    op.drop_table("schedule_occurrences")
    op.drop_index("ix_schedules_due", table_name="schedules")
    op.drop_table("schedules")
    op.create_table(
        "schedules",
        *_schedule_columns(),
        sa.Column("spec_generation", sa.Integer(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        *_schedule_keys(),
        sa.CheckConstraint(
            "source IN ('api', 'manifest', 'operator', 'cli', 'dev')",
            name=op.f("ck_schedules_source"),
        ),
        sa.CheckConstraint(
            "catch_up_limit >= 1", name=op.f("ck_schedules_catch_up_limit_positive")
        ),
        sa.CheckConstraint(
            "starting_deadline_seconds IS NULL OR starting_deadline_seconds >= 1",
            name=op.f("ck_schedules_starting_deadline_positive"),
        ),
        sa.CheckConstraint(
            "suspended = 0 OR next_fire_at IS NULL", name=op.f("ck_schedules_suspended_never_due")
        ),
    )
    op.create_index("ix_schedules_due", "schedules", ["next_fire_at"], unique=False)
    op.create_table(
        "schedule_occurrences",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("schedule_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("scheduled_at", UTC_DATETIME, nullable=False),
        sa.Column("through_at", UTC_DATETIME, nullable=False),
        sa.Column("instants", sa.Integer(), nullable=False),
        sa.Column("recorded_at", UTC_DATETIME, nullable=False),
        sa.Column("schedule_version", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=8), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("message", sa.String(length=1024), nullable=False),
        sa.Column("task_id", sa.String(length=36), nullable=True),
        sa.CheckConstraint(
            "status IN ('FIRED', 'SKIPPED', 'MISSED')", name=op.f("ck_schedule_occurrences_status")
        ),
        sa.CheckConstraint(
            "(status = 'FIRED') = (task_id IS NOT NULL)",
            name=op.f("ck_schedule_occurrences_fired_iff_task"),
        ),
        sa.CheckConstraint(
            "instants >= 1 AND through_at >= scheduled_at AND (instants = 1) = (through_at = scheduled_at)",
            name=op.f("ck_schedule_occurrences_run_bounds"),
        ),
        sa.CheckConstraint(
            "status = 'MISSED' OR instants = 1",
            name=op.f("ck_schedule_occurrences_only_misses_span_runs"),
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


def downgrade() -> None:
    """Back to 0001's drafts (occurrence rows are dropped: their shape cannot hold them)."""
    op.drop_table("schedule_occurrences")
    op.drop_index("ix_schedules_due", table_name="schedules")
    op.drop_table("schedules")
    op.create_table(
        "schedules",
        *_schedule_columns(),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        *_schedule_keys(),
    )
    op.create_index("ix_schedules_due", "schedules", ["suspended", "next_fire_at"], unique=False)
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
