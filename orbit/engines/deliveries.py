"""The webhook sender loop (seed §6.2): each pass, for every push subscription, lease a batch of
due deliveries (one transaction, one namespace, SKIP LOCKED), POST them signed — outside any
transaction, several at once — and record each outcome in its own transaction. One failing
item or subscription is counted and logged; the pass goes on. At the end of the pass it
publishes the delivery gauges (backlog, oldest age, parked) for every subscription."""

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
from orbit_store.delivery.backlog import delivery_backlog
from orbit_store.delivery.model import PushItem, PushResult
from orbit_store.delivery.push import lease_push_batch, push_subscriptions, record_push_result

from .webhooks import SecretDirectory, SecretUnavailable, signed_request

log = logging.getLogger("orbit.engines.deliveries")

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

    def run_pass(self) -> PassReport:
        report = PassReport()
        for namespace, name in run_transaction(self.engine, push_subscriptions):
            try:
                items = run_transaction(
                    self.engine,
                    functools.partial(
                        lease_push_batch,
                        namespace=namespace,
                        name=name,
                        limit=self.batch,
                        send_slots=self.slots,
                    ),
                )
            except Exception:
                log.exception("leasing deliveries failed", extra={"subscription": name})
                report.errors += 1
                continue
            for result in self.pool.map(self._deliver, items):
                if result is None:
                    report.errors += 1
                    continue
                report.results[result] = report.results.get(result, 0) + 1
        self.metrics.delivery_backlog.update(run_transaction(self.engine, delivery_backlog))
        return report

    def _deliver(self, item: PushItem) -> PushResult | None:
        """Send one delivery and record it; None when recording itself failed (logged)."""
        error = self.send(item)
        try:
            result = run_transaction(
                self.engine, functools.partial(record_push_result, item=item, error=error)
            )
        except Exception:
            log.exception("recording a delivery failed", extra={"delivery": item.delivery_id})
            return None
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
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"[:1024]
        if 200 <= response.status_code < 300:
            return None
        return f"HTTP {response.status_code}: {response.text[:200]}"
