"""WorkerPool resources: the Deployment the pool owns, sized from the MySQL backlog."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from conftest import ORBIT, SERVER_URL, Kube, orbit_resource, wait_for

from orbit_store.db import run_transaction
from orbit_store.pulse.manual.cancel import cancel_task
from orbit_store.pulse.service import submit
from orbit_store.pulse.submit.accept import SubmitRequest

pytestmark = pytest.mark.slow

APPS = "apps/v1"


def deployment(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    return kube.get(APPS, "Deployment", namespace, name)


def replicas(kube: Kube, namespace: str, name: str) -> int | None:
    found = deployment(kube, namespace, name)
    return None if found is None else found["spec"]["replicas"]


def test_pool_owns_a_deployment_of_workers(kube: Kube, namespace: str) -> None:
    spec = {
        "queues": ["default"],
        "image": "registry.example.com/shop/workers:1.0",
        "module": "shop.workers:worker",
        "concurrency": 3,
        "replicas": 2,
        "template": {
            "metadata": {"labels": {"team": "payments"}},
            "spec": {"containers": [{"name": "worker", "env": [{"name": "X", "value": "1"}]}]},
        },
    }
    pool = kube.create(orbit_resource("WorkerPool", namespace, "shop", spec))

    made = wait_for("Deployment", lambda: deployment(kube, namespace, "shop"))
    assert made["metadata"]["labels"]["orbit.dev/pool"] == "shop"
    owner = made["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "WorkerPool",
        "shop",
        pool["metadata"]["uid"],
    )
    assert owner["controller"] is True
    assert made["spec"]["replicas"] == 2
    assert made["spec"]["selector"] == {"matchLabels": {"orbit.dev/pool": "shop"}}
    template = made["spec"]["template"]
    assert template["metadata"]["labels"]["orbit.dev/pool"] == "shop"
    assert template["metadata"]["labels"]["team"] == "payments"
    worker = template["spec"]["containers"][0]
    assert worker["image"] == "registry.example.com/shop/workers:1.0"
    assert worker["args"] == [
        "orbit",
        "worker",
        "shop.workers:worker",
        "--concurrency",
        "3",
        "--queues",
        "default",
    ]
    env = {e["name"]: e for e in worker["env"]}
    assert env["ORBIT_SERVER"]["value"] == SERVER_URL
    assert env["ORBIT_NAMESPACE"]["value"] == namespace
    assert env["ORBIT_POD_UID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.uid"}}
    assert env["X"]["value"] == "1"

    obj = kube.wait_ready("WorkerPool", namespace, "shop")
    assert obj["status"]["desiredReplicas"] == 2
    assert obj["status"]["observedGeneration"] == 1

    # The Deployment's ready pods show in the pool's status.
    kube.patch(
        APPS, "Deployment", namespace, "shop", {"status": {"readyReplicas": 2}}, sub="status"
    )
    wait_for(
        "readyReplicas 2",
        lambda: kube.orbit("WorkerPool", namespace, "shop")["status"].get("readyReplicas") == 2,
    )

    # A changed spec changes the Deployment; deleting the pool deletes the Deployment.
    kube.patch(
        ORBIT,
        "WorkerPool",
        namespace,
        "shop",
        {"spec": {"image": "registry.example.com/shop/workers:1.1"}},
    )
    wait_for(
        "image rolled",
        lambda: deployment(kube, namespace, "shop")["spec"]["template"]["spec"]["containers"][0][
            "image"
        ].endswith(":1.1"),
    )
    kube.delete(ORBIT, "WorkerPool", namespace, "shop")
    kube.wait_gone(ORBIT, "WorkerPool", namespace, "shop")
    kube.wait_gone(APPS, "Deployment", namespace, "shop")


def test_autoscaling_follows_the_backlog_within_bounds(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    spec = {
        "queues": ["default"],
        "image": "workers:1",
        "module": "app.workers:worker",
        "concurrency": 2,
        "autoscaling": {
            "enabled": True,
            "minReplicas": 1,
            "maxReplicas": 4,
            "targetBacklogPerWorker": 1,
            "cooldownSeconds": 0,
        },
    }
    kube.create(orbit_resource("WorkerPool", namespace, "auto", spec))
    wait_for("min replicas", lambda: replicas(kube, namespace, "auto") == 1)

    def add(n: int) -> list[str]:
        return [
            submit(engine, SubmitRequest(namespace=namespace, queue="default", handler="h")).task_id
            for _ in range(n)
        ]

    tasks = add(5)  # ceil(5 / (1 * 2)) = 3
    wait_for("3 replicas", lambda: replicas(kube, namespace, "auto") == 3)
    obj = wait_for(
        "status follows",
        lambda: (
            (o := kube.orbit("WorkerPool", namespace, "auto"))
            and o["status"].get("desiredReplicas") == 3
            and o
        ),
    )
    assert obj["status"]["backlog"] == 5

    tasks += add(20)  # ceil(25 / 2) = 13, capped at maxReplicas
    wait_for("max replicas", lambda: replicas(kube, namespace, "auto") == 4)

    for task_id in tasks:
        run_transaction(
            engine,
            lambda conn, t=task_id: cancel_task(
                conn, namespace=namespace, task_id=t, actor="test", reason="done"
            ),
        )
    wait_for("back to min replicas", lambda: replicas(kube, namespace, "auto") == 1)


def test_invalid_pool_creates_nothing(kube: Kube, namespace: str) -> None:
    spec = {
        "queues": ["default"],
        "image": "workers:1",
        "module": "app.workers:worker",
        "replicas": 2,
        "autoscaling": {"enabled": True, "maxReplicas": 3},
    }
    kube.create(orbit_resource("WorkerPool", namespace, "both", spec))

    obj = kube.wait_ready("WorkerPool", namespace, "both", status="False", reason="InvalidSpec")
    assert "either replicas or autoscaling.enabled" in obj["status"]["conditions"][0]["message"]
    assert deployment(kube, namespace, "both") is None


def test_a_pool_whose_queue_is_not_declared_yet_waits_for_it(kube: Kube, namespace: str) -> None:
    """A WorkerPool applied before its Queue is not refused: Ready=False says which Queue it
    waits for, no Deployment is made, and it is retried until the Queue exists."""
    spec = {"queues": ["orders"], "image": "workers:1", "module": "app.workers:worker"}
    kube.create(orbit_resource("WorkerPool", namespace, "early", spec))

    obj = kube.wait_ready("WorkerPool", namespace, "early", status="False", reason="QueueNotFound")
    assert "waiting for Queue orders" in obj["status"]["conditions"][0]["message"]
    assert deployment(kube, namespace, "early") is None

    kube.create(orbit_resource("Queue", namespace, "orders", {}))
    kube.wait_ready("WorkerPool", namespace, "early")
    assert deployment(kube, namespace, "early") is not None
