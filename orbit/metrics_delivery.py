"""Delivery gauges (ORBIT.md §11): computed by the webhook sender loop on each pass from MySQL
and published as the last snapshot, so a scrape never queries the database for them."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from orbit_store.delivery.model import BacklogRow

LABELS = ["namespace", "subscription"]


class DeliveryBacklogCollector(Collector):
    def __init__(self) -> None:
        self._rows: list[BacklogRow] = []
        self._lock = threading.Lock()

    def update(self, rows: list[BacklogRow]) -> None:
        with self._lock:
            self._rows = list(rows)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            rows = list(self._rows)
        backlog = GaugeMetricFamily(
            "orbit_delivery_backlog",
            "Deliveries PENDING per subscription (not yet acknowledged or answered 2xx).",
            labels=LABELS,
        )
        oldest = GaugeMetricFamily(
            "orbit_delivery_oldest_age_seconds",
            "Age of the oldest PENDING delivery per subscription (0 when none).",
            labels=LABELS,
        )
        parked = GaugeMetricFamily(
            "orbit_deliveries_parked",
            "Deliveries PARKED after max attempts: kept, need a redrive (alert on > 0).",
            labels=LABELS,
        )
        for row in rows:
            labels = [row.namespace, row.subscription]
            backlog.add_metric(labels, row.pending)
            oldest.add_metric(labels, row.oldest_pending_age_seconds)
            parked.add_metric(labels, row.parked)
        yield backlog
        yield oldest
        yield parked
