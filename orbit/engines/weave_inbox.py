"""The Weave inbox consumer loop: applies persisted Pulse outcomes to workflows (seed §6.3).

Each pass consumes due inbox rows — each in its own transaction, a failing one backed off and
retried later — draining a backlog in batches before it sleeps, then sets the backlog and
oldest-age gauges from MySQL. Any number of server replicas may run it: consumption re-checks
everything under the instance lock, and a row consumed elsewhere is a no-op.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import sqlalchemy as sa

from orbit.metrics import Metrics
from orbit_store.db import run_transaction
from orbit_store.weave import inbox
from orbit_store.weave.model import AdvanceReport
from orbit_store.weave.service import PassReport, consume_pass

#: Wakeups.notify: (namespace, queue, handler) of a task that became READY.
Notify = Callable[[str, str, str], None]

BATCH = 200
MAX_BATCHES_PER_PASS = 20


def wake_for(reports: Iterable[AdvanceReport], notify: Notify) -> None:
    """Wake one long-polling worker per step task the advances created READY."""
    for report in reports:
        for queue, handler in report.ready_tasks:
            notify(report.namespace, queue, handler)


def inbox_pass(engine: sa.Engine, metrics: Metrics, notify: Notify, workers: int = 4) -> PassReport:
    """``notify(namespace, queue, handler)`` wakes a long-polling worker for each new READY
    step task."""
    total = PassReport()
    for _ in range(MAX_BATCHES_PER_PASS):
        report = consume_pass(engine, limit=BATCH, workers=workers)
        for advanced in report.reports:
            metrics.workflows.record(advanced)
        wake_for(report.reports, notify)
        total.reports += report.reports
        total.failures += report.failures
        if len(report.reports) + report.failures < BATCH:
            break
    if total.failures:
        metrics.engine_errors.labels("weave-inbox").inc(total.failures)
    metrics.workflows.set_inbox(run_transaction(engine, inbox.backlog))
    return total
