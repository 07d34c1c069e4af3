"""Running a handler and turning what it did into the report the server expects.

Pure functions (no network) so the mapping -- the part users rely on to steer retries, review and
cancellation -- is testable on its own.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..context import TaskContext
from ..errors import Cancelled, HandlerSignal, LeaseLost, OutcomeUnknown, RetryableError
from ..json_values import storable_problem

Handler = Callable[[TaskContext, Any], Any]


@dataclass(frozen=True)
class Report:
    """One completion body (without the token): what the worker sends for an attempt."""

    outcome: str  # succeeded | failed | unknown | cancelled | released
    result: Any = None
    error: Any = None
    retryable: bool = False


def error_body(exc: BaseException) -> dict[str, str]:
    """What the server stores of a handler's exception. A message with text that is not Unicode
    (a file name decoded with ``surrogateescape``) keeps those characters as escapes."""
    return {"type": type(exc).__name__, "message": _unicode(str(exc))}


def _unicode(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode()


def report_for_exception(
    exc: BaseException, *, cancel_requested: bool, lease_lost: bool = False
) -> Report | None:
    """Map a handler's exception to its outcome; None means there is nothing to report.

    ``Cancelled`` counts as ``cancelled`` only after a cancel request (the server refuses it
    otherwise). Raised after the lease was lost, it means "I stopped because you told me to":
    a communication failure, not a business one, so nothing is reported and the server's
    lease rules decide (retry a safe task, send an unsafe one to review). Raised with neither,
    it is a handler bug, surfaced as a failure.
    """
    if isinstance(exc, LeaseLost) and lease_lost:
        return None  # ctx.check() stopped the handler: nothing valid to report
    if isinstance(exc, RetryableError):
        return Report("failed", error=error_body(exc), retryable=True)
    if isinstance(exc, OutcomeUnknown):
        return Report("unknown", error=error_body(exc))
    if isinstance(exc, Cancelled):
        if cancel_requested:
            return Report("cancelled", error=error_body(exc))
        if lease_lost:
            return None
        message = f"handler raised Cancelled without a cancel request: {exc}"
        return Report("failed", error={"type": "Cancelled", "message": message})
    return Report("failed", error=error_body(exc), retryable=False)


def report_for_result(result: Any) -> Report:
    """A returned value is a success -- if Orbit can store it as JSON (``json_values``). One it
    cannot would make the completion request itself fail, and the attempt would hang until its
    lease lapsed: it is reported as a failure saying where and why (not retryable: the handler
    would return the same again)."""
    problem = storable_problem(result, "result")
    if problem is None:
        return Report("succeeded", result=result)
    if problem.not_json:
        message = f"handler result is not JSON-serializable: {problem}"
        return Report("failed", error={"type": "ResultNotSerializable", "message": message})
    message = f"the handler's result cannot be stored: {problem}"
    return Report("failed", error={"type": "ResultNotStorable", "message": _unicode(message)})


def unknown_handler_report(name: str, known: list[str]) -> Report:
    """No handler registered under ``name`` on this worker: a deployment mismatch, not a blip,
    so non-retryable -- retrying on the same fleet would fail the same way."""
    message = f"no handler named {name!r} on this worker (registered: {', '.join(known) or '-'})"
    return Report("failed", error={"type": "UnknownHandler", "message": message})


def call_handler(handler: Handler, ctx: TaskContext, params: Any) -> Any:
    """Call a sync or async handler from a worker thread; coroutines get their own event loop."""
    result = handler(ctx, params)
    if inspect.isawaitable(result):
        return asyncio.run(_await(result))
    return result


async def _await(awaitable: Any) -> Any:
    return await awaitable


def run_handler(handler: Handler, ctx: TaskContext, params: Any) -> Report | None:
    """Run the handler and map what happened (None: nothing to report). The traceback is logged
    here, locally: the report carries only type and message, so locals never reach the server."""
    try:
        result = call_handler(handler, ctx, params)
    except Exception as exc:
        if isinstance(exc, HandlerSignal):
            ctx.log.info("handler %s signalled %s: %s", ctx.handler, type(exc).__name__, exc)
        else:
            ctx.log.warning("handler %s raised", ctx.handler, exc_info=True)
        return report_for_exception(
            exc, cancel_requested=ctx.cancel_requested, lease_lost=ctx.lease_lost
        )
    return report_for_result(result)
