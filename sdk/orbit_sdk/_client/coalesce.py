"""Concurrent ``Client.submit`` calls of one client sent together (Kafka's producer linger, River's
``InsertMany``): the submissions that wait while a request is on its way go in the next one, a
``POST …/tasks:batch`` with ``with_tasks``, and each caller still gets its own ``Task`` or its own
typed error — what its submission alone would have answered.

No thread of its own: a caller finding no request on its way sends one itself (with whatever
else waits, oldest first, one namespace per request) and keeps sending until its own submission
is answered; then a waiting caller takes over. Under concurrency the requests carry everyone who
arrived meanwhile; ``linger`` is how long a sender waits for company first, and only after a
request that carried several submissions — a lone caller sends at once, as without coalescing.
A request of one submission is the plain ``POST …/tasks``.

Every submission carries its idempotency key from the start, so a request resent after a lost
answer replays, never doubles (invariant 6), and the same key twice in one request is answered
as two concurrent submissions are. A request refused as a whole for its body (422, 413, a
``params`` that cannot be encoded) is sent again one submission at a time, so only the
offending caller hears of it; any other failure of the request (server unreachable,
authentication) is every caller's, as it would have been alone. A server without ``with_tasks``
refuses it once: from then on each submission goes alone.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from .._wire import calls
from .._wire.transport import Call
from ..errors import NotFound, PayloadTooLarge, ValidationFailed, error_for_problem
from ..models import Problem, Task
from .bulk import submit_many_call

#: Seconds a sender waits for company once requests carry several (bench/tasks/submit_linger.py).
DEFAULT_SUBMIT_LINGER = 0.001
#: Submissions per request: a request is one server transaction (``bulk.SUB_BATCH``).
MAX_COALESCED = 100
WITH_TASKS = "with_tasks"


@dataclass(eq=False)
class Waiting:
    """One caller's submission, until its answer is known."""

    namespace: str
    body: dict[str, Any]
    task: Task | None = None
    error: BaseException | None = None
    done: bool = False

    def answer(self, task: Task | None = None, error: BaseException | None = None) -> None:
        if not self.done:
            self.task, self.error, self.done = task, error, True

    def outcome(self) -> Task:
        if self.error is not None:
            raise self.error
        assert self.task is not None
        return self.task


class Gathering:
    """The waiting submissions and what goes together; the same for threads and tasks."""

    def __init__(self, linger: float) -> None:
        if linger < 0:
            raise ValueError("submit_linger must be at least 0 seconds (None: no coalescing)")
        self.linger = linger
        self.pending: list[Waiting] = []
        self.sending = False
        self.batched = True  # False once the server refused with_tasks
        #: Submissions the last request carried: a sender waits for company only after a
        #: request that had some (a lone caller's submissions go at once).
        self.last_size = 0

    def lingers(self) -> float:
        """How long the sender waits for company now."""
        return self.linger if self.last_size > 1 else 0.0

    def take(self) -> list[Waiting]:
        """The oldest submission's namespace: its waiting submissions, oldest first."""
        namespace = self.pending[0].namespace
        taken = [w for w in self.pending if w.namespace == namespace][:MAX_COALESCED]
        chosen = set(map(id, taken))
        self.pending = [w for w in self.pending if id(w) not in chosen]
        self.last_size = len(taken)
        return taken

    def next_batch(self, waiting: Waiting) -> list[Waiting]:
        """What the sender of ``waiting`` sends next: everyone's, or its own alone once the
        server refused batches."""
        if self.batched:
            return self.take()
        self.withdraw(waiting)
        return [waiting]

    def full(self) -> bool:
        return len(self.pending) >= MAX_COALESCED

    def withdraw(self, waiting: Waiting) -> None:
        """A caller gone (interrupted, cancelled) before its submission was taken: it is not
        sent. One already taken may still be accepted, as a request already sent would be."""
        if waiting in self.pending:
            self.pending.remove(waiting)

    def call(self, batch: list[Waiting]) -> Call:
        if len(batch) == 1:
            return alone(batch[0])
        call = submit_many_call(batch[0].namespace, [w.body for w in batch])
        return Call(call.method, call.path, json={**call.json, WITH_TASKS: True})

    def settle(self, batch: list[Waiting], answer: dict[str, Any]) -> list[Waiting]:
        """Each submission's answer from the request's; returns those left to send alone."""
        if len(batch) == 1:
            batch[0].answer(task=Task.model_validate(answer))
            return []
        left = []
        for waiting, result in zip(batch, answer["results"], strict=True):
            if result.get("task") is not None:
                waiting.answer(task=Task.model_validate(result["task"]))
            elif result.get("problem") is not None:
                waiting.answer(error=error_for_problem(Problem.model_validate(result["problem"])))
            else:
                left.append(waiting)
        return left

    def after_failure(self, batch: list[Waiting], exc: BaseException) -> list[Waiting]:
        """The submissions to send alone after the request failed as a whole (the others get
        ``exc``, as each would have alone)."""
        if len(batch) == 1:
            batch[0].answer(error=exc)
            return []
        if isinstance(exc, ValidationFailed) and any(f == WITH_TASKS for f, _ in exc.fields):
            self.batched = False
        if isinstance(exc, ValidationFailed | PayloadTooLarge | NotFound | TypeError | ValueError):
            return batch
        for waiting in batch:
            waiting.answer(error=exc)
        return []


def alone(waiting: Waiting) -> Call:
    return calls.submit(waiting.namespace, waiting.body)


class SubmitCoalescer:
    """For ``Client``: callers are threads."""

    def __init__(self, send: Callable[[Call], httpx.Response], linger: float) -> None:
        self.send = send
        self.gathering = Gathering(linger)
        self._cond = threading.Condition()

    def submit(self, namespace: str, body: dict[str, Any]) -> Task:
        waiting, gathering = Waiting(namespace, body), self.gathering
        with self._cond:
            gathering.pending.append(waiting)
            self._cond.notify_all()
            try:
                while not waiting.done and gathering.sending:
                    self._cond.wait()
            except BaseException:
                gathering.withdraw(waiting)
                raise
            if waiting.done:
                return waiting.outcome()
            gathering.sending = True
        try:
            self._linger()
            while not waiting.done:
                with self._cond:
                    batch = gathering.next_batch(waiting)
                self._send(batch)
        finally:
            with self._cond:
                gathering.sending = False
                self._cond.notify_all()
        return waiting.outcome()

    def _linger(self) -> None:
        until = time.monotonic() + self.gathering.lingers()
        with self._cond:
            while not self.gathering.full() and (left := until - time.monotonic()) > 0:
                self._cond.wait(left)

    def _send(self, batch: list[Waiting]) -> None:
        try:
            try:
                left = self.gathering.settle(batch, self.send(self.gathering.call(batch)).json())
            except Exception as exc:
                left = self.gathering.after_failure(batch, exc)
            for waiting in left:
                try:
                    waiting.answer(task=Task.model_validate(self.send(alone(waiting)).json()))
                except Exception as exc:
                    waiting.answer(error=exc)
        except BaseException as exc:  # never leave a caller waiting for an answer
            for waiting in batch:
                waiting.answer(error=exc)
            raise
        finally:
            with self._cond:
                self._cond.notify_all()


class AsyncSubmitCoalescer:
    """For ``AsyncClient``: callers are tasks of one event loop; the same rules."""

    def __init__(self, send: Callable[[Call], Awaitable[httpx.Response]], linger: float) -> None:
        self.send = send
        self.gathering = Gathering(linger)
        self._cond: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    async def submit(self, namespace: str, body: dict[str, Any]) -> Task:
        waiting, gathering, cond = Waiting(namespace, body), self.gathering, self._condition()
        async with cond:
            gathering.pending.append(waiting)
            cond.notify_all()
            try:
                while not waiting.done and gathering.sending:
                    await cond.wait()
            except BaseException:
                gathering.withdraw(waiting)
                raise
            if waiting.done:
                return waiting.outcome()
            gathering.sending = True
        try:
            await self._linger(cond)
            while not waiting.done:
                await self._send(gathering.next_batch(waiting))
        finally:
            async with cond:
                gathering.sending = False
                cond.notify_all()
        return waiting.outcome()

    async def _linger(self, cond: asyncio.Condition) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + self.gathering.lingers()
        async with cond:
            while not self.gathering.full() and (left := until - loop.time()) > 0:
                try:
                    await asyncio.wait_for(cond.wait(), left)
                except TimeoutError:
                    break

    async def _send(self, batch: list[Waiting]) -> None:
        gathering = self.gathering
        try:
            try:
                answer = (await self.send(gathering.call(batch))).json()
                left = gathering.settle(batch, answer)
            except Exception as exc:
                left = gathering.after_failure(batch, exc)
            for waiting in left:
                try:
                    task = Task.model_validate((await self.send(alone(waiting))).json())
                    waiting.answer(task=task)
                except Exception as exc:
                    waiting.answer(error=exc)
        except BaseException as exc:  # a cancelled sender: its batch's callers learn of it
            for waiting in batch:
                waiting.answer(error=exc)
            raise
        finally:
            async with self._condition():
                self._condition().notify_all()
