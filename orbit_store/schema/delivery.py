"""Result delivery (seed §4 "结果交付", §6.2): result events, subscriptions, deliveries."""

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
DELIVERY_STATES = ("PENDING", "ACKED", "DEAD")

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
    sa.Column("filter", Json, nullable=False),
    sa.Column("url", sa.String(2048), nullable=True),
    # Push signatures need the secret itself, so only a reference (e.g. a Secret name) is kept.
    sa.Column("secret_ref", sa.String(KEY_LENGTH), nullable=True),
    sa.Column("paused", sa.Boolean(), nullable=False),
    created_at_column(),
    updated_at_column(),
    sa.UniqueConstraint("namespace", "name"),
    state_check("mode", SUBSCRIPTION_MODES, "mode"),
)

event_deliveries = sa.Table(
    "event_deliveries",
    metadata,
    id_column(),
    ref_column("event_id", sa.ForeignKey("result_events.id"), nullable=False),
    ref_column("subscription_id", sa.ForeignKey("subscriptions.id"), nullable=False),
    namespace_column(),
    sa.Column("state", sa.String(8), nullable=False),
    sa.Column("attempts", sa.Integer(), nullable=False),
    sa.Column("next_attempt_at", UtcDateTime, nullable=False),
    sa.Column("last_error", sa.String(1024), nullable=True),
    created_at_column(),
    sa.Column("acked_at", UtcDateTime, nullable=True),
    # One delivery per event and subscription (inv. 6); receivers dedupe by event id.
    sa.UniqueConstraint("event_id", "subscription_id"),
    sa.Index("ix_event_deliveries_backlog", "subscription_id", "state", "next_attempt_at"),
    state_check("state", DELIVERY_STATES, "state"),
    sa.CheckConstraint("(state = 'ACKED') = (acked_at IS NOT NULL)", name="acked_iff_acked_at"),
)
