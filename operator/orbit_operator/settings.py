"""The operator's configuration, read from the environment once, when the package is imported.

`orbit operator` turns its options into these variables before it imports the handlers, and
`kopf run -m orbit_operator` reads them as they are. They are read at import because Kopf fixes
a timer's interval when the handler is declared.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ENV_DATABASE_URL = "ORBIT_DATABASE_URL"
ENV_SERVER_URL = "ORBIT_SERVER_URL"
ENV_RESYNC_SECONDS = "ORBIT_OPERATOR_RESYNC_SECONDS"
ENV_AUTOSCALE_SECONDS = "ORBIT_OPERATOR_AUTOSCALE_SECONDS"
ENV_RETRY_SECONDS = "ORBIT_OPERATOR_RETRY_SECONDS"
ENV_METRICS_PORT = "ORBIT_OPERATOR_METRICS_PORT"
ENV_METRICS_HOST = "ORBIT_OPERATOR_METRICS_HOST"
#: The Kubernetes namespace the operator runs in (the chart sets it from the downward API).
ENV_OWN_NAMESPACE = "ORBIT_OPERATOR_NAMESPACE"
#: Where a pod's own namespace is, when the variable is not set.
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

DEFAULT_SERVER_URL = "http://orbit.orbit-system:8080"

GROUP = "orbit.dev"
VERSION = "v1alpha1"
# Kopf's finalizer and its bookkeeping annotations carry Orbit's prefix, not Kopf's.
FINALIZER = "orbit.dev/finalizer"
ANNOTATION_PREFIX = "orbit.dev"
# The field manager of the Deployments the operator applies (server-side apply).
FIELD_MANAGER = "orbit-operator"
# When the operator last changed a WorkerPool Deployment's replicas (the scale-down cool-down).
SCALED_AT_ANNOTATION = "orbit.dev/scaled-at"


class ConfigError(ValueError):
    """An environment variable has a value the operator cannot use."""


@dataclass(frozen=True)
class OperatorConfig:
    database_url: str | None = None
    server_url: str = DEFAULT_SERVER_URL
    resync_seconds: float = 60.0  # re-reconcile every resource (drift repair, fresh counts)
    autoscale_seconds: float = 15.0  # re-size WorkerPools from the backlog
    retry_seconds: float = 10.0  # retry delay: database unavailable, deletion waiting on tasks
    metrics_port: int = 9090  # Prometheus /metrics; 0 turns it off
    metrics_host: str = "0.0.0.0"
    #: The Kubernetes namespace this operator runs in; None when unknown (outside a pod).
    own_namespace: str | None = None

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE
    ) -> OperatorConfig:
        env = os.environ if env is None else env
        defaults = cls()
        return cls(
            database_url=env.get(ENV_DATABASE_URL) or None,
            server_url=env.get(ENV_SERVER_URL) or defaults.server_url,
            resync_seconds=_seconds(env, ENV_RESYNC_SECONDS, defaults.resync_seconds),
            autoscale_seconds=_seconds(env, ENV_AUTOSCALE_SECONDS, defaults.autoscale_seconds),
            retry_seconds=_seconds(env, ENV_RETRY_SECONDS, defaults.retry_seconds),
            metrics_port=_port(env, ENV_METRICS_PORT, defaults.metrics_port),
            metrics_host=env.get(ENV_METRICS_HOST) or defaults.metrics_host,
            own_namespace=env.get(ENV_OWN_NAMESPACE) or _file_text(namespace_file),
        )


def _file_text(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise ConfigError(f"{name}={raw!r} must be greater than 0")
    return value


def _port(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise ConfigError(f"{name}={raw!r} is not a port number (0 turns metrics off)")
    return value


CONFIG = OperatorConfig.from_env()
