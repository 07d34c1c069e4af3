"""Attempts keep the progress their handler last reported through the heartbeat.

A fraction done, a message, bounded details and when the server heard it (database time);
orbit_store/pulse/state/progress.py keeps the bounds.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Expanding: nullable columns an older server never reads nor writes.
expand_only = True

UTC_DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.add_column("task_attempts", sa.Column("progress_fraction", sa.Float(), nullable=True))
    op.add_column("task_attempts", sa.Column("progress_message", sa.String(500), nullable=True))
    op.add_column("task_attempts", sa.Column("progress_details", sa.JSON(), nullable=True))
    op.add_column("task_attempts", sa.Column("progress_at", UTC_DATETIME, nullable=True))


def downgrade() -> None:
    for column in ("progress_at", "progress_details", "progress_message", "progress_fraction"):
        op.drop_column("task_attempts", column)
