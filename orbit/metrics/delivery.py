"""Delivery gauges (ORBIT.md §11), read from MySQL by the gauge loop (orbit/metrics/gauges.py)
every ``--gauge-interval`` and served from its cache: one series per subscription, 0 when it
has nothing pending or parked."""

from __future__ import annotations

import sqlalchemy as sa
from prometheus_client.core import Metric

from orbit.metrics.gauges import gauge
from orbit_store.delivery.backlog import delivery_backlog

LABELS = ["namespace", "subscription"]


def delivery_gauges(conn: sa.Connection) -> list[Metric]:
    rows = delivery_backlog(conn)
    return [
        gauge(
            "orbit_delivery_backlog",
            "Deliveries PENDING per subscription (not yet acknowledged or answered 2xx).",
            LABELS,
            (([r.namespace, r.subscription], r.pending) for r in rows),
        ),
        gauge(
            "orbit_delivery_oldest_age_seconds",
            "Age of the oldest PENDING delivery per subscription (0 when none).",
            LABELS,
            (([r.namespace, r.subscription], r.oldest_pending_age_seconds) for r in rows),
        ),
        gauge(
            "orbit_deliveries_parked",
            "Deliveries PARKED after max attempts: kept, need a redrive (alert on > 0).",
            LABELS,
            (([r.namespace, r.subscription], r.parked) for r in rows),
        ),
    ]
