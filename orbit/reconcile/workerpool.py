"""WorkerPool: the Deployment of worker pods a pool owns (a pure builder), how many replicas
the MySQL backlog asks for, and the pool's status. The operator applies the Deployment; pods
are registered and revoked through ``orbit_store.pulse.workers.pods``."""

from __future__ import annotations

import copy
import datetime as dt
import math
from typing import Any

import sqlalchemy as sa

from orbit_store.pulse.limits.queues import queue_counts
from orbit_store.pulse.workers.pods import pool_live_sessions

from .queue import require_declared_queues
from .resource import Resource

POOL_LABEL = "orbit.dev/pool"
WORKER_CONTAINER = "worker"


def pool_labels(name: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "orbit-worker",
        "app.kubernetes.io/managed-by": "orbit",
        POOL_LABEL: name,
    }


def desired_deployment(resource: Resource, replicas: int, server_url: str) -> dict[str, Any]:
    """The Deployment for the pool: pods labelled with the pool, running `orbit worker`."""
    spec = resource.spec
    template = copy.deepcopy(spec.get("template") or {})
    meta = template.setdefault("metadata", {})
    meta["labels"] = {**meta.get("labels", {}), **pool_labels(resource.name)}
    pod = template.setdefault("spec", {})
    pod.setdefault("terminationGracePeriodSeconds", 60)
    containers = pod.setdefault("containers", [])
    worker = next((c for c in containers if c.get("name") == WORKER_CONTAINER), None)
    if worker is None:
        worker = {"name": WORKER_CONTAINER}
        containers.insert(0, worker)
    worker["image"] = spec["image"]
    worker["args"] = [
        "orbit",
        "worker",
        spec["module"],
        "--concurrency",
        str(spec["concurrency"]),
        "--queues",
        ",".join(spec["queues"]),
    ]
    if spec.get("handlers"):  # absent: every handler the module registers
        worker["args"] += ["--handlers", ",".join(spec["handlers"])]
    ours: list[dict[str, Any]] = [
        {"name": "ORBIT_SERVER", "value": server_url},
        {"name": "ORBIT_NAMESPACE", "value": resource.namespace},
        {"name": "ORBIT_POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
    ]
    names = {o["name"] for o in ours}
    theirs = [e for e in worker.get("env", []) if e["name"] not in names]
    worker["env"] = ours + theirs
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": resource.name,
            "namespace": resource.namespace,
            "labels": pool_labels(resource.name),
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {POOL_LABEL: resource.name}},
            "template": template,
        },
    }


def backlog(conn: sa.Connection, resource: Resource) -> int:
    """WAITING tasks in the pool's queues, measured in MySQL."""
    return sum(
        queue_counts(conn, resource.namespace, q)["WAITING"] for q in resource.spec["queues"]
    )


def desired_replicas(
    spec: dict[str, Any],
    waiting: int,
    current: int | None,
    last_scaled_at: dt.datetime | None,
    now: dt.datetime,
) -> int:
    """Fixed ``replicas`` (or 1), or — with autoscaling — ceil(backlog / (target * concurrency))
    within min/max. Scaling down waits out the cool-down since the last change; scaling up
    never waits."""
    scaling = spec.get("autoscaling") or {}
    if not scaling.get("enabled"):
        return int(spec["replicas"]) if spec.get("replicas") is not None else 1
    per_pod = scaling["targetBacklogPerWorker"] * spec["concurrency"]
    wanted = math.ceil(waiting / per_pod) if waiting else 0
    wanted = int(max(scaling["minReplicas"], min(scaling["maxReplicas"], wanted)))
    if current is None or wanted >= current:
        return wanted
    cooling = (
        last_scaled_at is not None
        and (now - last_scaled_at).total_seconds() < scaling["cooldownSeconds"]
    )
    return current if cooling else wanted


def status_of(conn: sa.Connection, resource: Resource) -> dict[str, int]:
    """Workers with a live session and the backlog; InvalidSpec for undeclared queues."""
    require_declared_queues(conn, resource, "spec.queues", list(resource.spec["queues"]))
    return {
        "workers": pool_live_sessions(conn, resource.namespace, resource.name),
        "backlog": backlog(conn, resource),
    }
