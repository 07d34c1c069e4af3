"""A report the server cannot take yet is retried at least every third of the lease (found by
the chaos run: after a server outage a lease gets only its own length of grace, and a report
that waited out a 10-second backoff arrived after a 3-second lease had lapsed, so a task that
had finished ran again)."""

from __future__ import annotations

import threading

import httpx

from orbit_sdk import Lease, TaskContext
from orbit_sdk._attempt import AttemptRunner, RegisteredHandler
from orbit_sdk._live import LiveAttempt, LiveSet
from orbit_sdk._outcome import Report
from orbit_sdk._transport import Call

from .test_models import LEASE


class RecordedWaits(threading.Event):
    """An event that is never set and records how long each retry would have waited."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        return False


def _report_after_failures(lease_seconds: float, failures: int) -> list[float]:
    calls = 0

    def send(call: Call) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls <= failures:
            raise httpx.ConnectError("server unreachable")
        return httpx.Response(200, json={"status": "applied", "task_state": "SUCCEEDED"})

    waits = RecordedWaits()
    runner = AttemptRunner(
        send=send,
        handlers={"shop.echo": RegisteredHandler(lambda ctx, params: None, "safe")},
        live=LiveSet(),
        stopping=threading.Event(),
        abandon=waits,
    )
    lease = Lease.model_validate(
        {**LEASE, "handler": "shop.echo", "started": True, "lease_remaining_seconds": lease_seconds}
    )
    runner.report(LiveAttempt(lease, TaskContext(lease, "w")), Report("succeeded"))
    assert calls == failures + 1
    return waits.waits


def test_report_retries_come_at_least_every_third_of_a_short_lease() -> None:
    waits = _report_after_failures(3.0, failures=8)
    assert len(waits) == 8 and max(waits) <= 1.0


def test_report_retries_of_a_long_lease_back_off_to_fifteen_seconds_at_most() -> None:
    waits = _report_after_failures(300.0, failures=8)
    assert max(waits) > 5.0 and max(waits) <= 15.0
