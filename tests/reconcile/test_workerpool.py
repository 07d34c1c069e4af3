"""WorkerPool builders: the Deployment a pool owns and the replicas its backlog asks for."""

from __future__ import annotations

import datetime as dt

from orbit.reconcile.admission import admit
from orbit.reconcile.resource import Resource
from orbit.reconcile.workerpool import POOL_LABEL, desired_deployment, desired_replicas

NOW = dt.datetime(2026, 1, 1, 12, 0)


def pool(**spec: object) -> Resource:
    body = {
        "apiVersion": "orbit.dev/v1alpha1",
        "kind": "WorkerPool",
        "metadata": {"name": "mailers", "namespace": "shop"},
        "spec": {"queues": ["mail"], "image": "shop/workers:1", "module": "shop.w:worker", **spec},
    }
    admitted, refusals = admit(body)
    assert refusals == []
    return Resource("WorkerPool", "shop", "mailers", admitted["spec"])


def scaling(**overrides: object) -> dict[str, object]:
    return {
        "enabled": True,
        "minReplicas": 1,
        "maxReplicas": 5,
        "targetBacklogPerWorker": 10,
        "cooldownSeconds": 60,
        **overrides,
    }


def test_the_deployment_runs_orbit_worker_with_the_pool_label_and_pod_uid() -> None:
    deployment = desired_deployment(pool(concurrency=8), replicas=2, server_url="http://orbit")
    template = deployment["spec"]["template"]
    [worker] = template["spec"]["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert template["metadata"]["labels"][POOL_LABEL] == "mailers"
    assert worker["args"] == [
        "orbit",
        "worker",
        "shop.w:worker",
        "--concurrency",
        "8",
        "--queues",
        "mail",
    ]
    env = {e["name"]: e for e in worker["env"]}
    assert env["ORBIT_POD_UID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid"
    assert env["ORBIT_SERVER"]["value"] == "http://orbit"


def test_fixed_replicas_ignore_the_backlog() -> None:
    assert desired_replicas(pool(replicas=3).spec, 1000, 3, None, NOW) == 3


def test_autoscaling_follows_the_backlog_within_bounds() -> None:
    spec = pool(concurrency=2, autoscaling=scaling()).spec  # 20 waiting tasks per pod
    assert desired_replicas(spec, 0, None, None, NOW) == 1
    assert desired_replicas(spec, 41, 1, None, NOW) == 3
    assert desired_replicas(spec, 10_000, 3, None, NOW) == 5


def test_scaling_down_waits_out_the_cool_down_but_scaling_up_never_waits() -> None:
    spec = pool(concurrency=2, autoscaling=scaling()).spec
    just_scaled = NOW - dt.timedelta(seconds=30)
    assert desired_replicas(spec, 0, 4, just_scaled, NOW) == 4
    assert desired_replicas(spec, 0, 4, NOW - dt.timedelta(seconds=61), NOW) == 1
    assert desired_replicas(spec, 100, 2, just_scaled, NOW) == 5


def test_a_pool_naming_handlers_runs_workers_that_serve_only_those() -> None:
    deployment = desired_deployment(
        pool(handlers=["mail.send", "mail.bounce"]), replicas=1, server_url="http://orbit"
    )
    [worker] = deployment["spec"]["template"]["spec"]["containers"]
    assert worker["args"][-2:] == ["--handlers", "mail.send,mail.bounce"]


def test_a_pool_without_handlers_serves_every_registered_handler() -> None:
    deployment = desired_deployment(pool(), replicas=1, server_url="http://orbit")
    [worker] = deployment["spec"]["template"]["spec"]["containers"]
    assert "--handlers" not in worker["args"]
