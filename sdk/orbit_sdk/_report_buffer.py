"""Batching of a worker's starts and outcome reports (worker protocol 2).

Attempt threads hand their start or report to a :class:`CallBatcher` and wait for their own
answer; one flusher thread sends what has gathered as one ``POST /v1/attempts:start`` or
``/v1/attempts:complete``, as soon as the previous call returned and after at most ``linger``
seconds (or at once with ``max_items`` waiting, or when the worker stops). Under load the items
that arrive while a call is in flight go together in the next (group commit); an idle worker
adds at most ``linger`` to an attempt. pgqueuer buffers its acknowledgements the same way.

Every item keeps its own answer: an item the server refused raises, in the thread that waits
for it, the same typed error the single-item call raises (``StaleAttempt``, ``LeaseLost``, …);
a call that failed as a whole raises its error in every waiting thread, whose own retry rules
(``_attempt.AttemptRunner``) then apply. A server without the batched calls (404 on the batch
path) is detected once and spoken to one item at a time; a batch refused as a whole (413/422: say,
several large results together over the body limit) is sent again item by item.

An item may come with a time budget (a third of its lease): the call carrying it then gives up
within the smallest budget among its items, so a stuck call never holds an outcome past its
lease while the attempt's own retries could have landed it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import httpx

from . import _calls
from ._transport import Call
from .errors import NotFound, OrbitError, PayloadTooLarge, ValidationFailed, error_for_problem
from .models import Problem

log = logging.getLogger("orbit_sdk.worker")

#: The server's limit per batched call.
MAX_ITEMS = 100
DEFAULT_LINGER = 0.002

#: An item, the future its thread waits on, and its time budget in seconds.
_Pending = tuple[dict[str, Any], "Future[dict[str, Any]]", float | None]


class CallBatcher:
    """Gathers items (dicts carrying ``attempt_id``) and sends them as one batched call;
    ``submit`` blocks until the item's own answer is known."""

    def __init__(
        self,
        *,
        name: str,
        send: Callable[[Call], httpx.Response],
        batch_call: Callable[[list[dict[str, Any]], float | None], Call],
        single: Callable[[dict[str, Any], float | None], dict[str, Any]],
        linger: float = DEFAULT_LINGER,
        max_items: int = MAX_ITEMS,
    ) -> None:
        self.send, self.batch_call, self.single = send, batch_call, single
        self.linger, self.max_items = linger, max_items
        self.batched = True  # False once the server answered 404 for the batch path
        self._pending: list[_Pending] = []
        self._cond = threading.Condition()
        self._urgent = False
        self._thread = threading.Thread(target=self._loop, name=f"orbit-{name}", daemon=True)
        self._thread.start()

    def submit(self, item: dict[str, Any], budget: float | None = None) -> dict[str, Any]:
        """The server's answer for ``item``; raises its refusal or the call's error. ``budget``:
        the most seconds the call carrying it may take (see the module docstring)."""
        future: Future[dict[str, Any]] = Future()
        with self._cond:
            self._pending.append((item, future, budget))
            self._cond.notify_all()
        return future.result()

    def flush_now(self) -> None:
        """Stop lingering: the worker is draining, every report should go at once."""
        with self._cond:
            self._urgent = True
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending:
                    self._cond.wait()
                first_seen = time.monotonic()
                while len(self._pending) < self.max_items and not self._urgent:
                    left = first_seen + self.linger - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                taken = self._pending[: self.max_items]
                del self._pending[: self.max_items]
            try:
                self._send(taken)
            except BaseException as exc:  # never leave a waiting thread hanging
                for _, future, _ in taken:
                    if not future.done():
                        future.set_exception(exc)

    def _send(self, taken: list[_Pending]) -> None:
        if self.batched:
            budgets = [b for _, _, b in taken if b is not None]
            call = self.batch_call([item for item, _, _ in taken], min(budgets, default=None))
            try:
                answer = self.send(call).json()
            except NotFound:
                # A server of protocol 2 answers per item, never 404 for the whole call: this
                # one predates the batched calls.
                log.info("server has no batched worker calls; reporting one by one")
                self.batched = False
            except (PayloadTooLarge, ValidationFailed) as exc:
                if len(taken) == 1:
                    taken[0][1].set_exception(exc)
                    return
                # The body as a whole was refused (e.g. several large results together over the
                # server's body limit): one by one, so only an offending item hears about it and
                # its neighbours' outcomes are not replaced by its fallback.
                log.info("batched call refused as a whole (%s); sending its items one by one", exc)
            except Exception as exc:
                for _, future, _ in taken:
                    future.set_exception(exc)
                return
            else:
                by_id = {r["attempt_id"]: r for r in answer["results"]}
                for item, future, _ in taken:
                    result = by_id[item["attempt_id"]]
                    if result["status"] == "ok":
                        future.set_result(result)
                    else:
                        future.set_exception(_refusal(result["problem"]))
                return
        for item, future, budget in taken:
            try:
                future.set_result(self.single(item, budget))
            except Exception as exc:
                future.set_exception(exc)


def _refusal(problem: dict[str, Any]) -> OrbitError:
    return error_for_problem(Problem.model_validate(problem))


def start_batcher(send: Callable[[Call], httpx.Response], linger: float) -> CallBatcher:
    """Starts: answers ``{"already_started", "lease_expires_at"}``."""

    def single(item: dict[str, Any], budget: float | None) -> dict[str, Any]:
        call = _calls.start_attempt(item["attempt_id"], item["token"], item.get("safety"), budget)
        return dict(send(call).json())

    return CallBatcher(
        name="starts", send=send, batch_call=_calls.start_attempts, single=single, linger=linger
    )


def report_batcher(send: Callable[[Call], httpx.Response], linger: float) -> CallBatcher:
    """Outcome reports: answers ``{"outcome_status", "task_state", "reason"}``."""

    def single(item: dict[str, Any], budget: float | None) -> dict[str, Any]:
        fields = {k: item.get(k) for k in ("result", "error")}
        call = _calls.complete_attempt(
            item["attempt_id"],
            item["token"],
            item["outcome"],
            retryable=bool(item.get("retryable")),
            budget=budget,
            **fields,
        )
        answer = send(call).json()
        return {"outcome_status": answer["status"], **answer}

    return CallBatcher(
        name="reports",
        send=send,
        batch_call=_calls.complete_attempts,
        single=single,
        linger=linger,
    )
