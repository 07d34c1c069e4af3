"""Weave's Prometheus metrics (ORBIT.md §11). The gauges are set by the engine loops on each
pass from MySQL, not at scrape time: the inbox consumer sets the inbox gauges, the timer loop the
instance and signal gauges. Label values are bounded: namespaces and a few fixed states."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from orbit_store.weave.inbox import Backlog
from orbit_store.weave.model import AdvanceReport
from orbit_store.weave.queries import LiveCounts


class WorkflowMetrics:
    """Weave's metrics. The gauges are set by the engine loops on each pass (from MySQL), not
    at scrape time: the inbox consumer sets the inbox ones, the timer loop the others."""

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
        self.instances = Gauge(
            "orbit_workflow_instances",
            "Live workflow instances by state (RUNNING, PAUSED).",
            ["namespace", "state"],
            registry=registry,
        )
        self.inbox_backlog = Gauge(
            "orbit_workflow_inbox_backlog",
            "Task outcomes persisted for Weave and not yet consumed.",
            ["namespace"],
            registry=registry,
        )
        self.inbox_oldest_age = Gauge(
            "orbit_workflow_inbox_oldest_age_seconds",
            "Age of the oldest unconsumed task outcome (the orchestration lag).",
            ["namespace"],
            registry=registry,
        )
        self.signal_backlog = Gauge(
            "orbit_workflow_signal_backlog",
            "Accepted signals no wait has consumed yet.",
            ["namespace"],
            registry=registry,
        )
        self._shown: dict[str, set[tuple[str, ...]]] = {}

    def record(self, report: AdvanceReport) -> None:
        """Count what one Weave transaction did."""
        if report.step_changes:
            self.step_advances.labels(report.namespace).inc(report.step_changes)
        for outcome in report.poll_outcomes:
            self.poll_rounds.labels(report.namespace, outcome.value).inc()
        if report.finished is not None:
            self.finished.labels(report.namespace, report.finished.value).inc()

    def set_inbox(self, backlog: list[Backlog]) -> None:
        self._replace(self.inbox_backlog, {(b.namespace,): b.pending for b in backlog})
        self._replace(
            self.inbox_oldest_age, {(b.namespace,): b.oldest_age_seconds for b in backlog}
        )

    def set_live(self, counts: LiveCounts) -> None:
        self._replace(self.instances, {key: n for key, n in counts.instances.items()})
        self._replace(self.signal_backlog, {(ns,): n for ns, n in counts.pending_signals.items()})

    def _replace(self, gauge: Gauge, values: dict[tuple[str, ...], float]) -> None:
        """Set every series in ``values``; series shown before and absent now drop to 0."""
        shown = self._shown.setdefault(gauge._name, set())
        for labels in shown - set(values):
            gauge.labels(*labels).set(0)
        for labels, value in values.items():
            gauge.labels(*labels).set(value)
        shown |= set(values)
