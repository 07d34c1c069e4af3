"""The promoter loop: puts SCHEDULED tasks that fell due on their path in every namespace and
hands free concurrency permits to blocked tasks (claims promote their own queues' due tasks
too; this covers namespaces nobody is claiming from)."""

from __future__ import annotations

import sqlalchemy as sa

from orbit.metrics import Metrics
from orbit_store.pulse.service import PromoteReport, promote


def promoter_pass(engine: sa.Engine, metrics: Metrics) -> PromoteReport:
    report = promote(engine)
    if report.errors:
        metrics.engine_item_errors.labels("promoter").inc(report.errors)
    return report
