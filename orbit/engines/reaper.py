"""The lease reaper loop: expires sessions, lapses leases, fails overdue tasks (Pulse rules)."""

from __future__ import annotations

import sqlalchemy as sa

from orbit.metrics import Metrics
from orbit_store.pulse.model import OUTCOME_TASK_STATES
from orbit_store.pulse.service import ReapReport, reap


def reaper_pass(engine: sa.Engine, metrics: Metrics) -> ReapReport:
    report = reap(engine)
    if report.errors:
        metrics.engine_item_errors.labels("reaper").inc(report.errors)
    if report.leases_lapsed:
        metrics.lease_expiries.inc(report.leases_lapsed)
    for decision in report.decisions:
        if decision.state in OUTCOME_TASK_STATES:
            metrics.outcomes.labels(decision.namespace, decision.queue, decision.state).inc()
    return report
