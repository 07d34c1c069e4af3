"""Server replicas' liveness (issue 15, fix 1): a whole-server outage is not charged to workers.

Each `orbit server` records when it began serving and beats ``last_seen_at``; the reaper reads
the gaps in which no replica was serving and extends, rather than lapses, leases that ran out
in one.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

UTC_DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Expanding: a new table only. Older servers ignore it (they neither beat nor read it), so
# they keep their old behaviour across an outage; new servers still see them as silent.
expand_only = True


def upgrade() -> None:
    op.create_table(
        "server_replicas",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", UTC_DATETIME, nullable=False),
        sa.Column("last_seen_at", UTC_DATETIME, nullable=False),
    )
    op.create_index("ix_server_replicas_last_seen", "server_replicas", ["last_seen_at"])


def downgrade() -> None:
    op.drop_index("ix_server_replicas_last_seen", table_name="server_replicas")
    op.drop_table("server_replicas")
