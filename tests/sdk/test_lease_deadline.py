"""The worker's local lease deadline: measured on the monotonic clock from
when the request that set the lease was sent, it ends the attempt's right to act even when no
heartbeat arrives (a paused process, an unreachable server). Seed invariant 3."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from orbit_sdk import Lease, LeaseLost, TaskContext
from orbit_sdk._wire.transport import Call
from orbit_sdk._worker.attempt import AttemptRunner
from orbit_sdk._worker.live import LiveAttempt, LiveSet
from orbit_sdk._worker.outcome import Report, report_for_exception, run_handler
from orbit_sdk.errors import Unavailable
from orbit_sdk.models import HeartbeatResult, LeaseBatch

from .test_models import LEASE


def make_ctx(remaining: float | None) -> TaskContext:
    return TaskContext(Lease.model_validate({**LEASE, "lease_remaining_seconds": remaining}), "w")


def test_past_the_deadline_the_lease_counts_as_lost_without_any_heartbeat() -> None:
    ctx = make_ctx(0.05)
    assert not ctx.lease_lost
    ctx.check()  # still held: no error
    time.sleep(0.08)
    assert ctx.lease_lost
    with pytest.raises(LeaseLost):
        ctx.check()


def test_a_renewal_counts_from_when_its_request_was_sent() -> None:
    ctx = make_ctx(0.05)
    sent_at = time.monotonic()
    ctx._extend(None, 0.3, sent_at)
    time.sleep(0.08)
    assert not ctx.lease_lost
    assert ctx.lease_seconds_left is not None and ctx.lease_seconds_left < 0.3 - 0.08 + 0.01


def test_a_heartbeat_answer_moves_the_deadline_from_the_beat_s_sending() -> None:
    ctx = make_ctx(0.05)
    live = LiveSet()
    live.add(LiveAttempt(Lease.model_validate(LEASE), ctx))
    live.apply_heartbeat(
        [HeartbeatResult(attempt_id=ctx.attempt_id, status="extended", lease_remaining_seconds=5)],
        sent_at=time.monotonic(),
    )
    time.sleep(0.08)
    assert not ctx.lease_lost


def test_once_lost_a_later_renewal_does_not_revive_the_attempt() -> None:
    ctx = make_ctx(0.01)
    time.sleep(0.02)
    assert ctx.lease_lost
    ctx._extend(None, 60, time.monotonic())
    assert ctx.lease_lost


def test_wait_for_cancel_wakes_at_the_deadline() -> None:
    ctx = make_ctx(0.1)
    began = time.monotonic()
    assert ctx.wait_for_cancel(timeout=5)
    assert time.monotonic() - began < 1
    assert ctx.lease_lost


def test_an_old_server_that_sends_no_remaining_seconds_sets_no_local_deadline() -> None:
    ctx = make_ctx(None)
    assert ctx.lease_seconds_left is None and not ctx.lease_lost
    assert not ctx.wait_for_cancel(timeout=0.01)


def test_a_handler_stopped_by_check_reports_nothing() -> None:
    ctx = make_ctx(0.0)

    def handler(ctx: TaskContext, params: object) -> object:
        ctx.check()
        return "side effect"

    assert run_handler(handler, ctx, {}) is None
    assert report_for_exception(LeaseLost.from_detail("x"), cancel_requested=False) is not None


def test_a_handler_returning_after_its_deadline_is_not_reported_as_valid() -> None:
    sent: list[Call] = []

    def send(call: Call) -> httpx.Response:
        sent.append(call)
        return httpx.Response(200, json={"started": True, "lease_remaining_seconds": 0.05})

    def slow(ctx: TaskContext, params: object) -> object:
        time.sleep(0.1)  # ignores ctx: a paused process, or a handler that never checks
        return "done"

    lease = Lease.model_validate({**LEASE, "handler": "slow", "lease_remaining_seconds": 30})
    runner = AttemptRunner(
        send=send,
        handlers={"slow": _registered(slow)},
        live=LiveSet(),
        stopping=threading.Event(),
        abandon=threading.Event(),
    )
    runner.run(LiveAttempt(lease, TaskContext(lease, "w")))
    assert [c.path.rsplit("/", 1)[-1] for c in sent] == ["start"], "no completion was sent"


def test_a_grant_counts_from_the_request_s_sending_plus_the_server_s_hold() -> None:
    batch = LeaseBatch(leases=[], claimed_after_seconds=2.5)
    assert batch.measured_from(sent_at=100.0, received_at=110.0) == 102.5


def test_a_grant_never_counts_from_later_than_its_arrival() -> None:
    batch = LeaseBatch(leases=[], claimed_after_seconds=9.0)  # clocks differ; arrival bounds it
    assert batch.measured_from(sent_at=100.0, received_at=103.0) == 103.0


def test_an_older_server_s_grant_counts_from_its_arrival() -> None:
    assert LeaseBatch(leases=[]).measured_from(sent_at=100.0, received_at=104.0) == 104.0


def test_a_grant_that_arrives_past_its_lease_s_end_is_lost_at_once_and_not_run() -> None:
    """A paused worker's answer sat in the socket: the handler must not start, and a grant the
    server did not start is handed back (``released``: nothing ran)."""
    sent: list[Call] = []
    ran: list[str] = []

    def send(call: Call) -> httpx.Response:
        sent.append(call)
        return httpx.Response(200, json={"status": "applied", "task_state": "WAITING"})

    def handler(ctx: TaskContext, params: object) -> object:
        ran.append(ctx.task_id)
        return "done"

    lease = Lease.model_validate({**LEASE, "handler": "h", "lease_remaining_seconds": 3})
    ctx = TaskContext(lease, "w", granted_at=time.monotonic() - 4)  # sent 4 s ago, paused
    runner = AttemptRunner(
        send=send,
        handlers={"h": _registered(handler)},
        live=LiveSet(),
        stopping=threading.Event(),
        abandon=threading.Event(),
    )
    runner.run(LiveAttempt(lease, ctx))
    assert ran == [] and ctx.lease_lost
    assert [c.path.rsplit("/", 1)[-1] for c in sent] == ["complete"]
    assert sent[0].json["outcome"] == "released"


def test_report_retries_end_after_the_report_timeout() -> None:
    calls: list[float] = []

    def send(call: Call) -> httpx.Response:
        calls.append(time.monotonic())
        raise Unavailable.from_detail("server down")

    runner = AttemptRunner(
        send=send,
        handlers={},
        live=LiveSet(),
        stopping=threading.Event(),
        abandon=threading.Event(),
        report_timeout=0.5,
    )
    lease = Lease.model_validate(LEASE)
    began = time.monotonic()
    runner.report(LiveAttempt(lease, TaskContext(lease, "w")), Report("succeeded", result=1))
    assert time.monotonic() - began < 3
    assert len(calls) >= 1


def _registered(fn: object) -> object:
    from orbit_sdk._worker.attempt import RegisteredHandler

    return RegisteredHandler(fn=fn, safety="safe")  # type: ignore[arg-type]
