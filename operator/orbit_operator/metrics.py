"""Prometheus metrics of the operator, on their own registry and port (``/metrics``)."""

from __future__ import annotations

import logging
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

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
        self.durations = Histogram(
            "orbit_operator_reconcile_duration_seconds",
            "Time to reconcile one custom resource into MySQL (admission, the store transaction "
            "and the status), by kind.",
            ["kind"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
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
