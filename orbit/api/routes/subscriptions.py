"""Result subscriptions (``/v1/namespaces/{ns}/subscriptions``): declare, read, delete, pull
events with an ack deadline, acknowledge, redrive parked deliveries. Declaring, deleting and
redriving are admin actions and audited; pulling and acking need the submit role."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated

import httpx
import sqlalchemy as sa
from fastapi import APIRouter, Query, Response
from fastapi import Path as PathParam

from orbit.api.context import AppContext, Ctx
from orbit.api.routes.tasks import PROBLEMS, Namespace
from orbit.api.schemas import results as schemas
from orbit.api.schemas.base import NAME_PATTERN
from orbit.api.transport.auth import READ_ROLES, CurrentCredential, authorize
from orbit.api.transport.problems import ApiProblem
from orbit.engines.egress import EgressPolicy, EgressRefused, Unresolvable, pin
from orbit.engines.webhooks import SecretDirectory, SecretUnavailable, event_document
from orbit_store.access.credentials import Role
from orbit_store.db import run_transaction
from orbit_store.delivery import model
from orbit_store.delivery.pull import ack_events, pull_events
from orbit_store.delivery.redrive import redrive_parked
from orbit_store.delivery.subscriptions import (
    delete_subscription,
    get_subscription,
    list_subscriptions,
    put_subscription,
)

router = APIRouter(prefix="/v1/namespaces/{namespace}/subscriptions", tags=["subscriptions"])

Name = Annotated[str, PathParam(pattern=NAME_PATTERN, max_length=63)]


def _out(sub: model.Subscription) -> schemas.Subscription:
    return schemas.Subscription(
        namespace=sub.namespace,
        name=sub.name,
        mode=sub.mode.value,
        filter=schemas.EventFilterOut(**sub.filter.as_json()),
        url=sub.url,
        secret_ref=sub.secret_ref,
        max_attempts=sub.policy.max_attempts,
        backoff_initial_seconds=sub.policy.backoff_initial_ms / 1000,
        backoff_max_seconds=sub.policy.backoff_max_ms / 1000,
        timeout_seconds=sub.policy.timeout_ms / 1000,
        version=sub.version,
        created_at=sub.created_at,
        updated_at=sub.updated_at,
        deliveries=sub.counts,
    )


def _spec(name: str, body: schemas.SubscriptionPut) -> model.SubscriptionSpec:
    return model.SubscriptionSpec(
        name=name,
        mode=model.Mode(body.mode),
        filter=model.EventFilter(
            tuple(body.filter.queues), tuple(body.filter.handlers), tuple(body.filter.outcomes)
        ),
        url=body.url,
        secret_ref=body.secret_ref,
        policy=model.DeliveryPolicy(
            max_attempts=body.max_attempts,
            backoff_initial_ms=round(body.backoff_initial_seconds * 1000),
            backoff_max_ms=round(body.backoff_max_seconds * 1000),
            timeout_ms=round(body.timeout_seconds * 1000),
        ),
    )


def _check_target(ctx: AppContext, namespace: str, body: schemas.SubscriptionPut) -> None:
    """A push subscription whose secret this server cannot read, or whose URL points where
    deliveries may not go, would only ever park: refused now, naming the field. Another
    namespace's secret is looked for in this namespace's folder only, so it is simply not
    found — the answer is the same as for a name nobody uses."""
    if body.mode != "push":
        return
    if body.secret_ref is not None:
        secrets = ctx.settings.webhook_secrets_dir
        try:
            SecretDirectory(None if secrets is None else Path(secrets)).key(
                namespace, body.secret_ref
            )
        except SecretUnavailable as exc:
            raise ApiProblem(422, "validation", f"secret_ref: {exc}") from exc
    if body.url is not None:
        try:
            pin(body.url, EgressPolicy.parse(ctx.settings.webhook_allow))
        except Unresolvable:
            pass  # it may resolve later; every delivery checks again
        except EgressRefused as exc:
            raise ApiProblem(422, "validation", f"url: {exc}") from exc
        except httpx.InvalidURL:
            pass  # the store names what is wrong with it


@router.put(
    "/{name}",
    response_model=schemas.Subscription,
    responses={**PROBLEMS, 201: {"model": schemas.Subscription, "description": "Created"}},
    summary="Create or update a subscription (audited)",
)
def put(
    namespace: Namespace,
    name: Name,
    body: schemas.SubscriptionPut,
    credential: CurrentCredential,
    ctx: Ctx,
    response: Response,
) -> schemas.Subscription:
    """201 when created, 200 when updated or unchanged. A new subscription receives the events
    of outcomes committed after it exists."""
    authorize(credential, namespace, Role.ADMIN)
    _check_target(ctx, namespace, body)
    work = functools.partial(
        put_subscription,
        namespace=namespace,
        spec=_spec(name, body),
        actor=credential.name,
        reason=body.reason,
    )
    try:
        sub, changed = run_transaction(ctx.engine, work)
    except sa.exc.IntegrityError:  # created concurrently: this time it is an update
        sub, changed = run_transaction(ctx.engine, work)
    if changed and sub.version == 1:
        response.status_code = 201
    return _out(sub)


@router.get("", response_model=schemas.SubscriptionList, responses=PROBLEMS, summary="List")
def list_(
    namespace: Namespace, credential: CurrentCredential, ctx: Ctx
) -> schemas.SubscriptionList:
    authorize(credential, namespace, *READ_ROLES)
    with ctx.engine.connect() as conn:
        return schemas.SubscriptionList(
            items=[_out(s) for s in list_subscriptions(conn, namespace)]
        )


@router.get("/{name}", response_model=schemas.Subscription, responses=PROBLEMS, summary="Read")
def get(
    namespace: Namespace, name: Name, credential: CurrentCredential, ctx: Ctx
) -> schemas.Subscription:
    """With its deliveries per state (PENDING, DELIVERED, PARKED)."""
    authorize(credential, namespace, *READ_ROLES)
    with ctx.engine.connect() as conn:
        return _out(get_subscription(conn, namespace, name))


@router.delete(
    "/{name}",
    response_model=schemas.DeletedSubscription,
    responses=PROBLEMS,
    summary="Delete a subscription (audited)",
)
def delete(
    namespace: Namespace,
    name: Name,
    credential: CurrentCredential,
    ctx: Ctx,
    reason: Annotated[str, Query(max_length=1024)] = "",
    discard_undelivered: Annotated[bool, Query()] = False,
) -> schemas.DeletedSubscription:
    """409 while deliveries are PENDING or PARKED, unless ``discard_undelivered=true`` (the
    audit row records how many were discarded)."""
    authorize(credential, namespace, Role.ADMIN)
    counts = run_transaction(
        ctx.engine,
        functools.partial(
            delete_subscription,
            namespace=namespace,
            name=name,
            actor=credential.name,
            reason=reason,
            discard_undelivered=discard_undelivered,
        ),
    )
    return schemas.DeletedSubscription(name=name, deliveries=counts)


@router.get(
    "/{name}/events",
    response_model=schemas.EventBatch,
    responses=PROBLEMS,
    summary="Lease a batch of events (pull)",
)
def events(
    namespace: Namespace,
    name: Name,
    credential: CurrentCredential,
    ctx: Ctx,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ack_deadline_seconds: Annotated[float, Query(ge=1, le=43_200)] = 30,
) -> schemas.EventBatch:
    """Each call hands out due events and holds them until ``ack_deadline``; acknowledge the
    ones you processed (``POST …/ack``), the others come back after the deadline. An event can
    arrive more than once (a lost ack, a late one): dedupe by its ``id``."""
    authorize(credential, namespace, Role.SUBMIT)
    batch = run_transaction(
        ctx.engine,
        functools.partial(
            pull_events,
            namespace=namespace,
            name=name,
            limit=limit,
            ack_deadline_seconds=ack_deadline_seconds,
        ),
    )
    counter = ctx.metrics.delivery_attempts
    if batch.events:
        counter.labels(namespace, name, "pulled").inc(len(batch.events))
    if batch.parked:
        counter.labels(namespace, name, "parked").inc(batch.parked)
    return schemas.EventBatch(
        events=[schemas.ResultEvent(**event_document(e)) for e in batch.events],
        ack_deadline=batch.ack_deadline,
        parked=batch.parked,
    )


@router.post(
    "/{name}/ack",
    response_model=schemas.AckResponse,
    responses=PROBLEMS,
    summary="Acknowledge pulled events",
)
def ack(
    namespace: Namespace,
    name: Name,
    body: schemas.AckRequest,
    credential: CurrentCredential,
    ctx: Ctx,
) -> schemas.AckResponse:
    """Idempotent: acknowledging again answers ``already_acked``."""
    authorize(credential, namespace, Role.SUBMIT)
    results = run_transaction(
        ctx.engine,
        functools.partial(ack_events, namespace=namespace, name=name, event_ids=body.event_ids),
    )
    return schemas.AckResponse(results={k: v.value for k, v in results.items()})


@router.post(
    "/{name}/redrive",
    response_model=schemas.RedriveResponse,
    responses=PROBLEMS,
    summary="Send parked deliveries again (audited)",
)
def redrive(
    namespace: Namespace,
    name: Name,
    body: schemas.RedriveRequest,
    credential: CurrentCredential,
    ctx: Ctx,
) -> schemas.RedriveResponse:
    authorize(credential, namespace, Role.ADMIN)
    count = run_transaction(
        ctx.engine,
        functools.partial(
            redrive_parked,
            namespace=namespace,
            name=name,
            actor=credential.name,
            reason=body.reason,
            event_ids=body.event_ids,
        ),
    )
    return schemas.RedriveResponse(redriven=count)
