"""A workflow whose timers fail to fire backs off alone, with the reason on the instance.

The timer loop records the failure (how many in a row, the error, when to try again) on the
instance, and lists only instances whose retry time has come, so one namespace's refused
firings never take the batch that other namespaces' sleeps, signal timeouts and poll rounds
need.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Expanding: nullable columns; an older server never reads them and never backs off.
expand_only = True

UTC_DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.add_column("workflow_instances", sa.Column("timer_failures", sa.Integer(), nullable=True))
    op.add_column("workflow_instances", sa.Column("timer_retry_at", UTC_DATETIME, nullable=True))
    op.add_column("workflow_instances", sa.Column("timer_error", sa.String(1024), nullable=True))


def downgrade() -> None:
    for column in ("timer_error", "timer_retry_at", "timer_failures"):
        op.drop_column("workflow_instances", column)
