"""The threads a worker runs its attempts on, kept for the next attempt instead of one per attempt.

A busy worker runs many short attempts: starting a thread for each was a visible share of its
CPU. A thread that finishes an attempt waits up to ``idle_seconds`` for the next and then
exits, so a worker that was busy once does not keep its peak of threads. There are never more
threads than attempts held at once (the worker's slots bound those). The threads are daemons,
as the per-attempt ones were: a handler that never returns must not keep the process alive
after the drain has given up on it.

``concurrent.futures.ThreadPoolExecutor`` is not used because its threads are joined when the
interpreter exits — a stuck handler would hang the worker's exit.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

#: Seconds an idle attempt thread waits for another attempt before it exits.
IDLE_SECONDS = 30.0


class AttemptThreads(Generic[T]):
    """Runs ``run(item)`` for each submitted item on an idle thread, or on a new one."""

    def __init__(self, run: Callable[[T], None], *, idle_seconds: float = IDLE_SECONDS) -> None:
        self._run, self._idle_seconds = run, idle_seconds
        self._handed: queue.SimpleQueue[T] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self.idle = 0  # threads waiting for an item
        self.alive = 0  # threads started and not yet exited

    def submit(self, item: T) -> None:
        with self._lock:
            if self.idle:  # the item is that thread's: it no longer counts as idle
                self.idle -= 1
                self._handed.put(item)
                return
            self.alive += 1
        thread = threading.Thread(target=self._serve, args=(item,), name="orbit-attempt")
        thread.daemon = True
        thread.start()

    def _serve(self, item: T) -> None:
        while True:
            self._run(item)
            with self._lock:
                self.idle += 1
            try:
                item = self._handed.get(timeout=self._idle_seconds)
            except queue.Empty:
                with self._lock:
                    try:  # handed one between the timeout and the lock: it is ours
                        item = self._handed.get_nowait()
                    except queue.Empty:
                        self.idle -= 1
                        self.alive -= 1
                        return
