"""Result delivery (seed §4 "结果交付", §6.2): result events, subscriptions, deliveries.

A delivery row is the durable position of one event for one subscription (UNIQUE event +
subscription, inv. 6): there is no "largest id seen" cursor, so an event whose transaction commits
late can never be skipped.
"""

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
    ref_column,
    state_check,
    updated_at_column,
)

SUBSCRIPTION_MODES = ("pull", "push")
DELIVERY_STATES = ("PENDING", "DELIVERED", "PARKED")

result_events = sa.Table(
    "result_events",
    metadata,
    id_column(),
    namespace_column(),
    ref_column("task_id", sa.ForeignKey("tasks.id"), nullable=False),
    # The task's state_version of the transition that produced it: one event per transition.
    sa.Column("state_version", sa.Integer(), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("task_state", sa.String(16), nullable=False),
    sa.Column("queue", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("handler", sa.String(KEY_LENGTH), nullable=False),
    sa.Column("payload", Json, nullable=False),
    created_at_column(),
    sa.UniqueConstraint("task_id", "state_version"),
    sa.Index("ix_result_events_by_namespace", "namespace", "id"),
)

subscriptions = sa.Table(
    "subscriptions",
    metadata,
    id_column(),
    namespace_column(),
    sa.Column("name", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("mode", sa.String(8), nullable=False),
    # {"queues": [...], "handlers": [glob, ...], "outcomes": [...]}; an empty list matches all.
    sa.Column("filter", Json, nullable=False),
    sa.Column("url", sa.String(2048), nullable=True),
    # Push signatures need the secret itself, so only a reference is kept: the name of a file in
    # the server's webhook-secrets directory (a mounted Kubernetes Secret), never the secret.
    sa.Column("secret_ref", sa.String(KEY_LENGTH), nullable=True),
    # After this many deliveries without success/ack a delivery is PARKED (never dropped).
    sa.Column("max_attempts", sa.Integer(), nullable=False),
    sa.Column("backoff_initial_ms", sa.Integer(), nullable=False),
    sa.Column("backoff_max_ms", sa.Integer(), nullable=False),
    sa.Column("timeout_ms", sa.Integer(), nullable=False),
    # Bumped on every change; the audit trail records it as the resource version.
    sa.Column("version", sa.Integer(), nullable=False),
    created_at_column(),
    updated_at_column(),
    sa.UniqueConstraint("namespace", "name"),
    state_check("mode", SUBSCRIPTION_MODES, "mode"),
    sa.CheckConstraint(
        "(mode = 'push') = (url IS NOT NULL AND secret_ref IS NOT NULL)", name="push_has_target"
    ),
    sa.CheckConstraint("max_attempts >= 1", name="max_attempts_positive"),
)

event_deliveries = sa.Table(
    "event_deliveries",
    metadata,
    id_column(),
    ref_column("event_id", sa.ForeignKey("result_events.id"), nullable=False),
    ref_column("subscription_id", sa.ForeignKey("subscriptions.id"), nullable=False),
    namespace_column(),
    sa.Column("state", sa.String(12), nullable=False),
    # Bumped by every change (lease, outcome, redrive): a sender's report is applied only at the
    # version its lease created, so a lapsed sender can never overwrite a newer attempt.
    sa.Column("state_version", sa.Integer(), nullable=False),
    # Times handed out (pull) or sent (push).
    sa.Column("attempts", sa.Integer(), nullable=False),
    # PENDING: due at this instant (next try, or the end of the current ack deadline / lease).
    sa.Column("next_attempt_at", UtcDateTime, nullable=False),
    sa.Column("last_attempt_at", UtcDateTime, nullable=True),
    sa.Column("last_error", sa.String(1024), nullable=True),
    created_at_column(),
    sa.Column("delivered_at", UtcDateTime, nullable=True),
    sa.Column("parked_at", UtcDateTime, nullable=True),
    # One delivery per event and subscription (inv. 6); receivers dedupe by event id.
    sa.UniqueConstraint("event_id", "subscription_id"),
    sa.Index("ix_event_deliveries_due", "subscription_id", "state", "next_attempt_at"),
    state_check("state", DELIVERY_STATES, "state"),
    sa.CheckConstraint(
        "(state = 'DELIVERED') = (delivered_at IS NOT NULL)", name="delivered_iff_delivered_at"
    ),
    sa.CheckConstraint("(state = 'PARKED') = (parked_at IS NOT NULL)", name="parked_iff_parked_at"),
)
