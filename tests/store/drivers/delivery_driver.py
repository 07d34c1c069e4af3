"""A test driver for result delivery, sharing a :class:`PulseDriver`'s namespace and clock."""

from __future__ import annotations

import functools
import random
from typing import Any

import sqlalchemy as sa

from orbit_store.delivery.model import (
    AckStatus,
    DeliveryPolicy,
    EventFilter,
    Mode,
    PulledBatch,
    PushItem,
    PushResult,
    Subscription,
    SubscriptionSpec,
)
from orbit_store.delivery.pull import ack_events, pull_events
from orbit_store.delivery.push import lease_push_batch, record_push_result
from orbit_store.delivery.redrive import redrive_parked
from orbit_store.delivery.subscriptions import (
    delete_subscription,
    get_subscription,
    put_subscription,
)
from orbit_store.schema import audit_log, event_deliveries, subscriptions

from .pulse_driver import PulseDriver


class DeliveryDriver:
    def __init__(self, pulse: PulseDriver) -> None:
        self.pulse = pulse
        self.namespace = pulse.namespace

    def subscribe(
        self,
        name: str = "results",
        mode: str = "pull",
        *,
        queues: tuple[str, ...] = (),
        handlers: tuple[str, ...] = (),
        outcomes: tuple[str, ...] = (),
        **policy: Any,
    ) -> Subscription:
        push = mode == "push"
        spec = SubscriptionSpec(
            name=name,
            mode=Mode(mode),
            filter=EventFilter(queues, handlers, outcomes),
            url="http://127.0.0.1:9/hook" if push else None,
            secret_ref="hook-secret" if push else None,
            policy=DeliveryPolicy(**policy),
        )
        sub, _changed = self.pulse.tx(
            lambda c: put_subscription(c, self.namespace, spec, actor="admin@example.com")
        )
        return sub

    def get(self, name: str = "results") -> Subscription:
        return self.pulse.tx(lambda c: get_subscription(c, self.namespace, name))

    def pull(self, name: str = "results", limit: int = 10, deadline: float = 30) -> PulledBatch:
        return self.pulse.tx(
            functools.partial(
                pull_events,
                namespace=self.namespace,
                name=name,
                limit=limit,
                ack_deadline_seconds=deadline,
            )
        )

    def ack(self, event_ids: list[str], name: str = "results") -> dict[str, AckStatus]:
        return self.pulse.tx(lambda c: ack_events(c, self.namespace, name, event_ids))

    def lease_push(self, name: str = "hook", limit: int = 10) -> list[PushItem]:
        return self.pulse.tx(lambda c: lease_push_batch(c, self.namespace, name, limit=limit))

    def report(self, item: PushItem, error: str | None = None) -> PushResult:
        rng = random.Random(7)
        return self.pulse.tx(lambda c: record_push_result(c, item, error=error, rng=rng))

    def redrive(self, name: str = "hook", reason: str = "receiver fixed") -> int:
        return self.pulse.tx(
            lambda c: redrive_parked(
                c, self.namespace, name, actor="ops@example.com", reason=reason
            )
        )

    def delete(self, name: str = "results", discard: bool = False) -> dict[str, int]:
        return self.pulse.tx(
            lambda c: delete_subscription(
                c,
                self.namespace,
                name,
                actor="admin@example.com",
                reason="no longer needed",
                discard_undelivered=discard,
            )
        )

    def deliveries(self, name: str = "results") -> list[sa.Row[Any]]:
        with self.pulse.engine.connect() as conn:
            query = (
                sa.select(event_deliveries)
                .join(subscriptions, subscriptions.c.id == event_deliveries.c.subscription_id)
                .where(subscriptions.c.namespace == self.namespace, subscriptions.c.name == name)
                .order_by(event_deliveries.c.created_at, event_deliveries.c.id)
            )
            return list(conn.execute(query))

    def audit(self, resource_id: str) -> list[sa.Row[Any]]:
        """This namespace's audit rows about ``resource_id``, oldest first."""
        with self.pulse.engine.connect() as conn:
            query = (
                sa.select(audit_log)
                .where(
                    audit_log.c.namespace == self.namespace, audit_log.c.resource_id == resource_id
                )
                .order_by(audit_log.c.at, audit_log.c.id)
            )
            return list(conn.execute(query))

    def succeeded_task(self, handler: str = "test.noop", queue: str = "default") -> str:
        """Submit, run and succeed one task; its id."""
        self.pulse.submit(handler=handler, queue=queue)
        grant = self.pulse.claim_one(queues=[queue])
        self.pulse.start(grant)
        self.pulse.succeed(grant, result={"ok": True})
        return grant.task_id
