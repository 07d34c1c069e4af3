"""Result subscriptions, pulled events and the audit trail: models, calls, and the methods
``Client`` and ``AsyncClient`` get from :class:`ResultsMethods` / :class:`AsyncResultsMethods`.

    client.put_subscription("shop", "receipts", mode="pull", outcomes=["SUCCEEDED"])
    batch = client.pull_events("shop", "receipts", limit=50, ack_deadline_seconds=60)
    for event in batch.events:
        handle(event)                  # dedupe by event.id: an event can come twice
    client.ack_events("shop", "receipts", [e.id for e in batch.events])
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ._wire.calls import _ns, _rfc3339, _seg
from ._wire.transport import AsyncTransport, Call, SyncTransport
from .models import WireModel

# --- models --------------------------------------------------------------------------------


class EventFilter(WireModel):
    queues: list[str] = []
    handlers: list[str] = []
    outcomes: list[str] = []


class Subscription(WireModel):
    namespace: str
    name: str
    mode: str
    filter: EventFilter
    url: str | None = None
    secret_ref: str | None = None
    max_attempts: int
    backoff_initial_seconds: float
    backoff_max_seconds: float
    timeout_seconds: float
    version: int
    created_at: dt.datetime
    updated_at: dt.datetime
    deliveries: dict[str, int] = {}


class ResultEvent(WireModel):
    """One outcome as a subscriber receives it (pull or webhook body). Dedupe by ``id``."""

    id: str
    type: str
    namespace: str
    task_id: str
    task_state: str
    state_version: int
    queue: str
    handler: str
    payload: Any = None
    created_at: dt.datetime
    attempt: int = 1


class EventBatch(WireModel):
    events: list[ResultEvent]
    ack_deadline: dt.datetime
    parked: int = 0


class AuditEntry(WireModel):
    id: str
    namespace: str
    at: dt.datetime
    actor: str
    action: str
    resource_kind: str
    resource_id: str
    resource_version: int | None = None
    reason: str
    evidence_ref: str | None = None
    before: Any = None
    after: Any = None
    corrects_id: str | None = None


class AuditPage(WireModel):
    items: list[AuditEntry]
    next_page_token: str | None = None


# --- calls ---------------------------------------------------------------------------------


def _subs(namespace: str, name: str | None = None) -> str:
    path = f"{_ns(namespace)}/subscriptions"
    return path if name is None else f"{path}/{_seg(name)}"


def subscription_body(
    *,
    mode: str,
    queues: list[str] | None = None,
    handlers: list[str] | None = None,
    outcomes: list[str] | None = None,
    url: str | None = None,
    secret_ref: str | None = None,
    max_attempts: int | None = None,
    backoff_initial_seconds: float | None = None,
    backoff_max_seconds: float | None = None,
    timeout_seconds: float | None = None,
    reason: str = "",
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "mode": mode,
        "filter": {
            "queues": queues or [],
            "handlers": handlers or [],
            "outcomes": outcomes or [],
        },
        "reason": reason,
    }
    optional = {
        "url": url,
        "secret_ref": secret_ref,
        "max_attempts": max_attempts,
        "backoff_initial_seconds": backoff_initial_seconds,
        "backoff_max_seconds": backoff_max_seconds,
        "timeout_seconds": timeout_seconds,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    return body


def put_subscription_call(namespace: str, name: str, body: dict[str, Any]) -> Call:
    return Call("PUT", _subs(namespace, name), json=body)  # level-based: safe to resend


def pull_call(namespace: str, name: str, limit: int, ack_deadline_seconds: float) -> Call:
    # A lost answer only delays its events until their ack deadline, so resending is safe.
    params = {"limit": limit, "ack_deadline_seconds": ack_deadline_seconds}
    return Call("GET", f"{_subs(namespace, name)}/events", params=params)


def ack_call(namespace: str, name: str, event_ids: list[str]) -> Call:
    return Call("POST", f"{_subs(namespace, name)}/ack", json={"event_ids": event_ids})


def delete_call(namespace: str, name: str, reason: str, discard_undelivered: bool) -> Call:
    params = {"reason": reason, "discard_undelivered": str(discard_undelivered).lower()}
    return Call("DELETE", _subs(namespace, name), params=params, idempotent=False)


def redrive_call(namespace: str, name: str, reason: str, event_ids: list[str] | None) -> Call:
    body: dict[str, Any] = {"reason": reason}
    if event_ids is not None:
        body["event_ids"] = event_ids
    return Call("POST", f"{_subs(namespace, name)}/redrive", json=body, idempotent=False)


def audit_call(
    namespace: str,
    *,
    actor: str | None = None,
    action: str | None = None,
    resource_kind: str | None = None,
    resource_id: str | None = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    page_size: int = 100,
    page_token: str | None = None,
) -> Call:
    params = {
        "namespace": namespace,
        "actor": actor,
        "action": action,
        "resource_kind": resource_kind,
        "resource_id": resource_id,
        "since": _rfc3339(since, "since") if since else None,
        "until": _rfc3339(until, "until") if until else None,
        "page_size": page_size,
        "page_token": page_token,
    }
    return Call("GET", "/v1/audit", params=params)


# --- client methods ------------------------------------------------------------------------


class ResultsMethods:
    """Subscriptions, events and audit for the synchronous ``Client``."""

    _transport: SyncTransport

    def put_subscription(self, namespace: str, name: str, **spec: Any) -> Subscription:
        """Create or update subscription ``name`` (admin role; audited). ``spec``: ``mode``
        ("pull" or "push"), ``queues``/``handlers``/``outcomes`` filters, and for push ``url``
        and ``secret_ref``, ``max_attempts``, ``backoff_*_seconds``, ``timeout_seconds``."""
        call = put_subscription_call(namespace, name, subscription_body(**spec))
        return Subscription.model_validate(self._transport.send(call).json())

    def get_subscription(self, namespace: str, name: str) -> Subscription:
        response = self._transport.send(Call("GET", _subs(namespace, name)))
        return Subscription.model_validate(response.json())

    def list_subscriptions(self, namespace: str) -> list[Subscription]:
        response = self._transport.send(Call("GET", _subs(namespace)))
        return [Subscription.model_validate(s) for s in response.json()["items"]]

    def delete_subscription(
        self, namespace: str, name: str, *, reason: str = "", discard_undelivered: bool = False
    ) -> dict[str, int]:
        call = delete_call(namespace, name, reason, discard_undelivered)
        return dict(self._transport.send(call).json()["deliveries"])

    def pull_events(
        self, namespace: str, name: str, *, limit: int = 50, ack_deadline_seconds: float = 30
    ) -> EventBatch:
        """Lease up to ``limit`` events until the ack deadline (see ``ack_events``)."""
        call = pull_call(namespace, name, limit, ack_deadline_seconds)
        return EventBatch.model_validate(self._transport.send(call).json())

    def ack_events(self, namespace: str, name: str, event_ids: list[str]) -> dict[str, str]:
        """Acknowledge processed events: ``{id: "acked" | "already_acked" | "unknown"}``."""
        response = self._transport.send(ack_call(namespace, name, event_ids))
        return dict(response.json()["results"])

    def redrive_subscription(
        self, namespace: str, name: str, *, reason: str, event_ids: list[str] | None = None
    ) -> int:
        """Send PARKED deliveries again with a fresh attempt budget (admin; audited)."""
        response = self._transport.send(redrive_call(namespace, name, reason, event_ids))
        return int(response.json()["redriven"])

    def audit(self, namespace: str, **filters: Any) -> AuditPage:
        """One page of the audit trail, newest first (admin role). Filters: ``actor``,
        ``action`` (or ``"task.*"``), ``resource_kind``, ``resource_id``, ``since``, ``until``
        (aware datetimes), ``page_size``, ``page_token``."""
        response = self._transport.send(audit_call(namespace, **filters))
        return AuditPage.model_validate(response.json())

    def iter_audit(self, namespace: str, **filters: Any) -> Iterator[AuditEntry]:
        token: str | None = None
        while True:
            page = self.audit(namespace, page_token=token, **filters)
            yield from page.items
            if not page.next_page_token:
                return
            token = page.next_page_token


class AsyncResultsMethods:
    """The asyncio twins of :class:`ResultsMethods`, for ``AsyncClient``."""

    _transport: AsyncTransport

    async def put_subscription(self, namespace: str, name: str, **spec: Any) -> Subscription:
        call = put_subscription_call(namespace, name, subscription_body(**spec))
        return Subscription.model_validate((await self._transport.send(call)).json())

    async def get_subscription(self, namespace: str, name: str) -> Subscription:
        response = await self._transport.send(Call("GET", _subs(namespace, name)))
        return Subscription.model_validate(response.json())

    async def list_subscriptions(self, namespace: str) -> list[Subscription]:
        response = await self._transport.send(Call("GET", _subs(namespace)))
        return [Subscription.model_validate(s) for s in response.json()["items"]]

    async def delete_subscription(
        self, namespace: str, name: str, *, reason: str = "", discard_undelivered: bool = False
    ) -> dict[str, int]:
        call = delete_call(namespace, name, reason, discard_undelivered)
        return dict((await self._transport.send(call)).json()["deliveries"])

    async def pull_events(
        self, namespace: str, name: str, *, limit: int = 50, ack_deadline_seconds: float = 30
    ) -> EventBatch:
        call = pull_call(namespace, name, limit, ack_deadline_seconds)
        return EventBatch.model_validate((await self._transport.send(call)).json())

    async def ack_events(self, namespace: str, name: str, event_ids: list[str]) -> dict[str, str]:
        response = await self._transport.send(ack_call(namespace, name, event_ids))
        return dict(response.json()["results"])

    async def redrive_subscription(
        self, namespace: str, name: str, *, reason: str, event_ids: list[str] | None = None
    ) -> int:
        response = await self._transport.send(redrive_call(namespace, name, reason, event_ids))
        return int(response.json()["redriven"])

    async def audit(self, namespace: str, **filters: Any) -> AuditPage:
        response = await self._transport.send(audit_call(namespace, **filters))
        return AuditPage.model_validate(response.json())

    async def iter_audit(self, namespace: str, **filters: Any) -> AsyncIterator[AuditEntry]:
        token: str | None = None
        while True:
            page = await self.audit(namespace, page_token=token, **filters)
            for entry in page.items:
                yield entry
            if not page.next_page_token:
                return
            token = page.next_page_token
