"""The Weave timer loop: fires sleeps that are over, signal waits that timed out and poll rounds
that are due — a namespace's due instances in sets, one transaction per set
(``orbit_store.weave.sets.timer_set``), an instance a set cannot fire alone
(``orbit_store.weave.timers``); an instance that fails alone is logged, counted
(``orbit_engine_item_errors_total{loop="weave-timers"}``) and backed off. The live-instance and
signal-backlog gauges are the gauge loop's (orbit/metrics/workflows.py).

After a pass it reads how far off the next timer is (``PassReport.next_due_in``): the loop
waits that long rather than its whole interval, which stays the poll for timers that other
replicas and processes set."""

from __future__ import annotations

import functools

import sqlalchemy as sa

from orbit.metrics.server import Metrics
from orbit_store.db import run_transaction
from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES
from orbit_store.weave import timers
from orbit_store.weave.service import TIMERS_LOOP, PassReport, timer_pass

from .weave_inbox import Notify, observe

LOOP = TIMERS_LOOP


def timers_pass(
    engine: sa.Engine,
    metrics: Metrics,
    notify: Notify,
    workers: int = 4,
    namespace: str | None = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> PassReport:
    """``notify(namespace, queue, handler)`` wakes a long-polling worker for each new READY
    step task. ``namespace`` restricts the pass (tests and operations)."""
    report = timer_pass(
        engine,
        limit=200,
        workers=workers,
        namespace=namespace,
        max_payload_bytes=max_payload_bytes,
    )
    observe(report, LOOP, metrics, notify)
    report.next_due_in = run_transaction(
        engine, functools.partial(timers.seconds_to_next_timer, namespace=namespace)
    )
    return report
