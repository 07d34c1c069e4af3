"""The schema's compatibility window (docs/operations/database.md#the-compatibility-window)."""

from __future__ import annotations

import sqlalchemy as sa

from .base import metadata

# One row (id = 1), rewritten by every migration step: the oldest code revision that still runs
# correctly on the schema as it is now. Code that does not know the database's revision (it is
# older than the schema) reads it to decide whether it may keep serving.
schema_compatibility = sa.Table(
    "schema_compatibility",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
    sa.Column("min_code_revision", sa.String(32), nullable=False),
    sa.CheckConstraint("id = 1", name="single_row"),
)
