"""This server replica's liveness beat (``orbit_store.replicas``): the reaper beats before
every pass, so a replica never judges leases by a window in which it did not count itself."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid

import sqlalchemy as sa

from orbit_store import replicas
from orbit_store.db import run_transaction

log = logging.getLogger("orbit.engines")


class ReplicaLiveness:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.replica_id: str | None = None
        # The reaper and the liveness loop both beat: one at a time, so a silence is
        # answered by one new row, not two.
        self._lock = threading.Lock()

    def start(self) -> None:
        """Record that this replica begins serving (a new row: a restart shows as a gap)."""
        replica_id = str(uuid.uuid4())
        began = run_transaction(
            self.engine,
            lambda conn: replicas.record_start(
                conn, replica_id=replica_id, host=socket.gethostname(), pid=os.getpid()
            ),
        )
        self.replica_id = replica_id
        log.info("replica serving", extra={"replica_id": replica_id, "since": began.isoformat()})

    def beat(self) -> None:
        with self._lock:
            self._beat()

    def _beat(self) -> None:
        replica_id = self.replica_id
        if replica_id is None:
            self.start()
            return
        if not run_transaction(
            self.engine, lambda conn: replicas.beat(conn, replica_id=replica_id)
        ):
            log.warning(
                "replica was silent longer than %.0fs; recording a new serving stretch",
                replicas.SILENCE_SECONDS,
                extra={"replica_id": replica_id},
            )
            self.start()
