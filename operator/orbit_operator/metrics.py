"""Prometheus metrics of the operator, on their own registry and port (``/metrics``)."""

from __future__ import annotations

import logging
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, start_http_server

log = logging.getLogger("orbit.operator")


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.reconciles = Counter(
            "orbit_operator_reconciles_total",
            "Reconciles of custom resources, by kind and resulting Ready reason.",
            ["kind", "reason"],
            registry=self.registry,
        )
        self.errors = Counter(
            "orbit_operator_reconcile_errors_total",
            "Reconciles that failed or left a resource not Ready, by kind and reason "
            "(InvalidSpec, DatabaseUnavailable, SecretNotFound, Error).",
            ["kind", "reason"],
            registry=self.registry,
        )
        self.pods = Counter(
            "orbit_operator_worker_pods_total",
            "Worker pod registrations and removals, by action.",
            ["action"],
            registry=self.registry,
        )
        self._server: WSGIServer | None = None

    def reconciled(self, kind: str, reason: str) -> None:
        self.reconciles.labels(kind, reason).inc()

    def error(self, kind: str, reason: str) -> None:
        self.errors.labels(kind, reason).inc()

    def serve(self, host: str, port: int) -> None:
        """Expose /metrics on ``host:port``; port 0 turns it off."""
        if port:
            self._server, _thread = start_http_server(port, host, registry=self.registry)
            log.info("metrics on http://%s:%d/metrics", host, port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
