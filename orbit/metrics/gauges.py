"""The gauge loop: every gauge derived from MySQL, computed once per interval, served from a cache.

A scrape of /metrics never queries the database: each server replica runs this loop (an
EngineLoop like the reaper) and its collector yields the last snapshot. Every replica reports the
same authoritative numbers, so aggregate them across replicas with ``max``, never ``sum``
(docs/operations/monitoring.md).

A *reader* computes one group of gauge families from one short read-only transaction: the task
backlog (here), result deliveries (orbit/metrics/delivery.py), workflows
(orbit/metrics/workflows.py). Each keeps its own snapshot: a reader that fails is an item error
of the pass (logged, ``orbit_engine_item_errors_total{loop="gauges"}``) and the others are still
refreshed; when every reader fails (the database is unreachable) the pass fails
(``orbit_engine_errors_total{loop="gauges"}``). A snapshot older than ``STALE_AFTER`` intervals is
no longer served: its gauges disappear rather than show old numbers.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from orbit_store.passes import ItemPass
from orbit_store.pulse.views.backlog import read_backlog
from orbit_store.pulse.views.routing import unrunnable_counts

log = logging.getLogger("orbit.engines.gauges")  # the loop's logger, as named for users

Reader = Callable[[sa.Connection], Iterable[Metric]]
STALE_AFTER = 3  # intervals
LOOP = "gauges"


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


class GaugesUnavailable(Exception):
    """No reader could refresh its gauges (the database is unreachable or refuses)."""


@dataclass(frozen=True)
class _Snapshot:
    metrics: list[Metric]
    taken_at: float  # time.monotonic()


class GaugeCache(Collector):
    """The collector /metrics reads; :meth:`refresh` is the loop's pass."""

    def __init__(
        self, engine: sa.Engine, interval: float, readers: Sequence[Reader] = (backlog_gauges,)
    ) -> None:
        self.engine, self.interval, self.readers = engine, interval, tuple(readers)
        self._lock = threading.Lock()
        self._snapshots: dict[Reader, _Snapshot] = {}
        self._refreshed: _Snapshot | None = None

    def refresh(self) -> int:
        """Run each reader in its own read-only transaction and swap its snapshot in; returns
        how many failed (each logged). GaugesUnavailable when every one did."""
        items = ItemPass(self.engine, LOOP)
        for reader in self.readers:
            metrics = items.call(
                functools.partial(self._read, reader),
                namespace="(all)",
                item=f"gauge reader {reader.__name__}",
            )
            if metrics is not None:
                with self._lock:
                    self._snapshots[reader] = _Snapshot(metrics, time.monotonic())
        if self.readers and items.errors == len(self.readers):
            raise GaugesUnavailable("no gauge could be read from the database")
        if not items.errors:
            stamp = GaugeMetricFamily(
                "orbit_gauges_refreshed_timestamp_seconds",
                "Unix time of this replica's last refresh of every MySQL gauge.",
                value=time.time(),
            )
            with self._lock:
                self._refreshed = _Snapshot([stamp], time.monotonic())
        return items.errors

    def _read(self, reader: Reader) -> list[Metric]:
        with self.engine.connect() as conn:
            return list(reader(conn))

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            snapshots = [s for s in [*self._snapshots.values(), self._refreshed] if s is not None]
        fresh_after = time.monotonic() - STALE_AFTER * self.interval
        if any(s.taken_at < fresh_after for s in snapshots):
            log.warning("stale gauges are not served until their next successful refresh")
        for snapshot in snapshots:
            if snapshot.taken_at >= fresh_after:
                yield from snapshot.metrics
