"""Access and resources (seed §4 "接入与资源"): namespaces, credentials, queues, quotas, gates."""

from __future__ import annotations

import sqlalchemy as sa

from .base import metadata
from .types import (
    KEY_LENGTH,
    NAME_LENGTH,
    UtcDateTime,
    created_at_column,
    id_column,
    namespace_column,
    state_check,
    updated_at_column,
)

SAFETY_CLASSES = ("safe", "unsafe")
RESOURCE_SOURCES = ("api", "manifest", "operator", "cli", "dev")
DELETION_POLICIES = ("Block", "Drain", "Cancel")

namespaces = sa.Table(
    "namespaces",
    metadata,
    sa.Column("name", sa.String(NAME_LENGTH), primary_key=True),
    created_at_column(),
    # Set while any quota exists here: submits then lock the quotas in scope and count the task
    # (tasks.quota_counted). Submits read this row under a shared lock; declaring the first
    # quota of a scope takes it exclusively, so no submission slips past a new quota's count.
    sa.Column("has_quotas", sa.Boolean(), nullable=False, server_default=sa.false()),
    comment="Routing unit for every row; one transaction never spans two namespaces.",
)

credentials = sa.Table(
    "credentials",
    metadata,
    id_column(),
    namespace_column(),
    sa.Column("name", sa.String(KEY_LENGTH), nullable=False),
    # sha256 of the bearer token: the token itself is never stored.
    sa.Column("token_hash", sa.String(64), nullable=False),
    # Space-separated roles out of read, submit, work, review, admin.
    sa.Column("roles", sa.String(KEY_LENGTH), nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
    created_at_column(),
    sa.Column("expires_at", UtcDateTime, nullable=True),
    sa.Column("revoked_at", UtcDateTime, nullable=True),
    sa.UniqueConstraint("namespace", "name"),
    # Unique per namespace only (never across namespaces: that would reveal a token exists in
    # another namespace); token_hash leads so authentication finds a token by its hash.
    sa.UniqueConstraint("token_hash", "namespace"),
    state_check("source", RESOURCE_SOURCES, "source"),
)

queues = sa.Table(
    "queues",
    metadata,
    id_column(),
    namespace_column(),
    sa.Column("name", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("paused", sa.Boolean(), nullable=False),
    # Lower runs first (as in River and Solid Queue): a worker serving several queues claims
    # from them in this order.
    sa.Column("priority", sa.Integer(), nullable=False),
    # Defaults snapshotted into each task at submission (seed §2: policy is frozen per task).
    sa.Column("max_attempts", sa.Integer(), nullable=False),
    sa.Column("backoff_initial_ms", sa.Integer(), nullable=False),
    sa.Column("backoff_max_ms", sa.Integer(), nullable=False),
    sa.Column("backoff_multiplier", sa.Double(), nullable=False),
    sa.Column("lease_seconds", sa.Integer(), nullable=False),
    sa.Column("attempt_timeout_seconds", sa.Integer(), nullable=True),
    sa.Column("safety_default", sa.String(8), nullable=False),
    sa.Column("concurrency_limit", sa.Integer(), nullable=True),
    sa.Column("deletion_policy", sa.String(8), nullable=False),
    # Set when deletion began under Drain/Cancel: submissions are refused, claims go on.
    sa.Column("draining_since", UtcDateTime, nullable=True),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("spec_generation", sa.Integer(), nullable=False),
    created_at_column(),
    updated_at_column(),
    sa.UniqueConstraint("namespace", "name"),
    state_check("safety_default", SAFETY_CLASSES, "safety_default"),
    state_check("deletion_policy", DELETION_POLICIES, "deletion_policy"),
    state_check("source", RESOURCE_SOURCES, "source"),
    sa.CheckConstraint("max_attempts >= 1", name="max_attempts_positive"),
    sa.CheckConstraint("lease_seconds >= 1", name="lease_seconds_positive"),
)

quotas = sa.Table(
    "quotas",
    metadata,
    id_column(),
    namespace_column(),
    sa.Column("name", sa.String(NAME_LENGTH), nullable=False),
    # '*' = the whole namespace; otherwise one queue's name.
    sa.Column("queue", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("max_waiting", sa.Integer(), nullable=True),
    sa.Column("max_running", sa.Integer(), nullable=True),
    sa.Column("submit_rate_per_second", sa.Double(), nullable=True),
    sa.Column("submit_burst", sa.Integer(), nullable=True),
    # Token bucket for the submit rate, refilled from database time on each submission.
    sa.Column("rate_tokens", sa.Double(), nullable=True),
    sa.Column("rate_refilled_at", UtcDateTime, nullable=True),
    # Counted tasks in scope (tasks.quota_counted) by state, kept by the transitions in the
    # same transactions, so a check is O(1); `orbit admin verify` compares them with a count.
    sa.Column("waiting", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("running", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("spec_generation", sa.Integer(), nullable=False),
    created_at_column(),
    updated_at_column(),
    sa.UniqueConstraint("namespace", "name"),
    sa.Index("ix_quotas_scope", "namespace", "queue"),
    state_check("source", RESOURCE_SOURCES, "source"),
)

execution_gates = sa.Table(
    "execution_gates",
    metadata,
    id_column(),
    namespace_column(),
    # What owns the gate, e.g. 'workflow_instance'.
    sa.Column("owner_kind", sa.String(32), nullable=False),
    sa.Column("owner_id", sa.String(64), nullable=False),
    sa.Column("allowed", sa.Boolean(), nullable=False),
    # Bumped on every allow/pause flip (orbit_store.pulse.limits.gates.set_gate, the one
    # writer); start and the placement of a task on a wait path read it under a shared lock
    # (inv. 12).
    sa.Column("control_version", sa.Integer(), nullable=False),
    created_at_column(),
    updated_at_column(),
    sa.UniqueConstraint("namespace", "owner_kind", "owner_id"),
)
