"""The webhook sender loop (seed §6.2): each pass, for every push subscription, lease a batch of
due deliveries (one transaction, one namespace, SKIP LOCKED), POST them signed — outside any
transaction, several at once — and record each outcome in its own transaction. A receiver that
refuses, cannot be reached or cannot even be addressed (a bad URL, an unreadable secret) is a
failed attempt, retried with backoff and parked after the last one. A subscription or delivery
the sender itself fails on is logged naming it and counted
(``orbit_engine_item_errors_total{loop="deliveries"}``); the pass goes on. The delivery gauges
are the gauge loop's (orbit/metrics_delivery.py)."""

from __future__ import annotations

import functools
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import sqlalchemy as sa

from orbit import __version__
from orbit.metrics import Metrics
from orbit_store.db import run_transaction
from orbit_store.delivery.model import PushItem, PushResult
from orbit_store.delivery.push import lease_push_batch, push_subscriptions, record_push_result
from orbit_store.passes import ItemPass

from .webhooks import SecretDirectory, SecretUnavailable, signed_request

log = logging.getLogger("orbit.engines.deliveries")

LOOP = "deliveries"
BATCH = 50
SEND_SLOTS = 8


@dataclass
class PassReport:
    results: dict[str, int] = field(default_factory=dict)
    errors: int = 0


class WebhookSender:
    def __init__(
        self,
        engine: sa.Engine,
        metrics: Metrics,
        secrets_dir: str | Path | None,
        *,
        batch: int = BATCH,
        slots: int = SEND_SLOTS,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.engine, self.metrics = engine, metrics
        self.secrets = SecretDirectory(Path(secrets_dir) if secrets_dir else None)
        self.batch, self.slots = batch, slots
        self.http = httpx.Client(
            headers={"user-agent": f"orbit-webhooks/{__version__}"},
            follow_redirects=False,
            transport=transport,
        )
        self.pool = ThreadPoolExecutor(slots, thread_name_prefix="orbit-webhook")

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.http.close()

    def run_pass(self, namespace: str | None = None) -> PassReport:
        """One pass over the push subscriptions (of ``namespace``, for tests and operations)."""
        report = PassReport()
        items = ItemPass(self.engine, LOOP)
        for ns, name in run_transaction(
            self.engine, functools.partial(push_subscriptions, namespace=namespace)
        ):
            batch = items.run(
                functools.partial(
                    lease_push_batch,
                    namespace=ns,
                    name=name,
                    limit=self.batch,
                    send_slots=self.slots,
                ),
                namespace=ns,
                item=f"subscription {name} (leasing deliveries)",
            )
            deliver = functools.partial(self._deliver, items)
            for result in self.pool.map(deliver, batch or []):
                if result is not None:
                    report.results[result] = report.results.get(result, 0) + 1
        report.errors = items.errors
        self.metrics.count_item_errors(LOOP, report.errors)
        return report

    def _deliver(self, items: ItemPass, item: PushItem) -> PushResult | None:
        """Send one delivery and record it; None when that failed (logged and counted)."""
        return items.call(
            functools.partial(self._send_and_record, item),
            namespace=item.namespace,
            item=f"delivery {item.delivery_id} (subscription {item.subscription}, "
            f"event {item.event.id})",
        )

    def _send_and_record(self, item: PushItem) -> PushResult:
        error = self.send(item)
        result = run_transaction(
            self.engine, functools.partial(record_push_result, item=item, error=error)
        )
        self.metrics.delivery_attempts.labels(item.namespace, item.subscription, result).inc()
        if result is PushResult.PARKED:
            log.warning(
                "delivery parked after its last attempt",
                extra={"subscription": item.subscription, "event": item.event.id, "error": error},
            )
        return result

    def send(self, item: PushItem) -> str | None:
        """POST the signed event; None on a 2xx answer, else what went wrong."""
        try:
            key = self.secrets.key(item.secret_ref)
        except SecretUnavailable as exc:
            return str(exc)
        body, headers = signed_request(key, item.event, int(time.time()))
        try:
            response = self.http.post(
                item.url, content=body, headers=headers, timeout=item.timeout_seconds
            )
        except (httpx.HTTPError, httpx.InvalidURL) as exc:  # InvalidURL is no HTTPError
            return f"{type(exc).__name__}: {exc}"[:1024]
        if 200 <= response.status_code < 300:
            return None
        return f"HTTP {response.status_code}: {response.text[:200]}"
