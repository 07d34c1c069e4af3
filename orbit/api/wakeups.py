"""In-process wake-ups for long-polling workers: a submission wakes the namespace's waiting
lease requests within milliseconds. Other replicas rely on the poll interval."""

from __future__ import annotations

import asyncio
from collections import defaultdict


class Wakeups:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: dict[str, set[asyncio.Future[None]]] = defaultdict(set)

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def waiter(self, namespace: str) -> asyncio.Future[None]:
        """Register before looking for work, so a submission in between is not missed."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters[namespace].add(future)
        future.add_done_callback(lambda f: self._waiters[namespace].discard(f))
        return future

    def notify(self, namespace: str) -> None:
        """Thread-safe: called from request threads after a submission commits."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake, namespace)

    def _wake(self, namespace: str) -> None:
        for future in list(self._waiters.get(namespace, ())):
            if not future.done():
                future.set_result(None)
