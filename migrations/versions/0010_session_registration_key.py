"""Worker sessions carry the key of the registration that opened them.

A worker resends a registration whose answer it did not get; the first copy may reach the
database after the resend opened the session the worker then uses. Without a key the late copy
replaced that session, and the leases the worker was running under it lapsed. With one, a copy
answers the session its registration already opened.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Expanding: a nullable column and a unique index over it. Older servers never set it (NULLs do
# not collide) and keep their old behaviour.
expand_only = True


def upgrade() -> None:
    op.add_column("worker_sessions", sa.Column("registration_key", sa.String(64), nullable=True))
    op.create_index(
        "uq_worker_sessions_registration_key",
        "worker_sessions",
        ["namespace", "registration_key"],
        unique=True,
    )


def downgrade() -> None:
    op.drop_index("uq_worker_sessions_registration_key", table_name="worker_sessions")
    op.drop_column("worker_sessions", "registration_key")
