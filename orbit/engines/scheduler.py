"""The scheduler loop: decides every due schedule instant, in every server replica at once.

A pass scans for schedules with an instant due (a plain read), then handles each schedule in its
own transactions (``fire_next``: claim with SKIP LOCKED, decide one instant or one run of missed
instants, commit; repeat while more are due). A replica that finds a schedule claimed by another
moves on. One schedule that fails (a stored time zone the tzdata no longer knows, a database
error) is logged and counted and never stops the pass.
"""

from __future__ import annotations

import functools
import logging
import random
from dataclasses import dataclass, field

import sqlalchemy as sa

from orbit.metrics import Metrics
from orbit_store.db import run_transaction
from orbit_store.schedules.fire import fire_next
from orbit_store.schedules.model import FireStep, OccurrenceStatus
from orbit_store.schedules.queries import find_due

log = logging.getLogger("orbit.engines.scheduler")

#: Schedules looked at per pass (the oldest due first).
SCAN_LIMIT = 500
#: Decisions per schedule per pass: enough for a catch-up, bounded so one schedule cannot hog it.
STEPS_PER_SCHEDULE = 50


@dataclass
class SchedulerReport:
    steps: list[FireStep] = field(default_factory=list)
    errors: int = 0

    def count(self, status: OccurrenceStatus) -> int:
        return sum(
            s.instants if status is OccurrenceStatus.MISSED else 1
            for s in self.steps
            if s.status is status
        )


def scheduler_pass(
    engine: sa.Engine,
    metrics: Metrics | None = None,
    *,
    limit: int = SCAN_LIMIT,
    namespace: str | None = None,
    shuffle: bool = True,
) -> SchedulerReport:
    """One pass over the due schedules (``namespace`` restricts it, for tests and operations).

    ``shuffle`` spreads replicas over different schedules first, so they rarely meet on one.
    """
    report = SchedulerReport()
    candidates = run_transaction(
        engine, functools.partial(find_due, limit=limit, namespace=namespace)
    )
    if shuffle:
        random.shuffle(candidates)
    for schedule_namespace, schedule_id in candidates:
        try:
            _fire_schedule(engine, metrics, report, schedule_namespace, schedule_id)
        except Exception:
            report.errors += 1
            log.exception(
                "schedule not fired",
                extra={"namespace": schedule_namespace, "schedule_id": schedule_id},
            )
            if metrics is not None:
                metrics.engine_errors.labels("scheduler").inc()
    return report


def _fire_schedule(
    engine: sa.Engine,
    metrics: Metrics | None,
    report: SchedulerReport,
    namespace: str,
    schedule_id: str,
) -> None:
    for _ in range(STEPS_PER_SCHEDULE):
        step = run_transaction(
            engine, functools.partial(fire_next, namespace=namespace, schedule_id=schedule_id)
        )
        if step is None:
            return
        report.steps.append(step)
        _observe(metrics, step)
        if not step.more_due:
            return


def _observe(metrics: Metrics | None, step: FireStep) -> None:
    outcome = step.status.value.lower()
    level = logging.INFO if step.status is OccurrenceStatus.FIRED else logging.WARNING
    log.log(
        level,
        "schedule occurrence %s",
        outcome,
        extra={
            "namespace": step.namespace,
            "schedule": step.name,
            "scheduled_at": step.scheduled_at.isoformat() + "Z",
            "instants": step.instants,
            "reason": step.reason.value,
            "task_id": step.task_id,
            "lateness_seconds": round(step.lateness_seconds, 3),
        },
    )
    if metrics is None:
        return
    metrics.schedule_fires.labels(step.namespace, outcome).inc(step.instants)
    if step.status is OccurrenceStatus.FIRED:
        metrics.schedule_fire_lateness.labels(step.namespace).observe(
            max(step.lateness_seconds, 0.0)
        )
