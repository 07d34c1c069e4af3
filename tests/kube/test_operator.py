"""`orbit operator` against the real API server and MariaDB: create, edit (observedGeneration),
drift repair, deletion held by the finalizer, a namespace's resources deleted together, and
resources racing for the same rows. One operator for the module, with a one-second resync.

The server has no namespace controller: deleting a namespace in a cluster deletes each of its
resources, which is what `kubectl delete orbit --all -n NS` does here.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store.pulse.service import submit
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.schema import namespaces, queues, quotas, schedules

from .conftest import ORBIT, Cluster, Kube, apply, orbit_resource, wait_for

pytestmark = pytest.mark.slow


def row(engine: sa.Engine, table: sa.Table, namespace: str, name: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(
            sa.select(table).where(table.c.namespace == namespace, table.c.name == name)
        ).one_or_none()


def submit_task(engine: sa.Engine, namespace: str, queue: str) -> str:
    return str(submit(engine, SubmitRequest(namespace=namespace, queue=queue, handler="h")).task_id)


def test_create_edit_and_delete_a_queue(
    cluster: Cluster, kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    apply(cluster, orbit_resource("Queue", namespace, "payments", {"priority": -5}))
    obj = kube.wait_ready("Queue", namespace, "payments")
    assert row(engine, queues, namespace, "payments").priority == -5
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"] == 1
    assert "orbit.dev/finalizer" in obj["metadata"]["finalizers"]
    shown = cluster.kubectl("-n", namespace, "get", "oq", "payments").stdout.splitlines()
    assert shown[1].split()[1:5] == ["0", "0", "false", "True"]  # WAITING RUNNING PAUSED READY

    cluster.kubectl(
        "-n", namespace, "patch", "queue", "payments", "--type=merge",
        "-p", '{"spec":{"priority":7,"leaseSeconds":90}}',
    )  # fmt: skip
    obj = wait_for(
        "observedGeneration 2",
        lambda: (
            (o := kube.orbit("Queue", namespace, "payments"))
            and o["status"].get("observedGeneration") == 2
            and o
        ),
    )
    assert obj["metadata"]["generation"] == 2
    ready = kube.ready("Queue", namespace, "payments") or {}
    assert (ready["status"], ready["observedGeneration"]) == ("True", 2)
    stored = row(engine, queues, namespace, "payments")
    assert (stored.priority, stored.lease_seconds, stored.spec_generation) == (7, 90, 2)

    cluster.kubectl("-n", namespace, "delete", "queue", "payments", "--timeout=60s")
    assert kube.orbit("Queue", namespace, "payments") is None
    assert row(engine, queues, namespace, "payments") is None


def test_drift_in_mysql_is_repaired_from_the_resource(
    cluster: Cluster, kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    apply(
        cluster,
        orbit_resource("Queue", namespace, "q", {"priority": 3}),
        orbit_resource("Quota", namespace, "limits", {"queue": "q", "maxWaiting": 10}),
    )
    kube.wait_ready("Queue", namespace, "q")
    kube.wait_ready("Quota", namespace, "limits")

    with engine.begin() as conn:  # someone edits and deletes rows by hand
        conn.execute(
            queues.update()
            .where(queues.c.namespace == namespace, queues.c.name == "q")
            .values(priority=99)
        )
        conn.execute(
            quotas.delete().where(quotas.c.namespace == namespace, quotas.c.name == "limits")
        )

    wait_for("queue repaired", lambda: row(engine, queues, namespace, "q").priority == 3)
    repaired = wait_for("quota back", lambda: row(engine, quotas, namespace, "limits"))
    assert repaired.max_waiting == 10


def test_a_deletion_waits_for_unfinished_tasks_under_its_finalizer(
    cluster: Cluster, kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    apply(cluster, orbit_resource("Queue", namespace, "q", {"deletionPolicy": "Block"}))
    kube.wait_ready("Queue", namespace, "q")
    submit_task(engine, namespace, "q")

    cluster.kubectl("-n", namespace, "delete", "queue", "q", "--wait=false")
    held = kube.wait_ready("Queue", namespace, "q", status="False", reason="HasUnfinishedTasks")
    assert held["metadata"]["deletionTimestamp"]
    assert "1 unfinished tasks (1 waiting" in held["status"]["conditions"][0]["message"]
    assert row(engine, queues, namespace, "q") is not None

    # Editing a resource being deleted still works on a real server: Cancel lets it go.
    cluster.kubectl(
        "-n", namespace, "patch", "queue", "q", "--type=merge",
        "-p", '{"spec":{"deletionPolicy":"Cancel"}}',
    )  # fmt: skip
    kube.wait_gone(ORBIT, "Queue", namespace, "q")
    assert row(engine, queues, namespace, "q") is None


def test_deleting_everything_in_a_namespace_removes_its_rows(
    cluster: Cluster, kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    apply(
        cluster,
        orbit_resource("Queue", namespace, "q", {}),
        orbit_resource("Quota", namespace, "limits", {"queue": "q", "maxRunning": 2}),
        orbit_resource(
            "Schedule", namespace, "tick", {"schedule": "@hourly", "taskTemplate": {"handler": "h"}}
        ),
    )
    for kind, name in (("Queue", "q"), ("Quota", "limits"), ("Schedule", "tick")):
        kube.wait_ready(kind, namespace, name)

    # What the namespace controller does when the namespace is deleted.
    cluster.kubectl("-n", namespace, "delete", "orbit", "--all", "--timeout=60s")

    for kind, name in (("Queue", "q"), ("Quota", "limits"), ("Schedule", "tick")):
        assert kube.orbit(kind, namespace, name) is None
    assert row(engine, queues, namespace, "q") is None
    assert row(engine, quotas, namespace, "limits") is None
    assert row(engine, schedules, namespace, "tick") is None


def test_resources_racing_for_the_same_rows_all_take_effect(
    cluster: Cluster, kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    """Two Quotas on one queue, applied together with the Queue into a namespace MySQL does not
    know yet: the operator reconciles them concurrently, each creating the namespace's row and
    counting the queue's tasks under the same locks. Every one ends in effect, once."""
    quota = {"queue": "q", "maxWaiting": 100}
    apply(
        cluster,
        orbit_resource("Quota", namespace, "first", quota),
        orbit_resource("Quota", namespace, "second", {**quota, "maxRunning": 5}),
        orbit_resource("Queue", namespace, "q", {}),
        orbit_resource("Quota", namespace, "everything", {"maxWaiting": 1000}),
    )
    for name in ("first", "second", "everything"):
        kube.wait_ready("Quota", namespace, name)
    with engine.connect() as conn:
        assert (
            conn.execute(
                sa.select(sa.func.count()).where(namespaces.c.name == namespace)
            ).scalar_one()
            == 1
        )
        declared = conn.execute(
            sa.select(quotas.c.name, quotas.c.queue).where(quotas.c.namespace == namespace)
        ).all()
    assert sorted(declared) == [("everything", "*"), ("first", "q"), ("second", "q")]
    # Both quotas on q count the task submitted now, once each.
    submit_task(engine, namespace, "q")
    counted = {
        name: row(engine, quotas, namespace, name).waiting
        for name in ("first", "second", "everything")
    }
    assert counted == {"first": 1, "second": 1, "everything": 1}
