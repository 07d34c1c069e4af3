"""What a handler does → what the worker reports; and how heartbeat answers reach handlers."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading

import pytest

from orbit_sdk import Cancelled, Lease, OutcomeUnknown, RetryableError, TaskContext
from orbit_sdk._worker.live import LiveAttempt, LiveSet
from orbit_sdk._worker.outcome import (
    Report,
    report_for_exception,
    report_for_result,
    run_handler,
    unknown_handler_report,
)
from orbit_sdk.models import HeartbeatResult

from .test_models import LEASE


def make_ctx(**overrides: object) -> TaskContext:
    return TaskContext(Lease.model_validate({**LEASE, **overrides}), "w1")


class PaymentDeclined(Exception):
    pass


@pytest.mark.parametrize(
    ("exc", "cancel_requested", "expected"),
    [
        (
            RetryableError("upstream 503"),
            False,
            Report(
                "failed",
                error={"type": "RetryableError", "message": "upstream 503"},
                retryable=True,
            ),
        ),
        (
            OutcomeUnknown("charge timed out"),
            False,
            Report("unknown", error={"type": "OutcomeUnknown", "message": "charge timed out"}),
        ),
        (
            Cancelled("stopped"),
            True,
            Report("cancelled", error={"type": "Cancelled", "message": "stopped"}),
        ),
        (
            PaymentDeclined("card declined"),
            False,
            Report("failed", error={"type": "PaymentDeclined", "message": "card declined"}),
        ),
        (
            PaymentDeclined("card declined"),
            True,  # the server turns a failure after a cancel request into CANCELLED itself
            Report("failed", error={"type": "PaymentDeclined", "message": "card declined"}),
        ),
    ],
)
def test_handler_exceptions_map_to_outcomes(
    exc: Exception, cancel_requested: bool, expected: Report
) -> None:
    assert report_for_exception(exc, cancel_requested=cancel_requested) == expected


def test_subclasses_of_retryable_error_are_retryable_and_keep_their_name() -> None:
    class RateLimited(RetryableError):
        pass

    report = report_for_exception(RateLimited("429"), cancel_requested=False)
    assert report is not None and report.retryable
    assert report.error == {"type": "RateLimited", "message": "429"}


def test_cancelled_without_a_cancel_request_is_a_plain_failure() -> None:
    report = report_for_exception(Cancelled("why not"), cancel_requested=False)
    assert report is not None and report.outcome == "failed" and not report.retryable
    assert "without a cancel request" in report.error["message"]


def test_stopping_because_the_lease_was_lost_reports_nothing() -> None:
    """The server's lease rules decide then: a lost worker is not a business failure."""
    assert report_for_exception(Cancelled("lost"), cancel_requested=False, lease_lost=True) is None
    cancelled = report_for_exception(Cancelled("both"), cancel_requested=True, lease_lost=True)
    assert cancelled is not None and cancelled.outcome == "cancelled"
    failed = report_for_exception(ValueError("x"), cancel_requested=False, lease_lost=True)
    assert failed is not None and failed.outcome == "failed"  # evidence for the server to judge

    ctx = make_ctx()
    ctx._mark_lease_lost("attempt is no longer current")

    def handler(ctx: TaskContext, params: object) -> object:
        if ctx.wait_for_cancel(1):
            raise Cancelled("stopping")
        return "unreachable"

    assert run_handler(handler, ctx, None) is None


def test_a_result_that_is_not_json_fails_instead_of_hanging() -> None:
    value = {"ok": [1, "two", None]}
    assert report_for_result(value) == Report("succeeded", result=value)
    bad = report_for_result({"when": dt.datetime.now()})
    assert bad.outcome == "failed" and bad.error["type"] == "ResultNotSerializable"
    assert report_for_result(float("nan")).outcome == "failed"


def test_unknown_handler_is_a_non_retryable_failure_naming_what_exists() -> None:
    report = unknown_handler_report("shop.refund", ["shop.echo", "shop.charge"])
    assert report.outcome == "failed" and not report.retryable
    assert report.error["type"] == "UnknownHandler"
    assert "shop.refund" in report.error["message"] and "shop.echo" in report.error["message"]


def test_run_handler_runs_sync_and_async_handlers() -> None:
    def sync_echo(ctx: TaskContext, params: object) -> object:
        return {"params": params, "generation": ctx.generation}

    async def async_echo(ctx: TaskContext, params: object) -> object:
        await asyncio.sleep(0)
        return {"params": params, "task": ctx.task_id}

    async def async_boom(ctx: TaskContext, params: object) -> object:
        raise RetryableError("later")

    ctx = make_ctx()
    assert run_handler(sync_echo, ctx, {"x": 1}) == Report(
        "succeeded", result={"params": {"x": 1}, "generation": 3}
    )
    assert run_handler(async_echo, ctx, [1]) == Report(
        "succeeded", result={"params": [1], "task": "t1"}
    )
    boom = run_handler(async_boom, ctx, None)
    assert boom is not None and boom.retryable


def test_a_handler_sees_cancel_from_a_heartbeat_while_it_waits() -> None:
    live = LiveSet()
    ctx = make_ctx()
    live.add(LiveAttempt(Lease.model_validate(LEASE), ctx))
    seen: list[bool] = []

    def handler(ctx: TaskContext, params: object) -> object:
        seen.append(ctx.wait_for_cancel(timeout=5))
        raise Cancelled("stopping as asked")

    timer = threading.Timer(
        0.05,
        live.apply_heartbeat,
        args=([HeartbeatResult(attempt_id="a1", status="cancel_requested")],),
    )
    timer.start()
    report = run_handler(handler, ctx, None)
    timer.join()
    assert seen == [True] and ctx.cancel_requested and not ctx.lease_lost
    assert report is not None and report.outcome == "cancelled"


def test_heartbeat_answers_update_each_attempt() -> None:
    live = LiveSet()
    kept, lost = make_ctx(), make_ctx(attempt_id="a2")
    live.add(LiveAttempt(Lease.model_validate(LEASE), kept))
    live.add(LiveAttempt(Lease.model_validate({**LEASE, "attempt_id": "a2"}), lost))
    later = dt.datetime(2025, 1, 1, 0, 1, tzinfo=dt.UTC)
    live.apply_heartbeat(
        [
            HeartbeatResult(attempt_id="a1", status="extended", lease_expires_at=later),
            HeartbeatResult(attempt_id="a2", status="lost", reason="attempt is no longer current"),
            HeartbeatResult(attempt_id="gone", status="lost"),
        ]
    )
    assert kept.lease_expires_at == later and not kept.should_stop
    assert lost.lease_lost and lost.should_stop and not lost.cancel_requested
    assert lost.wait_for_cancel(0)
