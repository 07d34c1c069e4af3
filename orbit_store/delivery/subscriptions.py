"""Declaring subscriptions (seed §6.2): create/update level-based, read, delete. Every change
appends an audit row in the same transaction (invariant 8)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import sqlalchemy as sa

from orbit_store.audit import record_audit
from orbit_store.clock import db_now
from orbit_store.errors import Conflict, InvalidRequest, NotFound
from orbit_store.ids import new_id
from orbit_store.namespaces import ensure_namespace
from orbit_store.schema import event_deliveries, subscriptions

from .model import (
    OUTCOMES,
    DeliveryPolicy,
    DeliveryState,
    EventFilter,
    Mode,
    Subscription,
    SubscriptionSpec,
)

#: A secret reference is a file name in the server's webhook-secrets directory: no paths.
SECRET_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
RESOURCE_KIND = "subscription"


def _validate(spec: SubscriptionSpec) -> None:
    if spec.mode is Mode.PUSH:
        if not spec.url or not re.match(r"^https?://", spec.url):
            raise InvalidRequest("url: a push subscription needs an http:// or https:// url")
        _check_url(spec.url)
        if not spec.secret_ref or not SECRET_REF.match(spec.secret_ref):
            raise InvalidRequest(
                "secret_ref: a push subscription needs the name of its signing secret "
                "(a file in the server's webhook-secrets directory: letters, digits, . _ -)"
            )
    elif spec.url or spec.secret_ref:
        raise InvalidRequest("url, secret_ref: only push subscriptions have them; drop them")
    unknown = sorted(set(spec.filter.outcomes) - set(OUTCOMES))
    if unknown:
        raise InvalidRequest(f"filter.outcomes: unknown {unknown}; use {', '.join(OUTCOMES)}")
    if spec.policy.max_attempts < 1:
        raise InvalidRequest("max_attempts must be at least 1")


def _check_url(url: str) -> None:
    """A URL the sender can address: a host, a valid port, no spaces."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a port out of range)
    except ValueError as exc:
        raise InvalidRequest(f"url: {url!r} is not a valid URL ({exc})") from exc
    if not parts.hostname or any(c.isspace() for c in url):
        raise InvalidRequest(f"url: {url!r} is not a valid URL: it needs a host and no spaces")


def _columns(spec: SubscriptionSpec) -> dict[str, Any]:
    return {
        "mode": spec.mode.value,
        "filter": spec.filter.as_json(),
        "url": spec.url,
        "secret_ref": spec.secret_ref,
        "max_attempts": spec.policy.max_attempts,
        "backoff_initial_ms": spec.policy.backoff_initial_ms,
        "backoff_max_ms": spec.policy.backoff_max_ms,
        "timeout_ms": spec.policy.timeout_ms,
    }


def subscription_from_row(row: Any) -> Subscription:
    return Subscription(
        id=row.id,
        namespace=row.namespace,
        name=row.name,
        mode=Mode(row.mode),
        filter=EventFilter.from_json(row.filter),
        url=row.url,
        secret_ref=row.secret_ref,
        policy=DeliveryPolicy(
            max_attempts=row.max_attempts,
            backoff_initial_ms=row.backoff_initial_ms,
            backoff_max_ms=row.backoff_max_ms,
            timeout_ms=row.timeout_ms,
        ),
        version=row.version,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def lock_subscription(
    conn: sa.Connection, namespace: str, name: str, *, exclusive: bool = False
) -> Any:
    """The subscription row under a share (or exclusive) lock; NotFound when absent."""
    row = conn.execute(
        sa.select(subscriptions)
        .where(subscriptions.c.namespace == namespace, subscriptions.c.name == name)
        .with_for_update(read=not exclusive)
    ).one_or_none()
    if row is None:
        raise NotFound(f"subscription {name!r} not found in namespace {namespace!r}")
    return row


def put_subscription(
    conn: sa.Connection, namespace: str, spec: SubscriptionSpec, *, actor: str, reason: str = ""
) -> tuple[Subscription, bool]:
    """Make subscription ``spec.name`` match ``spec``; (subscription, changed). A new one receives
    the events of outcomes committed after it exists."""
    _validate(spec)
    now = db_now(conn)
    ensure_namespace(conn, namespace, now)
    values = _columns(spec)
    row = conn.execute(
        sa.select(subscriptions)
        .where(subscriptions.c.namespace == namespace, subscriptions.c.name == spec.name)
        .with_for_update()
    ).one_or_none()
    if row is not None and all(getattr(row, k) == v for k, v in values.items()):
        return subscription_from_row(row), False
    if row is None:
        sub_id, version, action, before = new_id(), 1, "subscription.create", None
        conn.execute(
            subscriptions.insert().values(
                id=sub_id,
                namespace=namespace,
                name=spec.name,
                version=version,
                created_at=now,
                updated_at=now,
                **values,
            )
        )
    else:
        sub_id, version, action = row.id, row.version + 1, "subscription.update"
        before = {k: getattr(row, k) for k in values}
        updated = conn.execute(
            subscriptions.update()
            .where(subscriptions.c.id == row.id, subscriptions.c.version == row.version)
            .values(version=version, updated_at=now, **values)
        )
        assert updated.rowcount == 1, "the row is locked FOR UPDATE"
    record_audit(
        conn,
        namespace=namespace,
        actor=actor,
        action=action,
        resource_kind=RESOURCE_KIND,
        resource_id=spec.name,
        resource_version=version,
        reason=reason or f"{action} through the API",
        before=before,
        after=values,
        now=now,
    )
    return get_subscription(conn, namespace, spec.name), True


def get_subscription(conn: sa.Connection, namespace: str, name: str) -> Subscription:
    row = conn.execute(
        sa.select(subscriptions).where(
            subscriptions.c.namespace == namespace, subscriptions.c.name == name
        )
    ).one_or_none()
    if row is None:
        raise NotFound(f"subscription {name!r} not found in namespace {namespace!r}")
    return _with_counts(conn, subscription_from_row(row))


def list_subscriptions(conn: sa.Connection, namespace: str) -> list[Subscription]:
    rows = conn.execute(
        sa.select(subscriptions)
        .where(subscriptions.c.namespace == namespace)
        .order_by(subscriptions.c.name)
    )
    return [_with_counts(conn, subscription_from_row(row)) for row in rows]


def delivery_counts(conn: sa.Connection, namespace: str, subscription_id: str) -> dict[str, int]:
    rows = conn.execute(
        sa.select(event_deliveries.c.state, sa.func.count())
        .where(
            event_deliveries.c.namespace == namespace,
            event_deliveries.c.subscription_id == subscription_id,
        )
        .group_by(event_deliveries.c.state)
    )
    counts = {state.value: 0 for state in DeliveryState}
    counts.update({state: int(n) for state, n in rows})
    return counts


def _with_counts(conn: sa.Connection, sub: Subscription) -> Subscription:
    return Subscription(**{**sub.__dict__, "counts": delivery_counts(conn, sub.namespace, sub.id)})


def delete_subscription(
    conn: sa.Connection,
    namespace: str,
    name: str,
    *,
    actor: str,
    reason: str,
    discard_undelivered: bool = False,
) -> dict[str, int]:
    """Remove a subscription and its deliveries; returns the counts removed. Refused while
    deliveries are PENDING or PARKED unless ``discard_undelivered`` (seed §7: unacknowledged
    events are never dropped silently — the audit row records how many were discarded)."""
    row = lock_subscription(conn, namespace, name, exclusive=True)
    counts = delivery_counts(conn, row.namespace, row.id)
    unsettled = counts[DeliveryState.PENDING] + counts[DeliveryState.PARKED]
    if unsettled and not discard_undelivered:
        raise Conflict(
            f"subscription {name!r} has {counts['PENDING']} pending and {counts['PARKED']} "
            "parked deliveries; let them be delivered, or delete with discard_undelivered=true "
            "(recorded in the audit log)"
        )
    conn.execute(event_deliveries.delete().where(event_deliveries.c.subscription_id == row.id))
    conn.execute(subscriptions.delete().where(subscriptions.c.id == row.id))
    record_audit(
        conn,
        namespace=namespace,
        actor=actor,
        action="subscription.delete",
        resource_kind=RESOURCE_KIND,
        resource_id=name,
        resource_version=row.version,
        reason=reason or "deleted through the API",
        before={"mode": row.mode, "deliveries": counts},
        after={"discarded_undelivered": unsettled},
        now=db_now(conn),
    )
    return counts
