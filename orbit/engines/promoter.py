"""The promoter loop: puts SCHEDULED tasks that fell due on their path in every namespace and
hands free concurrency permits to blocked tasks (claims promote their own queues' due tasks
too; this covers namespaces nobody is claiming from)."""

from __future__ import annotations

import sqlalchemy as sa

from orbit.metrics.server import Metrics
from orbit_store.pulse.service import PROMOTER_LOOP, PromoteReport, promote

LOOP = PROMOTER_LOOP


def promoter_pass(engine: sa.Engine, metrics: Metrics) -> PromoteReport:
    report = promote(engine)
    metrics.count_item_errors(LOOP, report.errors)
    return report
