"""The scheduler loop: decides every due schedule instant, in every server replica at once.

A pass scans for schedules with an instant due (a plain read, oldest first, a page at a time until
none is left), then handles each schedule in its own transactions (``fire_next``: claim with SKIP
LOCKED, decide one instant or one run of missed instants, commit; repeat while more are due),
``workers`` schedules at a time on MySQL/MariaDB (each transaction waits mostly on the database).
A replica or thread that finds a schedule claimed by another moves on. One schedule that fails (a
stored time zone the tzdata no longer knows, a database error) is logged naming it, counted in
``orbit_engine_item_errors_total{loop="scheduler"}`` and never stops the pass.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import sqlalchemy as sa

from orbit.metrics import Metrics
from orbit_store.db import is_sqlite, run_transaction
from orbit_store.passes import ItemPass
from orbit_store.schedules.fire import fire_next
from orbit_store.schedules.model import FireStep, OccurrenceStatus
from orbit_store.schedules.queries import find_due

log = logging.getLogger("orbit.engines.scheduler")

LOOP = "scheduler"

#: Schedules read per scan (the oldest due first); a pass scans again while pages come back full.
SCAN_LIMIT = 500
#: Scans per pass at most, so a pass ends even if schedules keep coming due faster than it fires.
SCANS_PER_PASS = 20
#: Decisions per schedule per pass: enough for a catch-up, bounded so one schedule cannot hog it.
STEPS_PER_SCHEDULE = 50
#: Schedules handled at once per replica (SQLite, which serialises writers, uses one).
WORKERS = 4


@dataclass
class SchedulerReport:
    steps: list[FireStep] = field(default_factory=list)
    errors: int = 0


def scheduler_pass(
    engine: sa.Engine,
    metrics: Metrics | None = None,
    *,
    limit: int = SCAN_LIMIT,
    namespace: str | None = None,
    workers: int = WORKERS,
) -> SchedulerReport:
    """One pass over the due schedules (``namespace`` restricts it, for tests and operations).

    Candidates are shuffled, so replicas and threads rarely start on the same schedule.
    """
    report = SchedulerReport()
    items = ItemPass(engine, LOOP)
    lock = threading.Lock()
    threads = 1 if is_sqlite(engine) else workers
    fire = functools.partial(_fire_isolated, engine, metrics, report, items, lock)
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="orbit-scheduler") as pool:
        for _ in range(SCANS_PER_PASS):
            candidates = run_transaction(
                engine, functools.partial(find_due, limit=limit, namespace=namespace)
            )
            random.shuffle(candidates)
            list(pool.map(lambda candidate: fire(*candidate), candidates))
            if len(candidates) < limit:
                break
    report.errors = items.errors
    if metrics is not None:
        metrics.count_item_errors(LOOP, report.errors)
    return report


def _fire_isolated(
    engine: sa.Engine,
    metrics: Metrics | None,
    report: SchedulerReport,
    items: ItemPass,
    lock: threading.Lock,
    namespace: str,
    schedule_id: str,
) -> None:
    """Fire one schedule; whatever goes wrong with it is logged and counted, never raised."""
    steps: list[FireStep] = []  # what committed, even if a later decision failed
    items.call(
        functools.partial(_fire_schedule, engine, namespace, schedule_id, steps),
        namespace=namespace,
        item=f"schedule {schedule_id}",
    )
    for step in steps:
        _observe(metrics, step)
    with lock:
        report.steps.extend(steps)


def _fire_schedule(
    engine: sa.Engine, namespace: str, schedule_id: str, steps: list[FireStep]
) -> None:
    """Decide the schedule's due instants, one transaction each, appending each to ``steps``."""
    for _ in range(STEPS_PER_SCHEDULE):
        step = run_transaction(
            engine, functools.partial(fire_next, namespace=namespace, schedule_id=schedule_id)
        )
        if step is None:
            break
        steps.append(step)
        if not step.more_due:
            break


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
    metrics.schedule_fires.labels(step.namespace, outcome, step.reason.value).inc(step.instants)
    if step.status is OccurrenceStatus.FIRED:
        metrics.schedule_fire_lateness.labels(step.namespace).observe(
            max(step.lateness_seconds, 0.0)
        )
