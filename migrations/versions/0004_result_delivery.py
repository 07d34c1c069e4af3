"""Result delivery and a readable audit trail.

Subscriptions gain their retry policy (max attempts, backoff, timeout) and a version;
event_deliveries are rebuilt around the PENDING → DELIVERED | PARKED machine with a state_version
that fences senders (both tables were drafts nothing wrote to, so they are recreated). audit_log
gets the indexes `GET /v1/audit` filters by.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

UTC_DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Old code never reads subscriptions or event_deliveries (they were unused drafts) and its outcome
# transactions only add result_events, so it runs unchanged on this schema. During a rolling
# upgrade, outcomes recorded by old replicas are not fanned out to subscriptions created meanwhile.
expand_only = True

AUDIT_INDEXES = {
    "ix_audit_log_by_time": ["namespace", "at", "id"],
    "ix_audit_log_by_action": ["namespace", "action", "at"],
    "ix_audit_log_by_actor": ["namespace", "actor", "at"],
}


def upgrade() -> None:
    op.drop_table("event_deliveries")  # its indexes go with it
    op.drop_table("subscriptions")
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("mode", sa.String(length=8), nullable=False),
        sa.Column("filter", sa.JSON(), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=True),
        sa.Column("secret_ref", sa.String(length=255), nullable=True),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("backoff_initial_ms", sa.Integer(), nullable=False),
        sa.Column("backoff_max_ms", sa.Integer(), nullable=False),
        sa.Column("timeout_ms", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.CheckConstraint("mode IN ('pull', 'push')", name=op.f("ck_subscriptions_mode")),
        sa.CheckConstraint(
            "(mode = 'push') = (url IS NOT NULL AND secret_ref IS NOT NULL)",
            name=op.f("ck_subscriptions_push_has_target"),
        ),
        sa.CheckConstraint(
            "max_attempts >= 1", name=op.f("ck_subscriptions_max_attempts_positive")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscriptions")),
        sa.UniqueConstraint("namespace", "name", name=op.f("uq_subscriptions_namespace_name")),
    )
    op.create_table(
        "event_deliveries",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("event_id", sa.String(length=36), nullable=False),
        sa.Column("subscription_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("state", sa.String(length=12), nullable=False),
        sa.Column("state_version", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", UTC_DATETIME, nullable=False),
        sa.Column("last_attempt_at", UTC_DATETIME, nullable=True),
        sa.Column("last_error", sa.String(length=1024), nullable=True),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("delivered_at", UTC_DATETIME, nullable=True),
        sa.Column("parked_at", UTC_DATETIME, nullable=True),
        sa.CheckConstraint(
            "(state = 'DELIVERED') = (delivered_at IS NOT NULL)",
            name=op.f("ck_event_deliveries_delivered_iff_delivered_at"),
        ),
        sa.CheckConstraint(
            "(state = 'PARKED') = (parked_at IS NOT NULL)",
            name=op.f("ck_event_deliveries_parked_iff_parked_at"),
        ),
        sa.CheckConstraint(
            "state IN ('PENDING', 'DELIVERED', 'PARKED')", name=op.f("ck_event_deliveries_state")
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
        "ix_event_deliveries_due",
        "event_deliveries",
        ["subscription_id", "state", "next_attempt_at"],
        unique=False,
    )
    for name, columns in AUDIT_INDEXES.items():
        op.create_index(name, "audit_log", columns, unique=False)


def downgrade() -> None:
    for name in AUDIT_INDEXES:
        op.drop_index(name, table_name="audit_log")
    op.drop_table("event_deliveries")
    op.drop_table("subscriptions")
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
