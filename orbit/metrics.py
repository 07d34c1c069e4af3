"""Prometheus metrics for the server and its engines (ORBIT.md §11).

Each app gets its own registry. Queue depth, oldest waiting age and NEEDS_REVIEW counts are read
from MySQL at scrape time, so every replica reports the same authoritative numbers.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator

import sqlalchemy as sa
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from orbit_store.clock import db_now
from orbit_store.db import TRANSACTION_RETRIES
from orbit_store.pulse.routing import unrunnable_counts
from orbit_store.schema import tasks

log = logging.getLogger("orbit.metrics")

DEPTH_STATES = ("WAITING", "LEASED", "RUNNING", "NEEDS_REVIEW")


class Metrics:
    def __init__(self, engine: sa.Engine) -> None:
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
        self.lease_expiries = Counter(
            "orbit_lease_expiries_total",
            "Leases that lapsed and were handled by the reaper.",
            registry=self.registry,
        )
        self.engine_errors = Counter(
            "orbit_engine_errors_total",
            "Errors in engine loops (they keep running).",
            ["loop"],
            registry=self.registry,
        )
        self.engine_item_errors = Counter(
            "orbit_engine_item_errors_total",
            "Items (a lease, a task, a session) an engine pass failed on and skipped; each is "
            "logged naming it. The pass and the loop go on.",
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
        self.registry.register(QueueDepthCollector(engine))
        self.registry.register(TransactionRetriesCollector())


class QueueDepthCollector(Collector):
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily(
            "orbit_queue_tasks",
            "Tasks per queue and live state (from MySQL).",
            labels=["namespace", "queue", "state"],
        )
        oldest = GaugeMetricFamily(
            "orbit_queue_oldest_waiting_seconds",
            "Age of the oldest due WAITING task.",
            labels=["namespace", "queue"],
        )
        unrunnable = GaugeMetricFamily(
            "orbit_tasks_unrunnable",
            "WAITING tasks that no live worker session can run (their queue is not served or "
            "nobody runs their handler): they will not start until such a worker comes.",
            labels=["namespace", "queue"],
        )
        try:
            with self.engine.connect() as conn:
                now = db_now(conn)
                rows = conn.execute(
                    sa.select(
                        tasks.c.namespace,
                        tasks.c.queue,
                        tasks.c.state,
                        sa.func.count(),
                        sa.func.min(tasks.c.available_at),
                    )
                    .where(tasks.c.state.in_(DEPTH_STATES))
                    .group_by(tasks.c.namespace, tasks.c.queue, tasks.c.state)
                ).all()
                for namespace, queue, count in unrunnable_counts(conn):
                    unrunnable.add_metric([namespace, queue], count)
        except sa.exc.SQLAlchemyError:
            log.warning("queue depth unavailable: database error", exc_info=True)
            return
        for namespace, queue, state, count, first_due in rows:
            depth.add_metric([namespace, queue, state], count)
            if state == "WAITING" and first_due is not None:
                age = max((now - _naive(first_due)).total_seconds(), 0.0)
                oldest.add_metric([namespace, queue], age)
        yield depth
        yield oldest
        yield unrunnable


class TransactionRetriesCollector(Collector):
    """Whole-transaction retries of this process (orbit_store.db.TRANSACTION_RETRIES)."""

    def collect(self) -> Iterator[Metric]:
        retries = CounterMetricFamily(
            "orbit_db_transaction_retries",
            "Store transactions run again after a deadlock, lock-wait timeout, busy database "
            "or a connection lost before COMMIT; deadlocks should stay at zero.",
            labels=["reason"],
        )
        for reason, count in sorted(TRANSACTION_RETRIES.snapshot().items()):
            retries.add_metric([reason], count)
        yield retries


def _naive(value: dt.datetime | str) -> dt.datetime:
    return dt.datetime.fromisoformat(value) if isinstance(value, str) else value
