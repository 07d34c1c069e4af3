"""What a worker session claims for (its queues and handlers), remembered per process.

A lease request needs them before its first claim, to register its wake-up waiter. They are
fixed when the session registers, so each process reads them once per session instead of once
per lease request (a read and a thread hand-off each: ~4% of the server's CPU in a drain with
two slots per worker). Whether the session may still lease is not remembered: every claim
transaction reads the session under a shared lock and refuses an ended one
(``orbit_store.pulse.claim.claim.require_active_session``), so a session closed or revoked after it
was remembered is refused exactly as before, by its first claim.
"""

from __future__ import annotations

from collections import OrderedDict

from orbit_store.pulse.claim.claim import Claimant

#: Sessions remembered per process (least recently used forgotten first).
CAPACITY = 10_000


class Claimants:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._known: OrderedDict[tuple[str, str], Claimant] = OrderedDict()

    def get(self, namespace: str, session_id: str) -> Claimant | None:
        """Event loop only (no lock): the lease endpoint is async."""
        claimant = self._known.get((namespace, session_id))
        if claimant is not None:
            self._known.move_to_end((namespace, session_id))
        return claimant

    def put(self, namespace: str, session_id: str, claimant: Claimant) -> None:
        self._known[(namespace, session_id)] = claimant
        self._known.move_to_end((namespace, session_id))
        while len(self._known) > self.capacity:
            self._known.popitem(last=False)

    def __len__(self) -> int:
        return len(self._known)
