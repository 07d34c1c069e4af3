"""The one adapter every MySQL-backed kind goes through (Queue, Quota, Credential,
WorkflowDefinition):

body → admitted :class:`Resource` → the kind's ``reconcile``/``delete`` in one store transaction →
``.status``. What went wrong comes back as a :class:`Failure`, which a Kopf handler turns into
Kopf's retry semantics (:func:`raise_for`) and a timer only records.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf
import sqlalchemy as sa

from orbit.reconcile.admission import admit
from orbit.reconcile.audited import delete_audited, reconcile_audited
from orbit.reconcile.kinds import KINDS, SecretLookup
from orbit.reconcile.queue import OPERATOR_ACTOR
from orbit.reconcile.reserved import OPERATOR_HOW, refusal
from orbit.reconcile.resource import (
    API_VERSION,
    DATABASE_UNAVAILABLE,
    INVALID_SPEC,
    Deletion,
    InvalidSpec,
    NotDeclaredYet,
    Resource,
    Superseded,
)
from orbit_store.errors import Conflict, InvalidRequest

from . import database
from .context import Context
from .database import DatabaseUnavailable
from .status import FALSE, TRUE, UNKNOWN, Status, generation_of, is_news, write_ready

Logger = logging.Logger | logging.LoggerAdapter[Any]
ERROR = "Error"


@dataclass(frozen=True)
class Failure:
    reason: str
    message: str
    temporary: bool  # retry with a delay (database, unfinished tasks) or wait for a new spec
    waiting: bool = False  # waits on the workload (unfinished tasks): retry at the resync pace
    backoff: bool = False  # waits for another resource: retry soon, then less and less often


def no_secrets(_namespace: str, _name: str) -> dict[str, str] | None:
    return None


def reserved(ctx: Context, body: Mapping[str, Any]) -> InvalidSpec | None:
    """Why this operator may not declare the body's resource: its namespace is the reserved
    system namespace and the operator does not run there (orbit/reconcile/reserved.py)."""
    namespace = str((body.get("metadata") or {}).get("namespace"))
    trusted = ctx.config.own_namespace == namespace
    return refusal(namespace, trusted=trusted, how=OPERATOR_HOW)


def admit_body(kind: str, body: Mapping[str, Any]) -> Resource:
    """Default and validate the body's spec as the API server does (KMock and `orbit apply`
    have no API server; in a cluster this is a no-op re-check). Raises InvalidSpec."""
    meta = body.get("metadata") or {}
    obj: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
    }
    if body.get("spec") is not None:
        obj["spec"] = copy.deepcopy(dict(body["spec"]))
    admitted, refusals = admit(obj)
    if refusals:
        first, rest = refusals[0], refusals[1:]
        message = "; ".join([first.message] + [f"{r.path or '<root>'}: {r.message}" for r in rest])
        raise InvalidSpec(first.path or "spec", message)
    return Resource(
        kind=kind,
        namespace=str(meta.get("namespace")),
        name=str(meta.get("name")),
        spec=admitted.get("spec") or {},
        generation=generation_of(body),
        source="operator",
    )


def invalid(
    ctx: Context, kind: str, body: Mapping[str, Any], out: Status, exc: Exception, logger: Logger
) -> Failure:
    """Nothing was written: Ready=False, InvalidSpec, with the field and what to do."""
    message = str(exc)
    if is_news(body, FALSE, INVALID_SPEC, message):
        logger.warning("spec not applied: %s", message)
    write_ready(out, body, kind, status=FALSE, reason=INVALID_SPEC, message=message, applied=False)
    ctx.metrics.error(kind, INVALID_SPEC)
    return Failure(INVALID_SPEC, message, temporary=False)


def not_declared_yet(
    ctx: Context,
    kind: str,
    body: Mapping[str, Any],
    out: Status,
    exc: NotDeclaredYet,
    logger: Logger,
) -> Failure:
    """Nothing was written: Ready=False with a reason and message saying what the resource
    waits for (a Queue applied in the same batch, later); retried with a backoff."""
    if is_news(body, FALSE, exc.reason, exc.message):
        logger.info("waiting: %s", exc.message)
    write_ready(
        out, body, kind, status=FALSE, reason=exc.reason, message=exc.message, applied=False
    )
    ctx.metrics.error(kind, exc.reason)
    return Failure(exc.reason, exc.message, temporary=True, backoff=True)


def unavailable(
    ctx: Context,
    kind: str,
    body: Mapping[str, Any],
    out: Status,
    exc: DatabaseUnavailable,
    logger: Logger,
) -> Failure:
    """Ready=Unknown, DatabaseUnavailable: what MySQL has stays in effect; retried."""
    message = f"{exc}; retrying every {ctx.config.retry_seconds:g}s"
    if is_news(body, UNKNOWN, DATABASE_UNAVAILABLE, message):
        logger.warning("%s", message)
    write_ready(
        out, body, kind, status=UNKNOWN, reason=DATABASE_UNAVAILABLE, message=message, applied=False
    )
    ctx.metrics.error(kind, DATABASE_UNAVAILABLE)
    return Failure(DATABASE_UNAVAILABLE, message, temporary=True)


def reconcile_resource(
    ctx: Context,
    kind: str,
    body: Mapping[str, Any],
    out: Status,
    logger: Logger,
    *,
    secrets: SecretLookup = no_secrets,
) -> Failure | None:
    """Make MySQL match the body's spec and write the status into ``out`` (timed)."""
    with ctx.metrics.durations.labels(kind).time():
        return _reconcile(ctx, kind, body, out, logger, secrets)


def _reconcile(
    ctx: Context,
    kind: str,
    body: Mapping[str, Any],
    out: Status,
    logger: Logger,
    secrets: SecretLookup,
) -> Failure | None:
    handlers = KINDS[kind]
    try:
        refused = reserved(ctx, body)
        if refused is not None:
            raise refused
        resource = admit_body(kind, body)
        outcome = database.run(
            ctx.engine,
            lambda conn: reconcile_audited(conn, handlers, resource, secrets, actor=OPERATOR_ACTOR),
        )
    except Superseded as exc:
        logger.debug("%s", exc)  # a stale body (a timer's): the newer one is in effect
        return None
    except NotDeclaredYet as exc:
        return not_declared_yet(ctx, kind, body, out, exc, logger)
    except (InvalidSpec, InvalidRequest, Conflict) as exc:
        return invalid(ctx, kind, body, out, exc, logger)
    except DatabaseUnavailable as exc:
        return unavailable(ctx, kind, body, out, exc, logger)
    except Exception:
        ctx.metrics.error(kind, ERROR)
        raise
    message = outcome.message or f"{kind} is in effect"
    status = TRUE if outcome.ready else FALSE
    news = is_news(body, status, outcome.reason, message)
    write_ready(
        out,
        body,
        kind,
        status=status,
        reason=outcome.reason,
        message=message,
        applied=True,
        fields=outcome.status,
    )
    ctx.metrics.reconciled(kind, outcome.reason)
    if not outcome.ready:
        ctx.metrics.error(kind, outcome.reason)
        if news:
            logger.warning("%s: %s", outcome.reason, message)
    elif outcome.changed:
        logger.info("spec applied to MySQL (%s)", message)
    return None


def delete_resource(
    ctx: Context, kind: str, body: Mapping[str, Any], out: Status, logger: Logger
) -> Failure | None:
    """Remove what the resource declared from MySQL; a Failure keeps the finalizer. A resource
    this operator refused as reserved never declared anything: its deletion touches nothing
    (the system namespace's rows are not a stray resource's to delete)."""
    handlers = KINDS[kind]
    meta = body.get("metadata") or {}
    namespace, name = str(meta.get("namespace")), str(meta.get("name"))
    if reserved(ctx, body) is not None:
        logger.info(
            "%s %s/%s was never applied (reserved namespace): nothing to delete",
            kind,
            namespace,
            name,
        )
        return None
    try:
        resource: Resource | None = admit_body(kind, body)
    except InvalidSpec:
        resource = None  # never applied as it is: delete by what MySQL holds

    def work(conn: sa.Connection) -> Deletion:
        target = resource or Resource(
            kind, namespace, name, handlers.stored_spec(conn, namespace, name), source="operator"
        )
        reason = f"{kind} {namespace}/{name} deleted in Kubernetes"
        return delete_audited(conn, handlers, target, actor=OPERATOR_ACTOR, reason=reason)

    try:
        deletion = database.run(ctx.engine, work)
    except DatabaseUnavailable as exc:
        return unavailable(ctx, kind, body, out, exc, logger)
    if not deletion.done:
        write_ready(
            out,
            body,
            kind,
            status=FALSE,
            reason=deletion.reason,
            message=deletion.message,
            applied=False,
        )
        return Failure(deletion.reason, deletion.message, temporary=True, waiting=True)
    logger.info("%s", deletion.message)
    return None


def retry_delay(failure: Failure, ctx: Context, retry: int) -> float:
    """Seconds before the next try: a deletion waiting on tasks at the resync pace; a resource
    waiting for another after 1, 2, 4 … seconds (``retry`` tries so far), at most the retry
    delay; an outage after the retry delay."""
    if failure.waiting:
        return ctx.config.resync_seconds
    if failure.backoff:
        return min(ctx.config.retry_seconds, float(2 ** min(retry, 16)))
    return ctx.config.retry_seconds


def raise_for(failure: Failure | None, ctx: Context, retry: int = 0) -> None:
    """In a change handler: temporary failures retry after :func:`retry_delay`; an invalid spec
    waits for the next change."""
    if failure is None:
        return
    if failure.temporary:
        raise kopf.TemporaryError(failure.message, delay=retry_delay(failure, ctx, retry))
    raise kopf.PermanentError(failure.message)
