"""What a worker's next lease request asks for: how many slots, which handlers' grants the
server should start with the lease, and whether finished attempts' reports ride along.

**Lease with start** (worker protocol 3): the request names the registered handlers declared
``safe`` in ``start_handlers``; the server starts their grants in the claim transaction and
answers them ``started`` (only tasks whose own class is safe too), so the attempt runs without
a start call (one round trip and one server transaction less per task). Unsafe handlers keep the
start call: a grant that never reached this worker must not count as having run. A server before
protocol 3 refuses the unknown field (422 naming ``start_handlers``): the worker notices once,
asks without it from then on, and starts every grant with a call — each grant's own ``started``
flag decides.

**Fuller requests**: under a backlog, slots free one at a time, and asking for one task per
request costs a claim transaction and a request per task — and a request and a transaction cost
the server far more than a task in them. So after a lease that got every
task it asked for (a backlog: more are waiting), the next request waits up to ``linger`` seconds
for all the worker's slots to be free and asks for them together; after one that got fewer (no
backlog: the queue keeps up), the next asks as soon as a slot is free, so a task arriving is not
held back. A worker holding nothing asks at once either way (idle dispatch latency unchanged).

**Reports ride along** (worker protocol 4): once a slot is free, the outcome reports waiting to
be sent are held for the coming request (``report_buffer.CallBatcher.hold``), which carries
them; a server before protocol 4 refuses the field (422 naming ``reports``), and the worker then
sends its reports by their own call, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ValidationFailed
from .live import LiveSet
from .report_buffer import CallBatcher, Pending

log = logging.getLogger("orbit_sdk.worker")

#: The server's limit of tasks per lease request.
MAX_LEASE_BATCH = 100
DEFAULT_LEASE_LINGER = 0.01
START_FIELD = "start_handlers"
REPORTS_FIELD = "reports"
#: How long past its linger a lease request may keep the reports it is to carry.
HOLD_MARGIN = 0.05


class LeaseAsk:
    """Shapes the lease requests of one worker (``handlers``: name → registered handler with a
    ``safety``, shared with the worker so ``serve_only`` is seen)."""

    def __init__(
        self,
        handlers: Mapping[str, Any],
        concurrency: int,
        *,
        linger: float = DEFAULT_LEASE_LINGER,
        with_start: bool = True,
    ) -> None:
        self.handlers = handlers
        self.concurrency = concurrency
        self.linger = linger
        self.with_start = with_start  # False: off, or the server predates protocol 3
        self.with_reports = True  # False once the server refused them (before protocol 4)
        #: Whether the last lease got all it asked for (more tasks are likely waiting).
        self.backlog = False

    def start_handlers(self) -> list[str] | None:
        """The safe handlers whose grants the server may start (None: ask for leases only)."""
        if not self.with_start:
            return None
        safe = sorted(name for name, h in self.handlers.items() if h.safety == "safe")
        return safe or None

    @property
    def want(self) -> int:
        """Free slots worth waiting (up to ``linger``) for: all under a backlog, else one."""
        return min(self.concurrency, MAX_LEASE_BATCH) if self.backlog else 1

    def free_slots(
        self, live: LiveSet, done: Callable[[], bool], reports: CallBatcher | None = None
    ) -> int:
        """Block until a slot is free, then under a backlog briefly for a full batch; how many
        to ask for. Meanwhile ``reports`` are held for the request: an attempt's report frees
        its slot, so each is held at most the linger and a margin."""
        if reports is not None and self.with_reports:
            reports.hold(self.linger + HOLD_MARGIN)
        free = live.wait_for_free(self.concurrency, done, want=self.want, linger=self.linger)
        return min(free, MAX_LEASE_BATCH)

    def riders(self, reports: CallBatcher | None) -> list[Pending]:
        """The reports the coming lease request carries (none without protocol 4)."""
        return reports.take() if reports is not None and self.with_reports else []

    def granted(self, asked: int, got: int) -> None:
        """Note a lease's answer: ``got`` of the ``asked`` tasks (see the module: backlog)."""
        self.backlog = got >= asked > 0

    def refused_reports(self, exc: ValidationFailed) -> bool:
        """True if ``exc`` refused the reports field (an older server): reports by their own
        call from now on."""
        # The field itself, not one of its items (an item's own fault is answered on its own
        # once the flusher sends the reports by their call).
        if not self.with_reports or not any(f == REPORTS_FIELD for f, _ in exc.fields):
            return False
        log.info("server takes no reports on the lease (worker protocol 4); reporting by calls")
        self.with_reports = False
        return True

    def refused_start(self, exc: ValidationFailed) -> bool:
        """True if ``exc`` refused the start field (an older server): leases only from now."""
        if not self.with_start or not any(f.startswith(START_FIELD) for f, _ in exc.fields):
            return False
        log.info("server has no lease with start (worker protocol 3); starting with calls")
        self.with_start = False
        return True
