"""Schedules (seed §4 "计划", "触发"): cron definitions and their once-only occurrences.

A schedule's progress is ``next_fire_at``: every instant before it has been decided (fired,
skipped or missed), exactly once, by a transaction that also wrote its occurrence row
(invariant 5). NULL means nothing is pending: the schedule is suspended, or its end bound
(or the last instant its cron expression ever matches) has passed.
"""

from __future__ import annotations

import sqlalchemy as sa

from .access import RESOURCE_SOURCES
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
OCCURRENCE_STATUSES = ("FIRED", "SKIPPED", "MISSED")

schedules = sa.Table(
    "schedules",
    metadata,
    id_column(),
    namespace_column(),
    sa.Column("name", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("cron", sa.String(KEY_LENGTH), nullable=False),
    # IANA time zone the cron expression is read in (wall-clock time, DST rules included).
    sa.Column("time_zone", sa.String(64), nullable=False),
    sa.Column("start_at", UtcDateTime, nullable=True),
    sa.Column("end_at", UtcDateTime, nullable=True),
    sa.Column("suspended", sa.Boolean(), nullable=False),
    sa.Column("concurrency_policy", sa.String(8), nullable=False),
    sa.Column("starting_deadline_seconds", sa.Integer(), nullable=True),
    sa.Column("misfire_policy", sa.String(16), nullable=False),
    sa.Column("catch_up_limit", sa.Integer(), nullable=False),
    # queue, handler, params and the task options every fire submits with.
    sa.Column("task_template", Json, nullable=False),
    # Bumped by every edit; occurrences record the version that decided them.
    sa.Column("version", sa.Integer(), nullable=False),
    # The next instant to decide (UTC); NULL while suspended or after the end.
    sa.Column("next_fire_at", UtcDateTime, nullable=True),
    # The scheduled instant of the latest FIRED occurrence.
    sa.Column("last_fire_at", UtcDateTime, nullable=True),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("spec_generation", sa.Integer(), nullable=False),
    created_at_column(),
    updated_at_column(),
    sa.UniqueConstraint("namespace", "name"),
    # The scheduler's scan: due = next_fire_at <= now (suspended rows hold NULL).
    sa.Index("ix_schedules_due", "next_fire_at"),
    state_check("concurrency_policy", CONCURRENCY_POLICIES, "concurrency_policy"),
    state_check("misfire_policy", MISFIRE_POLICIES, "misfire_policy"),
    state_check("source", RESOURCE_SOURCES, "source"),
    sa.CheckConstraint("catch_up_limit >= 1", name="catch_up_limit_positive"),
    sa.CheckConstraint(
        "starting_deadline_seconds IS NULL OR starting_deadline_seconds >= 1",
        name="starting_deadline_positive",
    ),
    sa.CheckConstraint("suspended = 0 OR next_fire_at IS NULL", name="suspended_never_due"),
)

schedule_occurrences = sa.Table(
    "schedule_occurrences",
    metadata,
    id_column(),
    # No foreign key to schedules: occurrences are history and outlive a deleted schedule.
    ref_column("schedule_id", nullable=False),
    namespace_column(),
    # UNIQUE with schedule_id: an instant is decided once, whatever the replicas (inv. 5, 6).
    sa.Column("scheduled_at", UtcDateTime, nullable=False),
    # A MISSED row may stand for a run of consecutive instants: scheduled_at .. through_at.
    sa.Column("through_at", UtcDateTime, nullable=False),
    sa.Column("instants", sa.Integer(), nullable=False),
    # Database time of the decision; for FIRED rows, lateness = recorded_at - scheduled_at.
    sa.Column("recorded_at", UtcDateTime, nullable=False),
    sa.Column("schedule_version", sa.Integer(), nullable=False),
    sa.Column("status", sa.String(8), nullable=False),
    # A CamelCase reason (docs/concepts/schedules.md) and a sentence saying what happened.
    sa.Column("reason", sa.String(32), nullable=False),
    sa.Column("message", sa.String(1024), nullable=False),
    ref_column("task_id", sa.ForeignKey("tasks.id"), nullable=True),
    sa.UniqueConstraint("schedule_id", "scheduled_at"),
    state_check("status", OCCURRENCE_STATUSES, "status"),
    sa.CheckConstraint("(status = 'FIRED') = (task_id IS NOT NULL)", name="fired_iff_task"),
    sa.CheckConstraint(
        "instants >= 1 AND through_at >= scheduled_at AND "
        "(instants = 1) = (through_at = scheduled_at)",
        name="run_bounds",
    ),
    sa.CheckConstraint("status = 'MISSED' OR instants = 1", name="only_misses_span_runs"),
)
