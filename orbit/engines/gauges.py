"""The gauge loop: gauges derived from MySQL, computed once per interval, served from a cache.

A scrape of /metrics never queries the database: each server replica runs this loop (an
EngineLoop like the reaper) and its collector yields the last snapshot. Every replica reports the
same authoritative numbers, so aggregate them across replicas with ``max``, never ``sum``
(docs/operations/monitoring.md). A snapshot older than ``STALE_AFTER`` intervals (the database is
unreachable) is no longer served: the gauges disappear rather than show old numbers, and
``orbit_engine_errors_total{loop="gauges"}`` counts the failures.

Other engines add their own gauges with :meth:`GaugeCache.add` (a reader returns metric families
from one short read-only transaction).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator

import sqlalchemy as sa
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from orbit_store.pulse.backlog import read_backlog
from orbit_store.pulse.routing import unrunnable_counts

log = logging.getLogger("orbit.engines.gauges")

Reader = Callable[[sa.Connection], Iterable[Metric]]
STALE_AFTER = 3  # intervals


def backlog_gauges(conn: sa.Connection) -> list[Metric]:
    """Queue depth by live state, oldest due WAITING age per queue, WAITING tasks no live worker
    can run, live worker sessions."""
    backlog = read_backlog(conn)
    return [
        gauge(
            "orbit_queue_tasks",
            "Live tasks per queue and state (WAITING, LEASED, RUNNING, NEEDS_REVIEW), from MySQL.",
            ["namespace", "queue", "state"],
            (([d.namespace, d.queue, d.state], d.tasks) for d in backlog.depth),
        ),
        gauge(
            "orbit_queue_oldest_waiting_seconds",
            "Age of the oldest due WAITING task per queue (0 when none is due yet), from MySQL.",
            ["namespace", "queue"],
            (([o.namespace, o.queue], o.age_seconds) for o in backlog.oldest_waiting),
        ),
        gauge(
            "orbit_tasks_unrunnable",
            "WAITING tasks that no live worker session can run (their queue is not served or "
            "nobody runs their handler): they will not start until such a worker comes.",
            ["namespace", "queue"],
            (([namespace, queue], count) for namespace, queue, count in unrunnable_counts(conn)),
        ),
        gauge(
            "orbit_worker_sessions",
            "Live worker sessions per namespace and state (ACTIVE, DRAINING), from MySQL.",
            ["namespace", "state"],
            (([s.namespace, s.state], s.sessions) for s in backlog.sessions),
        ),
    ]


def gauge(
    name: str, documentation: str, labels: list[str], samples: Iterable[tuple[list[str], float]]
) -> Metric:
    """A gauge family holding ``samples`` (label values, value); readers build theirs with it."""
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for values, value in samples:
        family.add_metric(values, value)
    return family


class GaugeCache(Collector):
    """The collector /metrics reads; :meth:`refresh` is the loop's pass."""

    def __init__(self, engine: sa.Engine, interval: float) -> None:
        self.engine, self.interval = engine, interval
        self._readers: list[Reader] = [backlog_gauges]
        self._lock = threading.Lock()
        self._metrics: list[Metric] = []
        self._refreshed_at: float | None = None  # time.monotonic() of the last good pass

    def add(self, reader: Reader) -> None:
        self._readers.append(reader)

    def refresh(self) -> None:
        """Run every reader in one read-only transaction and swap the snapshot in."""
        with self.engine.connect() as conn:
            metrics = [metric for reader in self._readers for metric in reader(conn)]
        refreshed = GaugeMetricFamily(
            "orbit_gauges_refreshed_timestamp_seconds",
            "Unix time of this replica's last successful gauge refresh.",
            value=time.time(),
        )
        with self._lock:
            self._metrics = [*metrics, refreshed]
            self._refreshed_at = time.monotonic()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            metrics, refreshed_at = list(self._metrics), self._refreshed_at
        if refreshed_at is None:
            return
        if time.monotonic() - refreshed_at > STALE_AFTER * self.interval:
            log.warning("gauges are stale: not served until the next successful refresh")
            return
        yield from metrics
