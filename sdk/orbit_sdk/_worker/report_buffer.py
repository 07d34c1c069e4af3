"""Batching of a worker's starts and outcome reports (worker protocol 2).

Attempt threads hand their start or report to a :class:`CallBatcher` and wait for their own
answer; one flusher thread sends what has gathered as one ``POST /v1/attempts:start`` or
``/v1/attempts:complete``, as soon as the previous call returned and after at most ``linger``
seconds (or at once with ``max_items`` waiting, or when the worker stops). Under load the items
that arrive while a call is in flight go together in the next (group commit); an idle worker
adds at most ``linger`` to an attempt. pgqueuer buffers its acknowledgements the same way.

Reports ride the worker's next lease request when one is about to go (worker protocol 4): the
lease loop ``hold``s the flusher while it waits for its slots, ``take``s the pending reports
into its request and ``settle``s each from the answer, or ``put_back``s them for the flusher
when the request failed — one round trip per cycle of a busy worker instead of two.

Every item keeps its own answer: an item the server refused raises, in the thread that waits
for it, the same typed error the single-item call raises (``StaleAttempt``, ``LeaseLost``, …);
a call that failed as a whole raises its error in every waiting thread, whose own retry rules
(``attempt.AttemptRunner``) then apply. A server without the batched calls (404 on the batch
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

from .._wire import calls
from .._wire.transport import Call
from ..errors import NotFound, OrbitError, PayloadTooLarge, ValidationFailed, error_for_problem
from ..models import Problem

log = logging.getLogger("orbit_sdk.worker")

#: The server's limit per batched call.
MAX_ITEMS = 100
DEFAULT_LINGER = 0.002

#: An item, the future its thread waits on, and its time budget in seconds.
Pending = tuple[dict[str, Any], "Future[dict[str, Any]]", float | None]


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
        self._pending: list[Pending] = []
        self._cond = threading.Condition()
        self._urgent = False
        #: A lease request is coming that will carry the pending items, each held at most
        #: ``_max_hold`` seconds from its arrival (``_since``: monotonic time, by item id).
        self._held = False
        self._max_hold = 0.0
        self._since: dict[int, float] = {}
        #: Items a lease request could not deliver: the flusher sends them (never a lease again).
        self._own: set[int] = set()
        self._thread = threading.Thread(target=self._loop, name=f"orbit-{name}", daemon=True)
        self._thread.start()

    def submit(
        self,
        item: dict[str, Any],
        budget: float | None = None,
        queued: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """The server's answer for ``item``; raises its refusal or the call's error. ``budget``:
        the most seconds the call carrying it may take (see the module docstring); ``queued``
        is called once the item waits here (a lease request may take it from then on)."""
        future: Future[dict[str, Any]] = Future()
        pending = (item, future, budget)
        with self._cond:
            self._pending.append(pending)
            self._since[id(pending)] = time.monotonic()
            self._cond.notify_all()
        if queued is not None:
            queued()
        return future.result()

    def hold(self, seconds: float) -> None:
        """A lease request is coming and will carry the pending items (``take``): until then
        the flusher leaves each for at most ``seconds`` from its arrival."""
        with self._cond:
            self._held, self._max_hold = True, seconds

    def take(self) -> list[Pending]:
        """The pending items (at most ``max_items``), for a lease request to carry; their
        threads wait on until ``settle`` or ``put_back``. Ends the hold."""
        with self._cond:
            rideable = [p for p in self._pending if id(p) not in self._own][: self.max_items]
            taken = set(map(id, rideable))
            self._pending = [p for p in self._pending if id(p) not in taken]
            for key in taken:
                self._since.pop(key, None)
            self._held = False
            self._cond.notify_all()
            return rideable

    def put_back(self, taken: list[Pending]) -> None:
        """Items a lease request took but could not deliver: the flusher sends them at once
        (a report is idempotent: one the server applied meanwhile answers ``duplicate``)."""
        with self._cond:
            self._pending[:0] = taken
            self._own.update(map(id, taken))
            self._held = False
            self._cond.notify_all()

    def settle(self, taken: list[Pending], results: list[dict[str, Any]]) -> None:
        """Each taken item's own answer from a lease request's ``reports``; an item the answer
        does not name is sent again by the flusher."""
        by_id = {r["attempt_id"]: r for r in results}
        unanswered = [p for p in taken if p[0]["attempt_id"] not in by_id]
        _resolve([p for p in taken if p[0]["attempt_id"] in by_id], by_id)
        if unanswered:
            self.put_back(unanswered)

    def flush_now(self) -> None:
        """Stop lingering: the worker is draining, every report should go at once."""
        with self._cond:
            self._urgent = True
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while (left := self._wait_left()) is None or left > 0:
                    self._cond.wait(left)
                taken = self._pending[: self.max_items]
                del self._pending[: self.max_items]
                self._own.difference_update(map(id, taken))
                for pending in taken:
                    self._since.pop(id(pending), None)
            if not taken:
                continue
            try:
                self._send(taken)
            except BaseException as exc:  # never leave a waiting thread hanging
                for _, future, _ in taken:
                    if not future.done():
                        future.set_exception(exc)

    def _wait_left(self) -> float | None:
        """Seconds the flusher still waits before sending (None: nothing to send): company for
        the oldest item for ``linger``, or while a lease request is coming, up to the hold's
        bound; none for items a lease request gave back, a full call or a draining worker."""
        if not self._pending:
            return None
        if self._urgent or any(id(p) in self._own for p in self._pending):
            return 0.0
        if not self._held and len(self._pending) >= self.max_items:
            return 0.0
        oldest = min(self._since.get(id(p), 0.0) for p in self._pending)
        waits = self._max_hold if self._held else self.linger
        return oldest + waits - time.monotonic()

    def _send(self, taken: list[Pending]) -> None:
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
                _resolve(taken, {r["attempt_id"]: r for r in answer["results"]})
                return
        for item, future, budget in taken:
            try:
                future.set_result(self.single(item, budget))
            except Exception as exc:
                future.set_exception(exc)


def _resolve(taken: list[Pending], by_id: dict[str, dict[str, Any]]) -> None:
    """Each item's future from its own answer: its result, or its refusal as a typed error."""
    for item, future, _ in taken:
        result = by_id[item["attempt_id"]]
        if result["status"] == "ok":
            future.set_result(result)
        else:
            future.set_exception(_refusal(result["problem"]))


def _refusal(problem: dict[str, Any]) -> OrbitError:
    return error_for_problem(Problem.model_validate(problem))


def start_batcher(send: Callable[[Call], httpx.Response], linger: float) -> CallBatcher:
    """Starts: answers ``{"already_started", "lease_expires_at"}``."""

    def single(item: dict[str, Any], budget: float | None) -> dict[str, Any]:
        call = calls.start_attempt(item["attempt_id"], item["token"], item.get("safety"), budget)
        return dict(send(call).json())

    return CallBatcher(
        name="starts", send=send, batch_call=calls.start_attempts, single=single, linger=linger
    )


def report_batcher(send: Callable[[Call], httpx.Response], linger: float) -> CallBatcher:
    """Outcome reports: answers ``{"outcome_status", "task_state", "reason"}``."""

    def single(item: dict[str, Any], budget: float | None) -> dict[str, Any]:
        fields = {k: item.get(k) for k in ("result", "error")}
        call = calls.complete_attempt(
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
        batch_call=calls.complete_attempts,
        single=single,
        linger=linger,
    )
