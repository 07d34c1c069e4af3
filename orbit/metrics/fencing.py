"""Restore-fence gauges, read from MySQL by the gauge loop (orbit/metrics/gauges.py): whether a
restore fence keeps dispatch closed (alert OrbitDispatchFenced), and the current restore epoch."""

from __future__ import annotations

import sqlalchemy as sa
from prometheus_client.core import Metric

from orbit.metrics.gauges import gauge
from orbit_store.fencing import fence_state


def fence_gauges(conn: sa.Connection) -> list[Metric]:
    state = fence_state(conn)
    return [
        gauge(
            "orbit_dispatch_fenced",
            "1 while a restore fence keeps dispatch closed (nothing is leased until "
            "`orbit admin restore-fence --reopen`), else 0.",
            [],
            [([], 0.0 if state.dispatch_open else 1.0)],
        ),
        gauge(
            "orbit_restore_epoch",
            "The current restore epoch (0 before the first fence); every grant records it.",
            [],
            [([], float(state.epoch))],
        ),
    ]
