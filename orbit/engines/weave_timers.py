"""The Weave timer loop: fires sleeps that are over, signal waits that timed out and poll rounds
that are due, one instance per transaction (``orbit_store.weave.timers``), and refreshes the
live-instance and signal-backlog gauges from MySQL every few passes."""

from __future__ import annotations

import time

import sqlalchemy as sa

from orbit.engines.weave_inbox import Notify, wake_for
from orbit.metrics import Metrics
from orbit_store.db import run_transaction
from orbit_store.weave.queries import live_counts
from orbit_store.weave.service import PassReport, timer_pass

GAUGE_SECONDS = 10.0


class TimerLoop:
    def __init__(
        self, engine: sa.Engine, metrics: Metrics, notify: Notify, workers: int = 4
    ) -> None:
        self.engine, self.metrics, self.notify, self.workers = engine, metrics, notify, workers
        self._gauges_at = 0.0

    def run_pass(self) -> PassReport:
        report = timer_pass(self.engine, limit=200, workers=self.workers)
        for advanced in report.reports:
            self.metrics.workflows.record(advanced)
        wake_for(report.reports, self.notify)
        if report.failures:
            self.metrics.engine_errors.labels("weave-timers").inc(report.failures)
        if time.monotonic() - self._gauges_at >= GAUGE_SECONDS:
            self.metrics.workflows.set_live(run_transaction(self.engine, live_counts))
            self._gauges_at = time.monotonic()
        return report
