"""The scheduler loop: decides every due schedule instant, in every server replica at once.

A pass scans for schedules with an instant due (a plain read, oldest first, a page at a time until
none is left), groups them by namespace into batches, and decides each batch in one transaction
(``fire_batch``: claim the rows with SKIP LOCKED, decide one instant or run of missed instants per
schedule, write the occurrences and their tasks set-based, move the schedules; repeat for those
with more due), ``workers`` batches at a time on MySQL/MariaDB. A replica or thread that finds a
schedule claimed by another moves on. One schedule that fails (a stored time zone the tzdata no
longer knows) is left out of its batch, logged naming it and counted in
``orbit_engine_item_errors_total{loop="scheduler"}``; a batch whose transaction fails as a whole
is decided again one schedule at a time (``fire_next``), so one bad item never stops the others.
A pass that has caught up reports how far off the next instant is (``next_due_in``): the loop
wakes for that instant rather than polling past it.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import sqlalchemy as sa

from orbit.metrics.server import Metrics
from orbit_store.db import is_sqlite, run_transaction
from orbit_store.passes import ItemPass
from orbit_store.schedules.fire import fire_next
from orbit_store.schedules.fire_batch import BATCH, fire_batch
from orbit_store.schedules.model import FireStep, OccurrenceStatus
from orbit_store.schedules.queries import find_due, seconds_to_next_instant

log = logging.getLogger("orbit.engines.scheduler")

LOOP = "scheduler"

#: Schedules read per scan (the oldest due first); a pass scans again while pages come back full.
SCAN_LIMIT = 5000
#: Scans per pass at most, so a pass ends even if schedules keep coming due faster than it fires.
SCANS_PER_PASS = 20
#: Decisions per schedule per pass: enough for a catch-up, bounded so one schedule cannot hog it.
STEPS_PER_SCHEDULE = 50
#: Batches decided at once per replica (SQLite, which serialises writers, uses one).
WORKERS = 4


@dataclass
class SchedulerReport:
    steps: list[FireStep] = field(default_factory=list)
    errors: int = 0
    #: Seconds until the earliest instant still ahead, once the pass caught up (else None).
    next_due_in: float | None = None


@dataclass
class _Pass:
    engine: sa.Engine
    metrics: Metrics | None
    report: SchedulerReport
    items: ItemPass
    lock: threading.Lock = field(default_factory=threading.Lock)

    def done(self, steps: list[FireStep]) -> None:
        for step in steps:
            _observe(self.metrics, step)
        with self.lock:
            self.report.steps.extend(steps)


def scheduler_pass(
    engine: sa.Engine,
    metrics: Metrics | None = None,
    *,
    limit: int = SCAN_LIMIT,
    namespace: str | None = None,
    workers: int = WORKERS,
    batch: int = BATCH,
) -> SchedulerReport:
    """One pass over the due schedules (``namespace`` restricts it, for tests and operations).

    Batches are shuffled, so replicas and threads rarely start on the same schedules.
    """
    state = _Pass(engine, metrics, SchedulerReport(), ItemPass(engine, LOOP))
    threads = 1 if is_sqlite(engine) else workers
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="orbit-scheduler") as pool:
        for _ in range(SCANS_PER_PASS):
            scan = run_transaction(
                engine, functools.partial(find_due, limit=limit, namespace=namespace)
            )
            batches = _batches(scan.candidates, batch)
            random.shuffle(batches)
            list(pool.map(lambda group: _fire_batches(state, *group), batches))
            if len(scan.candidates) < limit:
                state.report.next_due_in = run_transaction(
                    engine,
                    functools.partial(seconds_to_next_instant, after=scan.at, namespace=namespace),
                )
                break
    state.report.errors = state.items.errors
    if metrics is not None:
        metrics.count_item_errors(LOOP, state.report.errors)
    return state.report


def _batches(candidates: list[tuple[str, str]], size: int) -> list[tuple[str, list[str]]]:
    """(namespace, schedule ids) groups of at most ``size``: one namespace per transaction."""
    by_namespace: dict[str, list[str]] = defaultdict(list)
    for namespace, schedule_id in candidates:
        by_namespace[namespace].append(schedule_id)
    return [
        (namespace, ids[start : start + size])
        for namespace, ids in by_namespace.items()
        for start in range(0, len(ids), size)
    ]


def _fire_batches(state: _Pass, namespace: str, schedule_ids: list[str]) -> None:
    """Decide the batch's due instants, one transaction per round, until none is due (at most
    ``STEPS_PER_SCHEDULE`` rounds); never raises."""
    pending = schedule_ids
    for _ in range(STEPS_PER_SCHEDULE):
        work = functools.partial(fire_batch, namespace=namespace, schedule_ids=pending)
        try:
            outcome = run_transaction(state.engine, work)
        except Exception:
            log.warning(
                "scheduler: a batch of %d schedules in namespace %s failed as a whole; "
                "deciding them one at a time",
                len(pending),
                namespace,
                exc_info=True,
                extra={"loop": LOOP, "namespace": namespace},
            )
            for schedule_id in pending:
                _fire_alone(state, namespace, schedule_id)
            return
        for schedule_id, exc in outcome.failed:
            state.items.failed(exc, namespace=namespace, item=f"schedule {schedule_id}")
        state.done(outcome.steps)
        pending = [step.schedule_id for step in outcome.steps if step.more_due]
        if not pending:
            return


def _fire_alone(state: _Pass, namespace: str, schedule_id: str) -> None:
    """Fire one schedule on the single path; whatever goes wrong is logged and counted."""
    steps: list[FireStep] = []  # what committed, even if a later decision failed
    state.items.call(
        functools.partial(_fire_schedule, state.engine, namespace, schedule_id, steps),
        namespace=namespace,
        item=f"schedule {schedule_id}",
    )
    state.done(steps)


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
