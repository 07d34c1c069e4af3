"""The lease reaper loop: expires sessions, lapses leases, fails overdue tasks (Pulse rules)."""

from __future__ import annotations

import sqlalchemy as sa

from orbit.engines.liveness import ReplicaLiveness
from orbit.metrics.server import Metrics
from orbit_store.passes import ItemBackoff
from orbit_store.pulse.model import OUTCOME_TASK_STATES
from orbit_store.pulse.service import REAPER_LOOP, ReapReport, reap

LOOP = REAPER_LOOP


def reaper_pass(
    engine: sa.Engine,
    metrics: Metrics,
    namespace: str | None = None,
    liveness: ReplicaLiveness | None = None,
    backoff: ItemBackoff | None = None,
) -> ReapReport:
    """One reaper pass (``namespace`` restricts it, for tests and operations). A server's
    reaper first records that its replica is serving (``liveness``): leases are judged against
    the serving window that includes this replica (a gap it was part of shows as a gap)."""
    if liveness is not None:
        liveness.beat()
    report = reap(engine, namespace=namespace, backoff=backoff)
    metrics.count_item_errors(LOOP, report.errors)
    if report.leases_lapsed:
        metrics.lease_expiries.inc(report.leases_lapsed)
    if report.leases_graced:
        metrics.lease_outage_graces.inc(report.leases_graced)
    for decision in report.decisions:
        if decision.state in OUTCOME_TASK_STATES:
            metrics.outcomes.labels(decision.namespace, decision.queue, decision.state).inc()
    return report
