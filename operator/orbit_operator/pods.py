"""Worker pods (labelled with their pool) → `worker_pods` rows, for cluster mode
(`orbit server --require-registered-pods`: a worker session must name a registered, live pod).

A Running pod is registered. A pod that is gone (deleted) or finished (Failed, Succeeded) is
forgotten: its worker sessions are revoked, so its leases lapse now and the reaper applies
Pulse's rules (safe tasks retried, unsafe ones to NEEDS_REVIEW). A terminating pod stays
registered until it is gone: its worker drains within the grace period.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from orbit.reconcile.workerpool import POOL_LABEL
from orbit_store.pulse.workers.pods import PodInfo, forget_pod, pool_pods, register_pod

from . import database
from .context import Context, context_of

log = logging.getLogger("orbit.operator.pods")

FINISHED = ("Failed", "Succeeded")


def pod_info(body: Any) -> PodInfo:
    meta = body.get("metadata") or {}
    return PodInfo(
        uid=str(meta.get("uid")),
        namespace=str(meta.get("namespace")),
        pod_name=str(meta.get("name")),
        pool=str((meta.get("labels") or {}).get(POOL_LABEL)),
        node=(body.get("spec") or {}).get("nodeName"),
        phase=str((body.get("status") or {}).get("phase")),
    )


def register(ctx: Context, pod: PodInfo) -> None:
    if database.run(ctx.engine, lambda conn: register_pod(conn, pod)):
        ctx.metrics.pods.labels("registered").inc()
        log.info("worker pod %s/%s registered (pool %s)", pod.namespace, pod.pod_name, pod.pool)


def forget(ctx: Context, pod: PodInfo, reason: str) -> None:
    revoked = database.run(ctx.engine, lambda conn: forget_pod(conn, pod.uid, reason))
    ctx.metrics.pods.labels("forgotten").inc()
    log.info(
        "worker pod %s/%s forgotten (%s): %d sessions revoked",
        pod.namespace,
        pod.pod_name,
        reason,
        revoked,
    )


@kopf.on.event("", "v1", "pods", labels={POOL_LABEL: kopf.PRESENT})
def worker_pod_event(type: str, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    ctx = context_of(memo)
    pod = pod_info(body)
    if type == "DELETED":
        forget(ctx, pod, "pod deleted")
    elif pod.phase in FINISHED:
        forget(ctx, pod, f"pod {pod.phase}")
    elif pod.phase == "Running":
        register(ctx, pod)


def sync_pool_pods(ctx: Context, namespace: str, pool: str) -> None:
    """Repair what missed events left behind: register the pool's Running pods, forget the
    registered ones that are gone. Registered pods are read before the pods are listed, so a
    pod registered meanwhile is in the list too."""
    registered = database.run(ctx.engine, lambda conn: pool_pods(conn, namespace, pool))
    pods = [
        pod_info(p)
        for p in ctx.kube.list("v1", "pods", namespace, label_selector=f"{POOL_LABEL}={pool}")
    ]
    for pod in pods:
        if pod.phase == "Running" and pod.pool == pool:
            register(ctx, pod)
    live = {pod.uid for pod in pods if pod.phase not in FINISHED}
    for gone in registered:
        if gone.uid not in live:
            forget(ctx, gone, "pod no longer exists")
