"""Prometheus metrics for the server and its engines (ORBIT.md §11).

Each app gets its own registry; with several server processes per pod, /metrics sums the
counters and histograms of all the pod's processes (orbit/metrics/processes.py). Every gauge
derived from MySQL (queue depth by state and NEEDS_REVIEW, oldest waiting age, worker sessions,
delivery and workflow backlogs) is computed by each replica's gauge loop and served from its
cache (orbit/metrics/gauges.py), so a scrape never queries the database; every replica reports
the same numbers. Counters and histograms count what this replica did. The catalogue of every
metric is docs/operations/monitoring.md.
"""

from __future__ import annotations

from collections.abc import Iterator

import sqlalchemy as sa
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from orbit.metrics.delivery import delivery_gauges
from orbit.metrics.fencing import fence_gauges
from orbit.metrics.gauges import LOOP as GAUGES_LOOP
from orbit.metrics.gauges import GaugeCache, backlog_gauges
from orbit.metrics.processes import multiprocess
from orbit.metrics.workflows import WorkflowMetrics, workflow_gauges
from orbit_store.db import TRANSACTION_RETRIES, RetryCounter
from orbit_store.pulse.batches import SET_PATH_FALLBACKS

RETRIES_HELP = (
    "Store transactions run again after a deadlock, lock-wait timeout, busy database "
    "or a connection lost before COMMIT; deadlocks should stay at zero."
)
FALLBACKS_HELP = (
    "Batched starts or completions whose set path found rows changed since it read them and "
    "went item by item instead (correct, slower); should stay near zero."
)

DEFAULT_GAUGE_INTERVAL = 15.0


class Metrics:
    def __init__(self, engine: sa.Engine, gauge_interval: float = DEFAULT_GAUGE_INTERVAL) -> None:
        self.registry = CollectorRegistry()
        self.submissions = Counter(
            "orbit_tasks_submitted_total",
            "Task submissions accepted (new or replayed).",
            ["namespace", "queue", "result"],
            registry=self.registry,
        )
        self.outcomes = Counter(
            "orbit_task_outcomes_total",
            "Task transitions into an outcome state.",
            ["namespace", "queue", "state"],
            registry=self.registry,
        )
        self.dispatch_latency = Histogram(
            "orbit_dispatch_latency_seconds",
            "From a task becoming due to its lease.",
            ["namespace", "queue"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
        )
        self.batch_items = Histogram(
            "orbit_batch_items",
            "Items per batched call (worker protocol 2 starts and completions, reports riding "
            "a lease request, bulk submissions, one-by-one submissions sharing a transaction, "
            "grants per lease answer: 0 for a long poll that ended with none).",
            ["call"],
            registry=self.registry,
            buckets=(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000),
        )
        self.lease_expiries = Counter(
            "orbit_lease_expiries_total",
            "Leases that lapsed and were handled by the reaper.",
            registry=self.registry,
        )
        self.lease_outage_graces = Counter(
            "orbit_lease_outage_graces_total",
            "Run-out leases the reaper extended instead of lapsing, because no server replica "
            "was serving when they ran out (or service had only just resumed).",
            registry=self.registry,
        )
        self.engine_errors = Counter(
            "orbit_engine_errors_total",
            "Engine loop passes that failed as a whole (the loop keeps running).",
            ["loop"],
            registry=self.registry,
        )
        self.engine_item_errors = Counter(
            "orbit_engine_item_errors_total",
            "Items (a lease, a schedule, a delivery, an inbox row …) an engine pass failed on "
            "and skipped; each is logged naming it. The pass and the loop go on.",
            ["loop"],
            registry=self.registry,
        )
        self.handed_back = Counter(
            "orbit_leases_handed_back_total",
            "Grants returned at once because the lease request's client had disconnected "
            "(the attempt is not spent).",
            ["namespace"],
            registry=self.registry,
        )
        self.schedule_fires = Counter(
            "orbit_schedule_fires_total",
            "Schedule instants decided, by outcome: fired (a task was created), skipped "
            "(concurrency policy, queue or quota refused), missed (misfire or starting deadline); "
            "reason is the occurrence's reason (Scheduled, ConcurrencyForbid, QuotaExceeded, …).",
            ["namespace", "outcome", "reason"],
            registry=self.registry,
        )
        self.schedule_fire_lateness = Histogram(
            "orbit_schedule_fire_lateness_seconds",
            "From a schedule instant to the commit that fired it.",
            ["namespace"],
            registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600),
        )
        self.reviews = Counter(
            "orbit_task_reviews_total",
            "NEEDS_REVIEW tasks settled by a review, by decision (succeeded, failed).",
            ["namespace", "queue", "decision"],
            registry=self.registry,
        )
        self.delivery_attempts = Counter(
            "orbit_delivery_attempts_total",
            "Result deliveries handed out or sent, by result (pulled, delivered, failed, "
            "parked, stale).",
            ["namespace", "subscription", "result"],
            registry=self.registry,
        )
        self.workflows = WorkflowMetrics(self.registry)
        self.gauges = GaugeCache(
            engine, gauge_interval, [backlog_gauges, delivery_gauges, workflow_gauges, fence_gauges]
        )
        self.registry.register(self.gauges)
        self.registry.register(TransactionRetriesCollector())
        self.registry.register(
            ProcessCounterCollector(
                "orbit_attempt_batch_fallbacks", FALLBACKS_HELP, "call", SET_PATH_FALLBACKS
            )
        )
        #: What /metrics serves: this registry, or the pod's processes summed.
        self.exposition = self._pod_registry() if multiprocess() else self.registry

    def _pod_registry(self) -> CollectorRegistry:
        """Counters and histograms of every process of the pod (their files), this process's
        gauge snapshot, and the retries counted into the files too."""
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        registry.register(self.gauges)
        retries = Counter("orbit_db_transaction_retries", RETRIES_HELP, ["reason"], registry=None)
        TRANSACTION_RETRIES.listen(lambda reason: retries.labels(reason).inc())
        fallbacks = Counter(
            "orbit_attempt_batch_fallbacks", FALLBACKS_HELP, ["call"], registry=None
        )
        SET_PATH_FALLBACKS.listen(lambda call: fallbacks.labels(call).inc())
        return registry

    def count_item_errors(self, loop: str, errors: int) -> None:
        """Items a pass of ``loop`` failed on (each already logged by the pass)."""
        if errors:
            self.engine_item_errors.labels(loop).inc(errors)

    def refresh_gauges(self) -> int:
        """The gauge loop's pass."""
        errors = self.gauges.refresh()
        self.count_item_errors(GAUGES_LOOP, errors)
        return errors


class TransactionRetriesCollector(Collector):
    """Whole-transaction retries of this process (orbit_store.db.TRANSACTION_RETRIES)."""

    def collect(self) -> Iterator[Metric]:
        retries = CounterMetricFamily(
            "orbit_db_transaction_retries", RETRIES_HELP, labels=["reason"]
        )
        for reason, count in sorted(TRANSACTION_RETRIES.snapshot().items()):
            retries.add_metric([reason], count)
        yield retries


class ProcessCounterCollector(Collector):
    """A counter this process keeps in the store (an ``orbit_store.db.RetryCounter``)."""

    def __init__(self, name: str, documentation: str, label: str, counter: RetryCounter) -> None:
        self.name, self.documentation, self.label, self.counter = (
            name,
            documentation,
            label,
            counter,
        )

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=[self.label])
        for value, count in sorted(self.counter.snapshot().items()):
            family.add_metric([value], count)
        yield family
