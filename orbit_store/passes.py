"""Per-item isolation in engine passes (ORBIT.md §3 "Per-item isolation in loops").

Every background pass — the reaper, the scheduler, the webhook sender, the Weave inbox consumer
and timer loop — handles each item (a lease, a schedule, a delivery, an inbox row, an instance)
in its own transaction of one namespace. An item that raises is logged naming the loop, the
namespace and the item, counted in ``errors``, and skipped: the pass goes on with the others,
and the next pass tries the item again. The engine loop turns ``errors`` into
``orbit_engine_item_errors_total{loop}``; an exception that escapes a whole pass (the database
is unreachable while finding the work) is ``orbit_engine_errors_total{loop}`` instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa

from orbit_store.db import run_transaction

log = logging.getLogger("orbit.passes")

T = TypeVar("T")


class ItemPass:
    """The items of one pass of loop ``loop``; safe to share between the pass's threads."""

    def __init__(self, engine: sa.Engine, loop: str) -> None:
        self.engine, self.loop = engine, loop
        self.errors = 0
        self._lock = threading.Lock()

    def call(
        self,
        work: Callable[[], T],
        *,
        namespace: str,
        item: str,
        on_error: Callable[[Exception], None] | None = None,
    ) -> T | None:
        """``work()`` (its own transactions); None when it raised — logged, counted and, with
        ``on_error``, recorded against the item (a backoff) before the pass goes on."""
        try:
            return work()
        except Exception as exc:
            self.failed(exc, namespace=namespace, item=item, on_error=on_error)
            return None

    def failed(
        self,
        exc: Exception,
        *,
        namespace: str,
        item: str,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        """Log and count ``exc`` against ``item`` — also for a batch that left one item out."""
        with self._lock:
            self.errors += 1
        log.error(
            "%s: %s in namespace %s failed; skipped, the pass goes on",
            self.loop,
            item,
            namespace,
            exc_info=exc,
            extra={"loop": self.loop, "namespace": namespace, "item": item},
        )
        if on_error is not None:
            try:
                on_error(exc)
            except Exception:
                log.exception("%s: could not record the failure of %s", self.loop, item)

    def run(
        self,
        work: Callable[[sa.Connection], T],
        *,
        namespace: str,
        item: str,
        on_error: Callable[[Exception], None] | None = None,
    ) -> T | None:
        """One transaction ``work(conn)`` for one item (see :meth:`call`)."""
        return self.call(
            lambda: run_transaction(self.engine, work),
            namespace=namespace,
            item=item,
            on_error=on_error,
        )
