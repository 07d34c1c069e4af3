"""The Weave inbox consumer loop: applies persisted Pulse outcomes to workflows (seed §6.3).

Each pass consumes due inbox rows — each in its own transaction, a failing one logged, counted
(``orbit_engine_item_errors_total{loop="weave-inbox"}``), backed off and retried later —
draining a backlog in batches before it sleeps. The backlog gauges are the gauge loop's
(orbit/metrics/workflows.py). Any number of server replicas may run it: consumption re-checks
everything under the instance lock, and a row consumed elsewhere is a no-op.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

from orbit.metrics.server import Metrics
from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES
from orbit_store.weave.service import INBOX_LOOP, PassReport, consume_pass

LOOP = INBOX_LOOP

BATCH = 200
MAX_BATCHES_PER_PASS = 20

#: Wakeups.notify: (namespace, queue, handler) of a task that became READY.
Notify = Callable[[str, str, str], None]

#: EngineLoop.wake of this process's timer loop.
Wake = Callable[[], None]


def inbox_pass(
    engine: sa.Engine,
    metrics: Metrics,
    notify: Notify,
    workers: int = 4,
    namespace: str | None = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    wake_timers: Wake | None = None,
) -> PassReport:
    """``notify(namespace, queue, handler)`` wakes a long-polling worker for each new READY
    step task, ``wake_timers`` the timer loop when a workflow's next timer comes sooner.
    ``namespace`` restricts the pass (tests and operations)."""
    total = PassReport()
    for _ in range(MAX_BATCHES_PER_PASS):
        report = consume_pass(
            engine,
            limit=BATCH,
            workers=workers,
            namespace=namespace,
            max_payload_bytes=max_payload_bytes,
        )
        observe(report, LOOP, metrics, notify, wake_timers)
        total.reports += report.reports
        total.errors += report.errors
        if report.due < BATCH:
            break
    return total


def observe(
    report: PassReport,
    loop: str,
    metrics: Metrics,
    notify: Notify,
    wake_timers: Wake | None = None,
) -> None:
    """Count what a Weave pass did, wake one long-polling worker per step task it created
    READY and, if given, the timer loop once when a workflow's next timer comes sooner (its
    wait may end before the loop's)."""
    for advanced in report.reports:
        metrics.workflows.record(advanced)
        for queue, handler in advanced.ready_tasks:
            notify(advanced.namespace, queue, handler)
    if wake_timers is not None and any(advanced.timer_sooner for advanced in report.reports):
        wake_timers()
    metrics.count_item_errors(loop, report.errors)
