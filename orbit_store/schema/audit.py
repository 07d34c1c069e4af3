"""Administrative audit (seed §2): append-only; the application user may only INSERT and SELECT."""

from __future__ import annotations

import sqlalchemy as sa

from .base import metadata
from .types import KEY_LENGTH, Json, UtcDateTime, id_column, namespace_column, ref_column

audit_log = sa.Table(
    "audit_log",
    metadata,
    id_column(),
    namespace_column(),
    sa.Column("at", UtcDateTime, nullable=False),
    sa.Column("actor", sa.String(KEY_LENGTH), nullable=False),
    sa.Column("action", sa.String(64), nullable=False),
    sa.Column("resource_kind", sa.String(64), nullable=False),
    sa.Column("resource_id", sa.String(KEY_LENGTH), nullable=False),
    sa.Column("resource_version", sa.Integer(), nullable=True),
    sa.Column("reason", sa.String(1024), nullable=False),
    sa.Column("evidence_ref", sa.String(1024), nullable=True),
    sa.Column("before", Json, nullable=True),
    sa.Column("after", Json, nullable=True),
    # History is corrected by a new row that points at the one it corrects, never by UPDATE.
    ref_column("corrects_id", sa.ForeignKey("audit_log.id"), nullable=True),
    sa.Index("ix_audit_log_resource", "namespace", "resource_kind", "resource_id"),
    # `GET /v1/audit` and `orbit admin audit list`: a namespace's rows by time, by action, by actor.
    sa.Index("ix_audit_log_by_time", "namespace", "at", "id"),
    sa.Index("ix_audit_log_by_action", "namespace", "action", "at"),
    sa.Index("ix_audit_log_by_actor", "namespace", "actor", "at"),
)
