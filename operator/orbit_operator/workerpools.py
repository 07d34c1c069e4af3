"""WorkerPool → a Deployment of `orbit worker` pods (orbit.reconcile.workerpool builds it), owned
by the pool and sized from the backlog MySQL measures; the status shows ready pods, live
workers and the backlog. Its timer also repairs the pool's pod registrations (events missed,
or pods deleted while the operator was down)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from orbit.reconcile.resource import (
    INVALID_SPEC,
    RECONCILED,
    InvalidSpec,
    NotDeclaredYet,
    Resource,
)
from orbit.reconcile.workerpool import desired_deployment, desired_replicas, status_of

from . import database
from .adapter import (
    Failure,
    admit_body,
    invalid,
    not_declared_yet,
    raise_for,
    reserved,
    unavailable,
)
from .context import Context, context_of
from .database import DatabaseUnavailable
from .kube import KubeError
from .pods import sync_pool_pods
from .settings import CONFIG, GROUP, SCALED_AT_ANNOTATION, VERSION
from .status import TRUE, Status, write_ready

KIND, PLURAL = "WorkerPool", "workerpools"
# What the API server answers when the Deployment built from the spec is not acceptable.
REFUSED = (400, 422)

log = logging.getLogger("orbit.operator.workerpools")


def _parse_time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _current(deployment: Mapping[str, Any] | None) -> tuple[int | None, dt.datetime | None]:
    """The Deployment's replicas, and when the operator last changed them."""
    if deployment is None:
        return None, None
    annotations = deployment["metadata"].get("annotations") or {}
    replicas = (deployment.get("spec") or {}).get("replicas")
    return replicas, _parse_time(annotations.get(SCALED_AT_ANNOTATION))


def sync_pool(ctx: Context, body: kopf.Body, out: Status, logger: kopf.Logger) -> Failure | None:
    """Apply the pool's Deployment at the size the backlog asks for; write the status."""
    try:
        refused = reserved(ctx, body)
        if refused is not None:
            raise refused
        resource = admit_body(KIND, body)
        counts = database.run(ctx.engine, lambda conn: status_of(conn, resource))
    except NotDeclaredYet as exc:
        return not_declared_yet(ctx, KIND, body, out, exc, logger)
    except InvalidSpec as exc:
        return invalid(ctx, KIND, body, out, exc, logger)
    except DatabaseUnavailable as exc:
        return unavailable(ctx, KIND, body, out, exc, logger)
    deployment = ctx.kube.get("apps/v1", "deployments", resource.namespace, resource.name)
    current, scaled_at = _current(deployment)
    now = dt.datetime.now(dt.UTC)
    wanted = desired_replicas(resource.spec, counts["backlog"], current, scaled_at, now)
    if wanted != current or scaled_at is None:
        scaled_at = now
    desired = _owned_deployment(resource, body, wanted, scaled_at, ctx.config.server_url)
    try:
        applied = ctx.kube.apply(desired, "apps/v1", "deployments")
    except KubeError as exc:
        if exc.status not in REFUSED:
            raise  # unreachable or forbidden: Kopf retries and logs it
        refused = InvalidSpec("spec.template", f"the Deployment was refused: {exc}")
        return invalid(ctx, KIND, body, out, refused, logger)
    ready = int((applied.get("status") or {}).get("readyReplicas") or 0)
    if wanted != current:
        logger.info(
            "Deployment %s scaled from %s to %d replicas (%d waiting)",
            resource.name,
            "nothing" if current is None else current,
            wanted,
            counts["backlog"],
        )
    write_ready(
        out,
        body,
        KIND,
        status=TRUE,
        reason=RECONCILED,
        message=f"{wanted} replicas for {counts['backlog']} waiting tasks; {ready} ready",
        applied=True,
        fields={**counts, "readyReplicas": ready, "desiredReplicas": wanted},
    )
    ctx.metrics.reconciled(KIND, RECONCILED)
    return None


def _owned_deployment(
    resource: Resource, owner: kopf.Body, replicas: int, scaled_at: dt.datetime, server_url: str
) -> dict[str, Any]:
    deployment = desired_deployment(resource, replicas, server_url)
    annotations = deployment["metadata"].setdefault("annotations", {})
    annotations[SCALED_AT_ANNOTATION] = scaled_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    kopf.adopt(deployment, owner=owner)
    return deployment


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
def reconcile_workerpool(
    body: kopf.Body,
    patch: kopf.Patch,
    logger: kopf.Logger,
    memo: kopf.Memo,
    retry: int,
    **_: Any,
) -> None:
    ctx = context_of(memo)
    raise_for(sync_pool(ctx, body, patch.status, logger), ctx, retry)


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL,
    interval=CONFIG.autoscale_seconds,
    initial_delay=CONFIG.autoscale_seconds,
)
def autoscale_workerpool(
    body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: kopf.Memo, **_: Any
) -> None:
    """Re-size from the backlog, repair the Deployment, refresh the status."""
    if body.metadata.get("deletionTimestamp"):
        return
    ctx = context_of(memo)
    failure = sync_pool(ctx, body, patch.status, logger)
    if failure is None or failure.reason != INVALID_SPEC:
        try:
            sync_pool_pods(ctx, str(body.metadata.namespace), str(body.metadata.name))
        except DatabaseUnavailable as exc:
            log.warning("%s", exc)
