"""The schema's compatibility window: which code revisions may run on this schema.

Every migration from here on declares ``expand_only``; after each step the migration environment
records in ``schema_compatibility`` the oldest code revision that still runs on the schema, so
servers of the previous release keep serving while a new release's migration runs
(docs/operations/database.md#the-compatibility-window).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A new table the previous code never reads: it keeps working on this schema.
expand_only = True


def upgrade() -> None:
    op.create_table(
        "schema_compatibility",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("min_code_revision", sa.String(length=32), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_schema_compatibility_single_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schema_compatibility")),
    )


def downgrade() -> None:
    op.drop_table("schema_compatibility")
