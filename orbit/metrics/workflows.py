"""Weave's Prometheus metrics (ORBIT.md §11). Counters are counted by whoever advanced a
workflow (the API, the inbox consumer, the timer loop); the gauges are read from MySQL by the
gauge loop (orbit/metrics/gauges.py) every ``--gauge-interval`` and served from its cache. Label
values are bounded: namespaces and a few fixed states."""

from __future__ import annotations

import sqlalchemy as sa
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import Metric

from orbit.metrics.gauges import gauge
from orbit_store.weave.inbox import backlog as inbox_backlog
from orbit_store.weave.model import AdvanceReport
from orbit_store.weave.queries import live_counts

LIVE_STATES = ("RUNNING", "PAUSED")


class WorkflowMetrics:
    """Weave's counters."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.step_advances = Counter(
            "orbit_workflow_step_advances_total",
            "Workflow step state changes (activations, results, skips, cancellations).",
            ["namespace"],
            registry=registry,
        )
        self.poll_rounds = Counter(
            "orbit_workflow_poll_rounds_total",
            "Poll rounds by what they ended in (matched, not_matched, failed, exhausted).",
            ["namespace", "outcome"],
            registry=registry,
        )
        self.finished = Counter(
            "orbit_workflows_finished_total",
            "Workflow instances that ended, by final state.",
            ["namespace", "state"],
            registry=registry,
        )

        self.orchestration_lag = Histogram(
            "orbit_workflow_orchestration_lag_seconds",
            "From a task outcome (or a signal, a resume) persisted for a workflow to the inbox "
            "consumer applying it.",
            ["namespace"],
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=registry,
        )

    def record(self, report: AdvanceReport) -> None:
        """Count what one Weave transaction did."""
        if report.orchestration_lag_seconds is not None:
            self.orchestration_lag.labels(report.namespace).observe(
                report.orchestration_lag_seconds
            )
        if report.step_changes:
            self.step_advances.labels(report.namespace).inc(report.step_changes)
        for outcome in report.poll_outcomes:
            self.poll_rounds.labels(report.namespace, outcome.value).inc()
        if report.finished is not None:
            self.finished.labels(report.namespace, report.finished.value).inc()


def workflow_gauges(conn: sa.Connection) -> list[Metric]:
    """Per namespace with live workflows or something waiting for them (0 where nothing is):
    live instances by state, the inbox backlog and its oldest age, the signal backlog."""
    live = live_counts(conn)
    inbox = {b.namespace: b for b in inbox_backlog(conn)}
    with_instances = {ns for ns, _state in live.instances}
    namespaces = sorted(with_instances | inbox.keys() | live.pending_signals.keys())
    return [
        gauge(
            "orbit_workflow_instances",
            "Live workflow instances by state (RUNNING, PAUSED), from MySQL.",
            ["namespace", "state"],
            (
                ([ns, state], live.instances.get((ns, state), 0))
                for ns in namespaces
                for state in LIVE_STATES
            ),
        ),
        gauge(
            "orbit_workflow_inbox_backlog",
            "Task outcomes persisted for Weave and not yet consumed, from MySQL.",
            ["namespace"],
            (([ns], inbox[ns].pending if ns in inbox else 0) for ns in namespaces),
        ),
        gauge(
            "orbit_workflow_inbox_oldest_age_seconds",
            "Age of the oldest unconsumed task outcome (the orchestration lag; 0 when none).",
            ["namespace"],
            (([ns], inbox[ns].oldest_age_seconds if ns in inbox else 0.0) for ns in namespaces),
        ),
        gauge(
            "orbit_workflow_timers_backing_off",
            "Running workflows whose timers failed to fire (e.g. a quota refused the next "
            "step's task) and wait for their retry, from MySQL.",
            ["namespace"],
            (([ns], live.timers_backing_off.get(ns, 0)) for ns in namespaces),
        ),
        gauge(
            "orbit_workflow_signal_backlog",
            "Accepted signals no wait has consumed yet, from MySQL.",
            ["namespace"],
            (([ns], live.pending_signals.get(ns, 0)) for ns in namespaces),
        ),
    ]
