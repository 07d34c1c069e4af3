"""Group commit of single submissions (issue 9).

Each ``POST /v1/namespaces/{ns}/tasks`` hands its request to :class:`SubmitGroups` and waits for
its own answer. At most ``in_flight`` groups (``ServerSettings.submit_transactions``) run at
once, each one transaction in a thread; requests that arrive while they run wait and go
together in the next group of their namespace, up to ``submit_batch.SUB_BATCH`` requests. An
idle server therefore submits each request alone at once (nothing added to its latency), and
under concurrent submitters the requests that queue behind a running transaction share the next
one: one commit, one key lookup and multi-row INSERTs instead of a transaction each — as a
database's group commit shares one fsync.

Every request is answered as it would have been alone (``orbit_store.pulse.submit_group``).
A request whose client has gone away is still submitted: like a lone submission whose answer
was lost, the client learns its fate by retrying under the same key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio
import sqlalchemy as sa

from orbit_store.pulse import service
from orbit_store.pulse.model import SubmitResult
from orbit_store.pulse.submit import SubmitRequest
from orbit_store.pulse.submit_batch import SUB_BATCH
from orbit_store.pulse.submit_group import Answer, groupable, submit_group

Waiting = tuple[SubmitRequest, "asyncio.Future[SubmitResult]"]


class SubmitGroups:
    """Per process (event loop): the submissions waiting for a group, by namespace."""

    def __init__(
        self,
        engine: sa.Engine,
        *,
        in_flight: int,
        observe: Callable[[int], None] = lambda size: None,
    ) -> None:
        if in_flight < 1:
            raise ValueError("in_flight must be at least 1")
        self.engine, self.in_flight, self.observe = engine, in_flight, observe
        self._waiting: dict[str, list[Waiting]] = {}  # oldest namespace first
        self._running: set[asyncio.Task[None]] = set()

    async def submit(self, request: SubmitRequest) -> SubmitResult:
        """``request``'s result; raises the error its submission alone would have raised."""
        if not groupable(request):
            return await anyio.to_thread.run_sync(service.submit, self.engine, request)
        answer: asyncio.Future[SubmitResult] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(request.namespace, []).append((request, answer))
        self._start_groups()
        return await answer

    @property
    def waiting(self) -> int:
        """Submissions waiting for a group."""
        return sum(len(queue) for queue in self._waiting.values())

    @property
    def running(self) -> int:
        """Groups in their transaction."""
        return len(self._running)

    def _start_groups(self) -> None:
        while len(self._running) < self.in_flight and self._waiting:
            namespace = next(iter(self._waiting))
            queued = self._waiting.pop(namespace)
            group, rest = queued[:SUB_BATCH], queued[SUB_BATCH:]
            if rest:  # back of the line: other namespaces' requests go first
                self._waiting[namespace] = rest
            task = asyncio.get_running_loop().create_task(self._run(namespace, group))
            self._running.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._start_groups()

    async def _run(self, namespace: str, group: list[Waiting]) -> None:
        requests = [request for request, _ in group]
        self.observe(len(group))
        try:
            answers: list[Answer] = await anyio.to_thread.run_sync(
                submit_group, self.engine, namespace, requests
            )
        except Exception as exc:  # the group failed as a whole (e.g. the database is down)
            answers = [exc] * len(group)
        except BaseException:  # cancelled (the server is stopping): no request waits forever
            for _, future in group:
                future.cancel()
            raise
        for (_, future), answer in zip(group, answers, strict=True):
            if future.done():  # its request was cancelled (client gone)
                continue
            if isinstance(answer, Exception):
                future.set_exception(answer)
            else:
                future.set_result(answer)
