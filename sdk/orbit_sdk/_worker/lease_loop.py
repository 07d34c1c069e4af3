"""The worker's lease thread: long-polls for as many tasks as there are free slots and hands each
grant to an attempt thread.

It is separate from the thread that called ``Worker.run()`` so a stop request never waits for a
long poll to return. Which answers end the worker and which are waited out is decided here, in
one place: a refused session registers anew, a restore fence is waited out, a refused token ends
the worker.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import httpx

from .._wire import calls
from .._wire.transport import Call
from ..context import TaskContext
from ..errors import Conflict, DispatchClosed, Forbidden, NotFound, Unauthorized, ValidationFailed
from ..models import Lease, LeaseBatch
from .attempt import AttemptRunner
from .lease_ask import LeaseAsk
from .live import Backoff, LiveAttempt, LiveSet
from .session import SessionKeeper

log = logging.getLogger("orbit_sdk.worker")


class LeaseLoop:
    """One worker's leasing, run by ``run()`` on the lease thread until the worker stops."""

    def __init__(
        self,
        *,
        name: str,
        wait_seconds: float,
        send: Callable[[Call], httpx.Response],
        sessions: SessionKeeper,
        ask: LeaseAsk,
        live: LiveSet,
        runner: AttemptRunner,
        stopping: threading.Event,
        fatal: Callable[[BaseException], None],
    ) -> None:
        self.name = name
        self.wait_seconds = wait_seconds
        self._send = send
        self._sessions = sessions
        self._ask = ask
        self._live = live
        self._runner = runner
        self._stopping = stopping
        self._fatal = fatal

    def run(self) -> None:
        backoff = Backoff()
        while not self._stopping.is_set():
            free = self._ask.free_slots(self._live, self._stopping.is_set, self._runner.reports)
            if self._stopping.is_set():
                return
            sessions = self._sessions
            if sessions.needs_registration and not sessions.register_until_ok():
                return
            assert sessions.current is not None
            asked = free  # at most MAX_LEASE_BATCH (``LeaseAsk.free_slots``)
            sent_at = time.monotonic()
            try:
                batch = self._lease(sessions.current.id, asked)
            except (Conflict, NotFound) as exc:
                if self._stopping.is_set():
                    return  # our own drain ended leasing
                log.warning("worker %s: leasing refused (%s); re-registering", self.name, exc)
                sessions.stale = True
                backoff.sleep(self._stopping)
                continue
            except ValidationFailed as exc:
                if self._ask.refused_start(exc) or self._ask.refused_reports(exc):
                    continue  # an older server: ask again without the field
                if any(field.startswith("reports") for field, _ in exc.fields):
                    continue  # a report's own fault: it goes by its own call, answered alone
                self._fatal(exc)
                return
            except (Unauthorized, Forbidden) as exc:
                self._fatal(exc)
                return
            except DispatchClosed as exc:  # a restore fence: wait for the operator's reopen
                log.warning("worker %s: %s; waiting", self.name, exc.problem.detail or exc)
                backoff.sleep(self._stopping)
                continue
            except Exception as exc:
                log.warning("worker %s: leasing failed: %s", self.name, exc)
                backoff.sleep(self._stopping)
                continue
            backoff.reset()
            self._ask.granted(asked, len(batch.leases))
            granted_at = batch.measured_from(sent_at, time.monotonic())
            for lease in batch.leases:
                self._accept(lease, granted_at)

    def _lease(self, session_id: str, asked: int) -> LeaseBatch:
        """One lease request, carrying the reports waiting to be sent (worker protocol 4): each
        answered from the lease's answer, or handed back to be sent by their own call when the
        request failed."""
        reports = self._runner.reports
        riders = self._ask.riders(reports)
        call = calls.lease(
            session_id,
            asked,
            self.wait_seconds,
            self._ask.start_handlers(),
            reports=[item for item, _, _ in riders],
            budget=min((b for _, _, b in riders if b is not None), default=None),
        )
        try:
            batch = LeaseBatch.model_validate(self._send(call).json())
        except BaseException:
            if riders and reports is not None:
                reports.put_back(riders)
            raise
        if riders and reports is not None:
            reports.settle(riders, batch.reports)
        return batch

    def _accept(self, lease: Lease, granted_at: float | None) -> None:
        ctx = TaskContext(lease, self.name, granted_at=granted_at)
        self._runner.spawn(LiveAttempt(lease, ctx))
