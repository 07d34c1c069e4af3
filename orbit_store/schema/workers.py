"""Workers (seed §4 "Worker 与执行许可"): sessions and the pods the operator registered."""

from __future__ import annotations

import sqlalchemy as sa

from .base import metadata
from .types import (
    KEY_LENGTH,
    NAME_LENGTH,
    Json,
    UtcDateTime,
    created_at_column,
    id_column,
    namespace_column,
    state_check,
)

SESSION_STATES = ("ACTIVE", "DRAINING", "CLOSED", "REVOKED", "EXPIRED")
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown", "Deleted")

worker_pods = sa.Table(
    "worker_pods",
    metadata,
    # The Kubernetes pod UID: a session in cluster mode must name a registered, live pod.
    sa.Column("uid", sa.String(64), primary_key=True),
    namespace_column(),
    sa.Column("pod_name", sa.String(KEY_LENGTH), nullable=False),
    sa.Column("pool", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("node", sa.String(KEY_LENGTH), nullable=True),
    sa.Column("phase", sa.String(16), nullable=False),
    sa.Column("registered_at", UtcDateTime, nullable=False),
    sa.Column("deleted_at", UtcDateTime, nullable=True),
    sa.Index("ix_worker_pods_pool", "namespace", "pool"),
    state_check("phase", POD_PHASES, "phase"),
)

worker_sessions = sa.Table(
    "worker_sessions",
    metadata,
    id_column(),
    namespace_column(),
    sa.Column("worker_name", sa.String(KEY_LENGTH), nullable=False),
    sa.Column("pod_uid", sa.String(64), sa.ForeignKey("worker_pods.uid"), nullable=True),
    sa.Column("pool", sa.String(NAME_LENGTH), nullable=True),
    sa.Column("node", sa.String(KEY_LENGTH), nullable=True),
    # Bumped when the same worker re-registers; older sessions of it are closed.
    sa.Column("generation", sa.Integer(), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("queues", Json, nullable=False),
    # The handlers this worker runs; a claim grants only tasks of these. NULL: any handler
    # (sessions of clients that do not declare them).
    sa.Column("handlers", Json, nullable=True),
    # worker_name while the session is live (ACTIVE/DRAINING), else NULL: the unique key below
    # makes two live sessions of one worker name impossible (READ COMMITTED has no gap locks).
    sa.Column("live_worker_name", sa.String(KEY_LENGTH), nullable=True),
    created_at_column(),
    sa.Column("renewed_at", UtcDateTime, nullable=False),
    sa.Column("expires_at", UtcDateTime, nullable=False),
    sa.Column("ended_at", UtcDateTime, nullable=True),
    sa.Column("end_reason", sa.String(KEY_LENGTH), nullable=True),
    # The client's key for the registration that opened this session: a late copy of that
    # registration answers this session instead of replacing it (sessions.register_session).
    sa.Column("registration_key", sa.String(64), nullable=True),
    sa.Index("ix_worker_sessions_expiry", "state", "expires_at"),
    sa.Index("uq_worker_sessions_registration_key", "namespace", "registration_key", unique=True),
    sa.Index("ix_worker_sessions_pod", "pod_uid"),
    sa.Index("ix_worker_sessions_worker", "namespace", "worker_name"),
    sa.UniqueConstraint("namespace", "live_worker_name"),
    state_check("state", SESSION_STATES, "state"),
    sa.CheckConstraint(
        "(state IN ('ACTIVE', 'DRAINING')) = (ended_at IS NULL)", name="ended_iff_not_live"
    ),
    sa.CheckConstraint(
        "(state IN ('ACTIVE', 'DRAINING')) = (live_worker_name IS NOT NULL)",
        name="live_name_iff_live",
    ),
)
