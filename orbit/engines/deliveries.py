"""The webhook sender loop (seed §6.2): each pass, for every push subscription, lease a batch of
due deliveries (one transaction, one namespace, SKIP LOCKED), POST them signed — outside any
transaction, several at once — and record each outcome in its own transaction. A receiver that
refuses, cannot be reached or cannot even be addressed (a bad URL, an unreadable secret, an
address the egress policy refuses: orbit/engines/egress.py) is a failed attempt, retried with
backoff and parked after the last one. What is recorded is a status and a short reason this
module writes; nothing the receiver sends back (its body, its reason phrase) is read or kept.
A subscription or delivery the sender itself fails on is logged naming it and counted
(``orbit_engine_item_errors_total{loop="deliveries"}``); the pass goes on. Namespaces are served
in ``LANES`` lanes at once, each lane with send slots of its own, so a receiver that answers late
(up to its timeout, for every delivery of a batch) holds back only its own namespace's lane. The
delivery gauges are the gauge loop's (orbit/metrics/delivery.py)."""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import sqlalchemy as sa

from orbit import __version__
from orbit.metrics.server import Metrics
from orbit_store.db import run_transaction
from orbit_store.delivery.model import PushItem, PushResult
from orbit_store.delivery.push import (
    lease_push_batch,
    push_secret_refs,
    push_subscriptions,
    record_push_result,
)
from orbit_store.passes import ItemPass

from .egress import EgressPolicy, EgressRefused, pin
from .webhooks import SecretDirectory, SecretUnavailable, signed_request

log = logging.getLogger("orbit.engines.deliveries")

LOOP = "deliveries"
BATCH = 50
SEND_SLOTS = 8  # per lane: one subscription's batch is sent this many at a time
LANES = 4  # namespaces served at once


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
        egress: EgressPolicy | None = None,
        batch: int = BATCH,
        slots: int = SEND_SLOTS,
        lanes: int = LANES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.engine, self.metrics = engine, metrics
        self.secrets = SecretDirectory(Path(secrets_dir) if secrets_dir else None)
        self.egress = egress or EgressPolicy()
        self.batch, self.slots = batch, slots
        # No kept-alive connections: each delivery connects to the address it checked, and a
        # TLS connection verified for one host name must never carry another host's request.
        self.http = httpx.Client(
            headers={"user-agent": f"orbit-webhooks/{__version__}"},
            follow_redirects=False,
            transport=transport,
            limits=httpx.Limits(max_keepalive_connections=0),
        )
        self.lanes = ThreadPoolExecutor(lanes, thread_name_prefix="orbit-webhook-lane")
        # One pool of send slots per lane, so a lane's sends never queue behind another's: the
        # lease of a batch lasts as long as its sends take through ``slots`` of their own.
        self.pools: queue.SimpleQueue[ThreadPoolExecutor] = queue.SimpleQueue()
        for lane in range(lanes):
            self.pools.put(ThreadPoolExecutor(slots, thread_name_prefix=f"orbit-webhook-{lane}"))
        self._all_pools = lanes
        # The lanes send at once, but use no more database connections than one lane did.
        self.db_slots = threading.BoundedSemaphore(slots)
        self._layout_checked = False

    def close(self) -> None:
        self.lanes.shutdown(wait=True)
        for _ in range(self._all_pools):
            self.pools.get().shutdown(wait=True)
        self.http.close()

    def run_pass(self, namespace: str | None = None) -> PassReport:
        """One pass over the push subscriptions (of ``namespace``, for tests and operations)."""
        report = PassReport()
        items = ItemPass(self.engine, LOOP)
        if not self._layout_checked:
            self._layout_checked = True
            self._warn_shared_secrets()
        by_namespace: dict[str, list[str]] = {}
        for ns, name in run_transaction(
            self.engine, functools.partial(push_subscriptions, namespace=namespace)
        ):
            by_namespace.setdefault(ns, []).append(name)
        serve = functools.partial(self._serve_namespace, items)
        for results in self.lanes.map(serve, by_namespace.items()):
            for result in results:
                report.results[result] = report.results.get(result, 0) + 1
        report.errors = items.errors
        self.metrics.count_item_errors(LOOP, report.errors)
        return report

    def _serve_namespace(
        self, items: ItemPass, subscriptions: tuple[str, list[str]]
    ) -> list[PushResult]:
        """One lane: each push subscription of one namespace in turn, its batch leased (one
        transaction) and sent through this lane's own slots."""
        ns, names = subscriptions
        pool = self.pools.get()  # as many pools as lanes: one is always free here
        results: list[PushResult] = []
        try:
            for name in names:
                with self.db_slots:
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
                results += [r for r in pool.map(deliver, batch or []) if r is not None]
        finally:
            self.pools.put(pool)
        return results

    def _warn_shared_secrets(self) -> None:
        """Secrets left directly in the directory (the layout before a folder per namespace)
        sign nothing now: say where each must go, once, in the server's log (never to a
        tenant, who must not learn which secret names exist)."""
        shared = self.secrets.shared_files()
        if not shared:
            return
        try:
            named = run_transaction(
                self.engine, functools.partial(push_secret_refs, secret_refs=shared)
            )
        except sa.exc.SQLAlchemyError:
            named = []  # the advice stands without the namespaces
        for ref in shared:
            owners = sorted({ns for ns, named_ref in named if named_ref == ref})
            log.warning(
                "webhook secret %r is directly in %s and signs nothing: move it to "
                "%s/<namespace>/%s for each namespace that owns it",
                ref,
                self.secrets.path,
                self.secrets.path,
                ref,
                extra={"secret_ref": ref, "named_by_namespaces": owners},
            )

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
        with self.db_slots:
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
        """POST the signed event to an address the egress policy allows; None on a 2xx
        answer, else a short reason of our own."""
        try:
            key = self.secrets.key(item.namespace, item.secret_ref)
            target = pin(item.url, self.egress)
        except (SecretUnavailable, EgressRefused) as exc:
            return str(exc)
        except httpx.InvalidURL:
            return "InvalidURL: the subscription's url cannot be parsed; correct it"
        body, headers = signed_request(key, item.event, int(time.time()))
        try:
            with self.http.stream(
                "POST",
                target.url,
                content=body,
                headers={**headers, "host": target.host_header},
                extensions=target.extensions,
                timeout=item.timeout_seconds,
            ) as response:
                status = response.status_code  # the body is never read
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {_failure(exc)}"
        return None if 200 <= status < 300 else f"HTTP {status}"


def _failure(exc: httpx.HTTPError) -> str:
    """Our words for a failed request: the exception's text may quote what the peer sent."""
    if isinstance(exc, httpx.TimeoutException):
        return "no answer within the subscription's timeout"
    if isinstance(exc, httpx.ConnectError):
        return "could not connect (refused, unreachable or TLS failed)"
    return "the request failed before an answer arrived"
