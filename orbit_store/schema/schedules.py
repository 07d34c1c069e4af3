"""Schedules (seed §4 "计划", "触发"): cron definitions and their once-only occurrences."""

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

CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")
MISFIRE_POLICIES = ("Skip", "FireOnce", "CatchUp")
OCCURRENCE_OUTCOMES = ("FIRED", "SKIPPED_MISFIRE", "SKIPPED_FORBID", "FIRED_REPLACING")

schedules = sa.Table(
    "schedules",
    metadata,
    id_column(),
    namespace_column(),
    sa.Column("name", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("cron", sa.String(KEY_LENGTH), nullable=False),
    sa.Column("time_zone", sa.String(64), nullable=False),
    sa.Column("start_at", UtcDateTime, nullable=True),
    sa.Column("end_at", UtcDateTime, nullable=True),
    sa.Column("suspended", sa.Boolean(), nullable=False),
    sa.Column("concurrency_policy", sa.String(8), nullable=False),
    sa.Column("starting_deadline_seconds", sa.Integer(), nullable=True),
    sa.Column("misfire_policy", sa.String(16), nullable=False),
    sa.Column("catch_up_limit", sa.Integer(), nullable=False),
    sa.Column("task_template", Json, nullable=False),
    # Bumped by every edit; occurrences record the version that fired them.
    sa.Column("version", sa.Integer(), nullable=False),
    sa.Column("next_fire_at", UtcDateTime, nullable=True),
    sa.Column("last_fire_at", UtcDateTime, nullable=True),
    sa.Column("source", sa.String(16), nullable=False),
    created_at_column(),
    updated_at_column(),
    sa.UniqueConstraint("namespace", "name"),
    sa.Index("ix_schedules_due", "suspended", "next_fire_at"),
    state_check("concurrency_policy", CONCURRENCY_POLICIES, "concurrency_policy"),
    state_check("misfire_policy", MISFIRE_POLICIES, "misfire_policy"),
)

schedule_occurrences = sa.Table(
    "schedule_occurrences",
    metadata,
    id_column(),
    ref_column("schedule_id", sa.ForeignKey("schedules.id"), nullable=False),
    namespace_column(),
    # UNIQUE with schedule_id: two scheduler replicas can never fire the same instant (inv. 5).
    sa.Column("scheduled_at", UtcDateTime, nullable=False),
    sa.Column("fired_at", UtcDateTime, nullable=False),
    sa.Column("schedule_version", sa.Integer(), nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    ref_column("task_id", sa.ForeignKey("tasks.id"), nullable=True),
    sa.UniqueConstraint("schedule_id", "scheduled_at"),
    state_check("outcome", OCCURRENCE_OUTCOMES, "outcome"),
)
