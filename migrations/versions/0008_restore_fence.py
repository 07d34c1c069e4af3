"""Restore fencing: the dispatch fence (current restore epoch, dispatch open or closed), the
history of fences, and the epoch each attempt was granted under.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

"""

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

UTC_DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Expanding: two new tables and a defaulted column the previous code never reads; it keeps
# working on this schema. It does not know the fence, though: run `orbit admin restore-fence`
# only once every server replica runs a release that has it (docs/operations/recovery.md).
expand_only = True


def upgrade() -> None:
    op.create_table(
        "dispatch_fence",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("dispatch_open", sa.Boolean(), nullable=False),
        sa.Column("fence_id", sa.String(length=36), nullable=True),
        sa.Column("changed_at", UTC_DATETIME, nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_dispatch_fence_single_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dispatch_fence")),
    )
    op.create_table(
        "restore_fences",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("previous_epoch", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.String(length=1024), nullable=False),
        sa.Column("fenced_by", sa.String(length=255), nullable=False),
        sa.Column("fenced_at", UTC_DATETIME, nullable=False),
        sa.Column("reopened_at", UTC_DATETIME, nullable=True),
        sa.Column("reopened_by", sa.String(length=255), nullable=True),
        sa.Column("reopen_reason", sa.String(length=1024), nullable=True),
        sa.CheckConstraint(
            "epoch > previous_epoch", name=op.f("ck_restore_fences_epoch_increases")
        ),
        sa.CheckConstraint(
            "(reopened_at IS NULL) = (reopened_by IS NULL)",
            name=op.f("ck_restore_fences_reopened_iff_reopened_by"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_restore_fences")),
        sa.UniqueConstraint("epoch", name=op.f("uq_restore_fences_epoch")),
    )
    # Epoch 0, open: the state of every database that was never fenced.
    fence = sa.table(
        "dispatch_fence",
        sa.column("id", sa.Integer),
        sa.column("epoch", sa.BigInteger),
        sa.column("dispatch_open", sa.Boolean),
        sa.column("changed_at", UTC_DATETIME),
    )
    op.execute(
        fence.insert().values(
            id=1,
            epoch=0,
            dispatch_open=True,
            changed_at=dt.datetime.now(dt.UTC).replace(tzinfo=None),
        )
    )
    with op.batch_alter_table("task_attempts") as batch:
        batch.add_column(sa.Column("epoch", sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("task_attempts") as batch:
        batch.drop_column("epoch")
    op.drop_table("restore_fences")
    op.drop_table("dispatch_fence")
