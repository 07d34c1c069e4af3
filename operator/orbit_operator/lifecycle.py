"""Startup and shutdown: Kopf's settings, the database, the Kubernetes client, metrics; the
liveness probe's extra report."""

from __future__ import annotations

from typing import Any

import kopf
import sqlalchemy as sa

from orbit.database import redacted
from orbit_store.clock import db_now
from orbit_store.errors import SchemaOutOfDate

from . import database
from .context import MEMO_KEY, Context, context_of
from .kube import Kube
from .logs import quiet_timers
from .metrics import OperatorMetrics
from .settings import ANNOTATION_PREFIX, CONFIG, ENV_DATABASE_URL, FINALIZER

# Watch streams are re-opened this often, so a silently dead connection cannot stall them.
WATCH_SERVER_TIMEOUT = 270
WATCH_CLIENT_TIMEOUT = 300


@kopf.on.startup()
def start(settings: kopf.OperatorSettings, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix=ANNOTATION_PREFIX
    )
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATION_PREFIX, key="last-handled-configuration"
    )
    settings.posting.reporting_component = "orbit-operator"
    quiet_timers()
    settings.watching.server_timeout = WATCH_SERVER_TIMEOUT
    settings.watching.client_timeout = WATCH_CLIENT_TIMEOUT
    if not CONFIG.database_url:
        raise kopf.PermanentError(
            f"no database: set {ENV_DATABASE_URL} (or `orbit operator --database-url`)"
        )
    try:
        engine = database.connect(CONFIG.database_url)
    except SchemaOutOfDate as exc:
        raise kopf.PermanentError(str(exc)) from exc
    metrics = OperatorMetrics()
    metrics.serve(CONFIG.metrics_host, CONFIG.metrics_port)
    memo[MEMO_KEY] = Context(CONFIG, engine, Kube.from_environment(), metrics)
    logger.info(
        "orbit operator started: database %s, workers use %s, resync every %gs",
        redacted(CONFIG.database_url),
        CONFIG.server_url,
        CONFIG.resync_seconds,
    )


@kopf.on.cleanup()
def stop(memo: kopf.Memo, **_: Any) -> None:
    ctx = memo.get(MEMO_KEY)
    if isinstance(ctx, Context):
        ctx.metrics.stop()
        ctx.kube.close()
        ctx.engine.dispose()


@kopf.on.probe(id="database")
def database_probe(memo: kopf.Memo, **_: Any) -> str:
    """Reported on the liveness endpoint; never fails it (a database outage is not cured by
    restarting the operator)."""
    try:
        engine = context_of(memo).engine
        with engine.connect() as conn:
            db_now(conn)
    except (kopf.TemporaryError, sa.exc.DBAPIError) as exc:
        return f"unavailable: {database.describe(exc)}"
    return "ok"
