"""Wake-ups across processes and replicas: one shared probe per process while requests wait.

The in-process wake-ups (wakeups.py) only hear about submissions made to *this* process. Work
also becomes ready elsewhere: a submission to another server process or replica, a schedule
firing, Weave making a step's task READY, a retry's backoff or a delay ending, a permit or gate
released. While lease requests wait here, this watch asks the database every ``interval``
(~75 ms) — once per namespace with waiters, whatever their number — which of the waiters' kinds of
work ((queue, handler) pairs they can run) a claim could serve now
(``orbit_store.pulse.claim.readiness``: one index read per kind, so the cost does not grow with the
backlog). When a kind becomes served that was not at the previous probe, or its head — the task a
claim would take first — is another than at the previous probe, every waiter with that kind is woken
and claims (SKIP LOCKED: one gets each task, the others find nothing and wait again).

Edge-triggered on purpose: a kind that stays served by the same head (its task is READY but a
claim still cannot take it, e.g. a placement rule no waiting worker meets) wakes nobody again,
so the watch never turns into a claim loop; each waiter's own poll (``lease_poll_interval``)
remains the fallback for such cases. The head matters under a steady trickle into another
process: by each probe the task seen at the last one was taken and a new one is READY, so
"something ready" never turns off — without the head nobody would be woken until their own
poll, which with several server processes would be most of a task's dispatch time. With no
waiter the watch runs no query at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import anyio
import sqlalchemy as sa

from orbit.api.concurrency.wakeups import Wakeups
from orbit_store.pulse.claim.readiness import WorkKind, readiness

log = logging.getLogger("orbit.api.concurrency.ready_watch")

LOOP = "wake_probe"
#: Default seconds between probes while requests wait: the cross-process dispatch latency bound.
DEFAULT_INTERVAL = 0.075
#: A kind not served at the last probe (its head there is neither an id nor None).
_UNSEEN = object()


class ReadyWatch:
    def __init__(
        self,
        engine: sa.Engine,
        wakeups: Wakeups,
        interval: float = DEFAULT_INTERVAL,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.engine, self.wakeups, self.interval = engine, wakeups, interval
        self.on_error = on_error
        #: namespace -> the kinds served at the last probe, with their heads (None: due only)
        self._seen: dict[str, dict[WorkKind, str | None]] = {}
        self.probes = 0  # probes run (each a few index reads), for tests and the bench

    async def run(self) -> None:
        """Until cancelled (the app's lifespan owns the task)."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.probe_once()
            except Exception:
                log.exception("wake-up probe failed")
                if self.on_error is not None:
                    self.on_error(LOOP)
                await asyncio.sleep(1.0)  # the database is likely away: do not spin

    async def probe_once(self) -> int:
        """Probe every namespace with waiters; returns how many waiters were woken."""
        waiting = self.wakeups.waiting_wants()
        for namespace in list(self._seen):
            if namespace not in waiting:  # nobody waits there any more: forget what was seen
                del self._seen[namespace]
        woken = 0
        for namespace, kinds in waiting.items():
            served = await anyio.to_thread.run_sync(self._read, namespace, kinds)
            self.probes += 1
            seen = self._seen.get(namespace, {})
            newly = {kind for kind, head in served.items() if seen.get(kind, _UNSEEN) != head}
            self._seen[namespace] = served
            if newly:
                woken += self.wakeups.wake_kinds(namespace, newly)
        return woken

    def _read(self, namespace: str, kinds: set[WorkKind]) -> dict[WorkKind, str | None]:
        with self.engine.connect() as conn:
            found = readiness(conn, namespace, kinds)
        return {kind: found.heads.get(kind) for kind in found.satisfied}
