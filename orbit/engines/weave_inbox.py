"""The Weave inbox consumer loop: applies persisted Pulse outcomes to workflows (seed §6.3).

Each pass consumes due inbox rows — each in its own transaction, a failing one backed off and
retried later — draining a backlog in batches before it sleeps, then sets the backlog and
oldest-age gauges from MySQL. Any number of server replicas may run it: consumption re-checks
everything under the instance lock, and a row consumed elsewhere is a no-op.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

from orbit.metrics import Metrics
from orbit_store.db import run_transaction
from orbit_store.weave import inbox
from orbit_store.weave.service import PassReport, consume_pass

BATCH = 200
MAX_BATCHES_PER_PASS = 20


def inbox_pass(
    engine: sa.Engine, metrics: Metrics, notify: Callable[[str], None], workers: int = 4
) -> PassReport:
    """``notify(namespace)`` wakes the namespace's long-polling workers: new step tasks."""
    total = PassReport()
    for _ in range(MAX_BATCHES_PER_PASS):
        report = consume_pass(engine, limit=BATCH, workers=workers)
        for advanced in report.reports:
            metrics.workflows.record(advanced)
        for namespace in {r.namespace for r in report.reports if r.step_changes}:
            notify(namespace)
        total.reports += report.reports
        total.failures += report.failures
        if len(report.reports) + report.failures < BATCH:
            break
    if total.failures:
        metrics.engine_errors.labels("weave-inbox").inc(total.failures)
    metrics.workflows.set_inbox(run_transaction(engine, inbox.backlog))
    return total
