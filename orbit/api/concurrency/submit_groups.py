"""Group commit of single submissions: task submissions and workflow starts.

Each ``POST /v1/namespaces/{ns}/tasks`` (or ``…/workflows``) hands its request to
:class:`SubmitGroups` and waits for its own answer. What a group is made of — which requests
go alone, how a group runs in one transaction, how large it may be — is a :class:`GroupKind`:
:data:`TASKS` or :data:`STARTS`. At most ``in_flight`` groups
(``ServerSettings.submit_transactions``) of a kind run at once, each one transaction in a
thread; requests that arrive while they run wait and go together in the next group of their
namespace, up to the kind's ``max_size`` requests. An
idle server therefore submits each request alone at once (nothing added to its latency), and
under concurrent submitters the requests that queue behind a running transaction share the next
one: one commit, one key lookup and multi-row INSERTs instead of a transaction each — as a
database's group commit shares one fsync.

A transaction's thread does not hand back between groups: when its group is answered it takes the
next waiting group itself, and only when none is waiting does it return to its pool. Under a
steady stream of submissions the transactions so follow each other without a trip through the
event loop and a thread hand-off each, which would otherwise be a large share of a group's cycle.
Each request is answered on its own event loop, once per group and loop.

Every request is answered as it would have been alone (``orbit_store.pulse.submit_group``,
``orbit_store.weave.start_group``).
A request whose client has gone away is still submitted: like a lone submission whose answer
was lost, the client learns its fate by retrying under the same key.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import anyio
import sqlalchemy as sa

from orbit_store.pulse import service
from orbit_store.pulse.model import SubmitResult
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.pulse.submit.bulk import SUB_BATCH
from orbit_store.pulse.submit_group import groupable, submit_group
from orbit_store.weave import service as weave_service
from orbit_store.weave.start import StartRequest
from orbit_store.weave.start_group import GROUP_SIZE, Started, start_group


class Namespaced(Protocol):
    @property
    def namespace(self) -> str: ...


Req = TypeVar("Req", bound=Namespaced)
Res = TypeVar("Res")


@dataclass(frozen=True)
class GroupKind(Generic[Req, Res]):
    """What groups of one kind of request are: ``run`` answers a group (one namespace, at most
    ``max_size``) in one transaction, each request's result or error in order; a request
    ``groupable`` refuses is answered by ``alone`` (raising its error)."""

    run: Callable[[sa.Engine, str, Sequence[Req]], list[Res | Exception]]
    alone: Callable[[sa.Engine, Req], Res]
    max_size: int
    groupable: Callable[[Req], bool] = lambda request: True


TASKS: GroupKind[SubmitRequest, SubmitResult] = GroupKind(
    submit_group, service.submit, SUB_BATCH, groupable
)
STARTS: GroupKind[StartRequest, Started] = GroupKind(start_group, weave_service.start, GROUP_SIZE)


class SubmitGroups(Generic[Req, Res]):
    """Per process and kind: the requests waiting for a group, by namespace, and the threads
    running their transactions (at most ``in_flight``, from a pool of their own)."""

    def __init__(
        self,
        engine: sa.Engine,
        kind: GroupKind[Req, Res],
        *,
        in_flight: int,
        observe: Callable[[int], None] = lambda size: None,
    ) -> None:
        if in_flight < 1:
            raise ValueError("in_flight must be at least 1")
        self.engine, self.kind, self.in_flight, self.observe = engine, kind, in_flight, observe
        # Shared with the transactions' threads: every read and change holds the lock.
        self._lock = threading.Lock()
        self._waiting: dict[str, list[tuple[Req, asyncio.Future[Res]]]] = {}  # oldest first
        self._threads = 0  # threads taking groups (each runs one transaction at a time)
        self._in_transaction = 0
        # Idle threads wait in the pool for the next burst; they end with the pool (when the
        # app that made it is gone).
        self._pool = ThreadPoolExecutor(in_flight, thread_name_prefix="orbit-submit-groups")

    async def submit(self, request: Req) -> Res:
        """``request``'s result; raises the error it would have raised alone."""
        if not self.kind.groupable(request):
            return await anyio.to_thread.run_sync(self.kind.alone, self.engine, request)
        answer: asyncio.Future[Res] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._waiting.setdefault(request.namespace, []).append((request, answer))
            start = self._threads < self.in_flight
            self._threads += start
        if start:
            self._pool.submit(self._run_groups)
        return await answer

    @property
    def waiting(self) -> int:
        """Submissions waiting for a group."""
        with self._lock:
            return sum(len(queue) for queue in self._waiting.values())

    @property
    def running(self) -> int:
        """Groups in their transaction."""
        return self._in_transaction

    def _run_groups(self) -> None:
        """In a pool thread: one group's transaction after the other while groups wait."""
        try:
            while (answered := self._run_next_group()) is not None:
                _answer(*answered)
        except BaseException:  # leaving early: _take, which counts a thread out, did not
            with self._lock:
                self._threads -= 1
            raise

    def _run_next_group(
        self,
    ) -> tuple[list[tuple[Req, asyncio.Future[Res]]], list[Res | Exception]] | None:
        """The next group and its answers; None when no group waits."""
        taken = self._take()
        if taken is None:
            return None
        namespace, group = taken
        try:
            self.observe(len(group))
            answers = self.kind.run(self.engine, namespace, [request for request, _ in group])
        except Exception as exc:  # the group failed as a whole (the database is down)
            answers = [exc for _ in group]
        finally:
            with self._lock:
                self._in_transaction -= 1
        return group, answers

    def _take(self) -> tuple[str, list[tuple[Req, asyncio.Future[Res]]]] | None:
        """The next group (oldest namespace first, at most ``max_size`` requests), or None:
        then this thread is counted out in the same breath, so a submission arriving just
        after finds a thread slot free and starts one."""
        with self._lock:
            if not self._waiting:
                self._threads -= 1
                return None
            namespace = next(iter(self._waiting))
            queued = self._waiting.pop(namespace)
            size = self.kind.max_size
            group, rest = queued[:size], queued[size:]
            if rest:  # back of the line: other namespaces' requests go first
                self._waiting[namespace] = rest
            self._in_transaction += 1
            return namespace, group


def _answer(group: list[tuple[Req, asyncio.Future[Res]]], answers: list[Res | Exception]) -> None:
    """From the group's thread: each request's answer, handed to the event loop it waits on."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Res], Res | Exception]]]
    by_loop = {}
    for (_, future), answer in zip(group, answers, strict=True):
        by_loop.setdefault(future.get_loop(), []).append((future, answer))
    for loop, pairs in by_loop.items():
        # A closed event loop refuses (RuntimeError): nobody waits there for these answers.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, pairs)


def _settle(pairs: list[tuple[asyncio.Future[Res], Res | Exception]]) -> None:
    """On the event loop: each answer (a request whose client went away is skipped)."""
    for future, answer in pairs:
        if future.done():  # its request was cancelled (client gone)
            continue
        if isinstance(answer, Exception):
            future.set_exception(answer)
        else:
            future.set_result(answer)
