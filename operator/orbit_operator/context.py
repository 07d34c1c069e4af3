"""What every handler needs, built once at startup and carried in Kopf's memo."""

from __future__ import annotations

from dataclasses import dataclass

import kopf
import sqlalchemy as sa

from .kube import Kube
from .metrics import OperatorMetrics
from .settings import OperatorConfig

MEMO_KEY = "orbit"


@dataclass(frozen=True)
class Context:
    config: OperatorConfig
    engine: sa.Engine
    kube: Kube
    metrics: OperatorMetrics


def context_of(memo: kopf.Memo) -> Context:
    ctx = memo.get(MEMO_KEY)
    if not isinstance(ctx, Context):
        raise kopf.TemporaryError("the operator is still starting", delay=1)
    return ctx
