"""One leased attempt, start to report, on an attempt thread: start → handler → complete.
A grant the server started with the lease (``Lease.started``, worker protocol 3) skips the start.

Kept apart from the worker's lifecycle code so the rules for a single attempt -- when the handler
may run, and which server answers end the reporting -- read top to bottom in one place.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from .._lease_deadline import report_timeout_passed
from .._wire import calls
from .._wire.transport import Call
from ..context import TaskContext
from ..errors import FencedByRestore, OrbitError, PayloadTooLarge, StaleAttempt, ValidationFailed
from ..models import CompletionResponse, Lease, StartResponse
from .attempt_threads import AttemptThreads
from .live import Backoff, LiveAttempt, LiveSet
from .outcome import Handler, Report, run_handler, unknown_handler_report
from .report_buffer import CallBatcher

log = logging.getLogger("orbit_sdk.worker")


@dataclass(frozen=True)
class RegisteredHandler:
    fn: Handler
    safety: str


def is_transient(exc: Exception) -> bool:
    """Worth another try later: no answer, or the server said it cannot answer now."""
    if isinstance(exc, OrbitError):
        return exc.status >= 500 or exc.client_side
    return True  # unexpected client-side failures (e.g. a closed pool during shutdown)


def _lease_third(lease: Lease) -> float:
    return (lease.lease_remaining_seconds or 30.0) / 3  # older servers: the default lease


def _report_backoff(lease: Lease) -> Backoff:
    """Retries of a report come at least every third of the lease. After a server outage a
    lease gets only its own length of grace once service resumes
    (``orbit_store.pulse.state.outages``): a report still waiting out a longer backoff then
    arrives after the lease lapsed, and a task that finished runs again."""
    return Backoff(maximum=min(15.0, max(0.5, _lease_third(lease))))


def call_budget(lease: Lease) -> float:
    """Seconds a start or report call may take, retries included, before the attempt's own
    loop sends it again: a third of the lease (at least a second). A call stuck on a server
    that lost its database connections would otherwise wait out the client's whole timeout
    (10 s) while a 3-second lease lapsed, and a finished task ran again (chaos seeds 824288,
    919245)."""
    return max(1.0, _lease_third(lease))


def _x(ctx: TaskContext) -> dict[str, Any]:
    return ctx._as_log_extra()


class AttemptRunner:
    """Runs attempts for one worker. ``stopping`` turns not-yet-started grants into releases;
    ``abandon`` (drain timed out) ends report retries."""

    def __init__(
        self,
        *,
        send: Callable[[Call], httpx.Response],
        handlers: Mapping[str, RegisteredHandler],
        live: LiveSet,
        stopping: threading.Event,
        abandon: threading.Event,
        report_timeout: float = 600.0,
    ) -> None:
        self.report_timeout = report_timeout
        self.send = send
        self.handlers = handlers
        self.live = live
        self.stopping = stopping
        self.abandon = abandon
        #: Set by the worker when it runs: starts and reports then go in batched calls.
        self.starts: CallBatcher | None = None
        self.reports: CallBatcher | None = None
        self.threads: AttemptThreads[LiveAttempt] = AttemptThreads(self.run)

    def spawn(self, attempt: LiveAttempt) -> None:
        """Run ``attempt`` on an attempt thread (an idle one, or a new one)."""
        self.live.add(attempt)
        self.threads.submit(attempt)

    def run(self, attempt: LiveAttempt) -> None:
        ctx = attempt.ctx
        try:
            started = attempt.lease.started  # RUNNING already; its lease runs from the grant
            if self.stopping.is_set() and not started:  # granted while stopping: hand it back
                self.report(attempt, Report("released"))
                return
            if ctx.lease_lost:  # the answer sat undelivered (a pause) past the lease's end
                log.warning(
                    "task %s: grant arrived after its lease's deadline; not run",
                    ctx.task_id,
                    extra=_x(ctx),
                )
                if not started:  # nothing ran: hand it back if the server still counts it
                    self.report(attempt, Report("released"))
                return
            if not started and not self.start(attempt):
                return
            attempt.started = True
            report = self.execute(attempt)
            if attempt.abandoned:
                # The worker gave up on this attempt at shutdown and closed its session: the
                # lease rules decide now, a late report would only race them.
                log.warning("task %s: finished after shutdown; not reported", ctx.task_id)
            elif report is None:
                log.info("task %s: stopped after losing its lease", ctx.task_id, extra=_x(ctx))
            elif ctx._outlived_lease():
                # Not as if valid: the server may still count this attempt current (it has not
                # seen the pause), and would apply an outcome from past the lease's deadline.
                log.warning(
                    "task %s: handler returned after its lease's deadline; %s not reported, "
                    "the server's lease rules decide",
                    ctx.task_id,
                    report.outcome,
                    extra=_x(ctx),
                )
            else:  # its slot is free once the report waits to be sent (it may ride a lease)
                self.report(attempt, report, queued=lambda: self.live.mark_reporting(attempt))
        except Exception:
            log.exception("attempt %s failed inside the worker", ctx.attempt_id, extra=_x(ctx))
        finally:
            self.live.remove(ctx.attempt_id)

    def start(self, attempt: LiveAttempt) -> bool:
        """Ask the server for the go-ahead; a refusal (superseded, cancelled, gate closed, lease
        lapsed) means another outcome already happened, so the handler must not run."""
        ctx, backoff = attempt.ctx, Backoff()
        registered = self.handlers.get(attempt.lease.handler)
        # An unsafe handler makes its task unsafe from here on: if this worker vanishes
        # mid-run, the task goes to review instead of being run again.
        safety = registered.safety if registered else None
        while True:
            sent_at = time.monotonic()
            try:
                started = self._start_once(attempt, safety)
            except OrbitError as exc:
                if not is_transient(exc):
                    log.info("task %s: start refused: %s", ctx.task_id, exc, extra=_x(ctx))
                    return False
                log.warning("task %s: start failed: %s", ctx.task_id, exc, extra=_x(ctx))
            else:
                if not started.started:
                    log.info("task %s: server did not start it", ctx.task_id, extra=_x(ctx))
                    return False
                ctx._extend(started.lease_expires_at, started.lease_remaining_seconds, sent_at)
                return True
            if ctx.lease_lost or backoff.sleep(self.stopping):
                if self.stopping.is_set() and not ctx.lease_lost:
                    self.report(attempt, Report("released"))
                return False

    def _start_once(self, attempt: LiveAttempt, safety: str | None) -> StartResponse:
        lease = attempt.lease
        if self.starts is None:
            call = calls.start_attempt(lease.attempt_id, lease.token, safety, call_budget(lease))
            return StartResponse.model_validate(self.send(call).json())
        item = {"attempt_id": lease.attempt_id, "token": lease.token}
        if safety == "unsafe":  # only the stricter declaration changes anything
            item["safety"] = safety
        answer = self.starts.submit(item, call_budget(lease))
        return StartResponse.model_validate({"started": True, **answer})

    def _report_once(
        self, attempt: LiveAttempt, report: Report, queued: Callable[[], None] | None
    ) -> CompletionResponse:
        lease = attempt.lease
        if self.reports is None:
            if queued is not None:
                queued()
            call = calls.complete_attempt(
                lease.attempt_id,
                lease.token,
                report.outcome,
                result=report.result,
                error=report.error,
                retryable=report.retryable,
                budget=call_budget(lease),
            )
            return CompletionResponse.model_validate(self.send(call).json())
        answer = self.reports.submit(
            {
                "attempt_id": lease.attempt_id,
                "token": lease.token,
                "outcome": report.outcome,
                "result": report.result,
                "error": report.error,
                "retryable": report.retryable,
            },
            call_budget(lease),
            queued,
        )
        return CompletionResponse.model_validate({**answer, "status": answer["outcome_status"]})

    def execute(self, attempt: LiveAttempt) -> Report | None:
        ctx, lease = attempt.ctx, attempt.lease
        registered = self.handlers.get(lease.handler)
        if registered is None:
            log.error("task %s: no handler %r", ctx.task_id, lease.handler, extra=_x(ctx))
            return unknown_handler_report(lease.handler, sorted(self.handlers))
        began = time.monotonic()
        # DEBUG: the attempt's one INFO record comes with its report (``report``), so a busy
        # worker writes one line per task, not three (a share of its CPU is per log record).
        log.debug("task %s: running %s", ctx.task_id, lease.handler, extra=_x(ctx))
        report = run_handler(registered.fn, ctx, lease.params)
        attempt.ran_seconds = time.monotonic() - began
        return report

    def report(
        self, attempt: LiveAttempt, report: Report, queued: Callable[[], None] | None = None
    ) -> None:
        """Send the outcome until the server gives a definitive answer. ``applied`` and
        ``duplicate`` are success; ``stale-attempt`` means the server kept it as evidence only.
        A rejected body (422, or 413 for a result over the size limit) is re-sent once as a plain
        failure so the task does not hang. ``queued`` is called once, when the first try is on
        its way."""
        ctx, backoff, fell_back = attempt.ctx, _report_backoff(attempt.lease), False
        began = time.monotonic()
        while True:
            first_try, queued = queued, None
            try:
                done = self._report_once(attempt, report, first_try)
            except StaleAttempt as exc:
                log.warning("task %s: superseded: %s", ctx.task_id, exc, extra=_x(ctx))
                return
            except FencedByRestore as exc:  # kept as evidence for the operator's reconciliation
                log.warning("task %s: fenced by restore: %s", ctx.task_id, exc, extra=_x(ctx))
                return
            except (ValidationFailed, PayloadTooLarge) as exc:  # e.g. a result over the limit
                if fell_back or report.outcome == "released":
                    log.error("task %s: report refused: %s", ctx.task_id, exc, extra=_x(ctx))
                    return
                fell_back = True
                detail = (exc.problem.detail or exc.problem.title)[:1000]
                report = Report("failed", error={"type": "CompletionRejected", "message": detail})
                continue
            except Exception as exc:
                if not is_transient(exc):
                    log.error("task %s: report refused: %s", ctx.task_id, exc, extra=_x(ctx))
                    return
                log.warning("task %s: report failed: %s", ctx.task_id, exc, extra=_x(ctx))
                if report_timeout_passed(began, self.report_timeout):
                    log.error(
                        "task %s: gave up reporting %s after %.0fs; the lease rules decide",
                        ctx.task_id,
                        report.outcome,
                        self.report_timeout,
                        extra=_x(ctx),
                    )
                    return
                if backoff.sleep(self.abandon):
                    log.error("task %s: gave up reporting %s", ctx.task_id, report.outcome)
                    return
                continue
            ran = "" if attempt.ran_seconds is None else f" in {attempt.ran_seconds:.3f}s"
            log.info(
                "task %s: %s%s; reported (%s; task now %s)",
                ctx.task_id,
                report.outcome,
                ran,
                done.status,
                done.task_state,
                extra=_x(ctx),
            )
            return
