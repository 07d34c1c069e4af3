"""In-process wake-ups for long-polling workers.

A waiting lease request registers what it can take (its session's queues and handlers). A
submission of a READY task wakes as many matching waiters as tasks it made READY — the ones
that have waited longest — not every waiter of the namespace. Work made ready anywhere else
(another server process or replica, the scheduler, Weave, a retry falling due, a permit or gate
released) is found by the process's shared probe (ready_watch.py), which wakes waiters through
:meth:`Wakeups.wake_kinds`; each waiter's own poll (``orbit_store.pulse.claim.probe``) is the
fallback.

A process about to stop answers its waiting requests at once (:meth:`Wakeups.release`): a
long poll would otherwise hold the shutdown for its whole wait.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import Set as AbstractSet
from dataclasses import dataclass


@dataclass(eq=False)
class Waiter:
    queues: frozenset[str]
    handlers: frozenset[str] | None  # None: any handler
    future: asyncio.Future[None]

    def runs(self, queue: str, handler: str) -> bool:
        return queue in self.queues and (self.handlers is None or handler in self.handlers)

    def kinds(self) -> set[tuple[str, str | None]]:
        """(queue, handler) pairs it can run; (queue, None) when it runs any handler."""
        if self.handlers is None:
            return {(queue, None) for queue in self.queues}
        return {(queue, handler) for queue in self.queues for handler in self.handlers}


class Wakeups:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        # Insertion-ordered: the first waiters registered are woken first.
        self._waiters: dict[str, dict[Waiter, None]] = defaultdict(dict)
        #: How many times the waiting requests were released (:meth:`release`): a request
        #: woken by one answers "nothing yet" instead of claiming.
        self.releases = 0
        #: Set by :meth:`stop`: every request, waiting or new, answers at once.
        self.stopping = False

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called on the event loop's own thread (the app's lifespan)."""
        self._loop, self._loop_thread = loop, threading.get_ident()

    def waiter(
        self, namespace: str, queues: list[str], handlers: list[str] | None
    ) -> asyncio.Future[None]:
        """Register before looking for work, so a submission in between is not missed."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = Waiter(
            frozenset(queues), None if handlers is None else frozenset(handlers), future
        )
        self._waiters[namespace][waiter] = None
        future.add_done_callback(lambda _f: self._waiters[namespace].pop(waiter, None))
        return future

    def release(self, *, stop: bool = False) -> None:
        """Thread-safe (a signal handler's thread): every request waiting now answers at once
        with nothing; with ``stop`` every later one too (the server is going away)."""
        if self._loop is None or self._loop.is_closed():
            self.stopping = self.stopping or stop
            return
        self._loop.call_soon_threadsafe(self._release, stop)

    def stop(self) -> None:
        self.release(stop=True)

    def _release(self, stop: bool) -> None:
        self.releases += 1
        self.stopping = self.stopping or stop
        for waiters in self._waiters.values():
            for waiter in list(waiters):
                if not waiter.future.done():
                    waiter.future.set_result(None)

    def notify(self, namespace: str, queue: str, handler: str, count: int = 1) -> None:
        """Thread-safe: called after ``count`` tasks became READY, from a request thread or
        from the event loop (an async route: then the waiters are woken at once, without the
        loop's self-pipe write and wake-up a hand-over from another thread costs). A process
        that serves no request (the supervisor of `--workers N`) has no loop: its tasks are
        found by the HTTP processes' probes."""
        if count <= 0 or self._loop is None or self._loop.is_closed():
            return
        if threading.get_ident() == self._loop_thread:
            self._wake(namespace, queue, handler, count)
        else:
            self._loop.call_soon_threadsafe(self._wake, namespace, queue, handler, count)

    def _wake(self, namespace: str, queue: str, handler: str, count: int) -> None:
        """Wake up to ``count`` waiters wanting (queue, handler), longest waiting first."""
        for waiter in list(self._waiters.get(namespace, {})):
            if count == 0:
                break
            if not waiter.future.done() and waiter.runs(queue, handler):
                waiter.future.set_result(None)
                count -= 1

    def waiting_wants(self) -> dict[str, set[tuple[str, str | None]]]:
        """Namespace -> what its waiting requests can run: (queue, handler) pairs, (queue, None)
        for requests running any handler (event loop only)."""
        waiting: dict[str, set[tuple[str, str | None]]] = {}
        for namespace, waiters in self._waiters.items():
            for waiter in waiters:
                if not waiter.future.done():
                    waiting.setdefault(namespace, set()).update(waiter.kinds())
        return waiting

    def wake_kinds(self, namespace: str, kinds: AbstractSet[tuple[str, str | None]]) -> int:
        """Wake every waiter of ``namespace`` with one of ``kinds`` (which the shared probe saw
        become claimable); returns how many (event loop only). All of them, not one per task:
        the probe does not count tasks."""
        woken = 0
        for waiter in list(self._waiters.get(namespace, {})):
            if not waiter.future.done() and not kinds.isdisjoint(waiter.kinds()):
                waiter.future.set_result(None)
                woken += 1
        return woken
