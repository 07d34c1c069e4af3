"""Queue resources through the operator: rows in MySQL, status, finalizers and deletion
policies, drift repair by the resync timer."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store.pulse.model import TaskState
from orbit_store.pulse.service import submit
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.schema import queues, tasks

from .conftest import ORBIT, Kube, orbit_resource, wait_for

pytestmark = pytest.mark.slow


def queue_row(engine: sa.Engine, namespace: str, name: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(
            sa.select(queues).where(queues.c.namespace == namespace, queues.c.name == name)
        ).one_or_none()


def task_state(engine: sa.Engine, task_id: str) -> str:
    with engine.connect() as conn:
        return str(conn.execute(sa.select(tasks.c.state).where(tasks.c.id == task_id)).scalar_one())


def test_create_writes_the_row_and_reports_ready(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    kube.create(orbit_resource("Queue", namespace, "payments", {"priority": -5}))

    obj = kube.wait_ready("Queue", namespace, "payments")
    row = wait_for("queue row", lambda: queue_row(engine, namespace, "payments"))
    assert row.priority == -5
    assert row.max_attempts == 3  # CRD default applied by admission
    assert row.source == "operator"
    status = obj["status"]
    assert status["observedGeneration"] == obj["metadata"]["generation"] == 1
    assert status["waiting"] == 0 and status["running"] == 0 and status["paused"] is False
    ready = status["conditions"][0]
    assert ready["reason"] == "Reconciled"
    assert ready["observedGeneration"] == 1
    assert ready["lastTransitionTime"].endswith("Z")
    assert "orbit.dev/finalizer" in obj["metadata"]["finalizers"]


def test_update_is_applied_and_observed_generation_follows(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    kube.create(orbit_resource("Queue", namespace, "q", {}))
    kube.wait_ready("Queue", namespace, "q")

    kube.patch(ORBIT, "Queue", namespace, "q", {"spec": {"paused": True, "leaseSeconds": 90}})

    obj = wait_for(
        "observedGeneration 2",
        lambda: (
            (o := kube.orbit("Queue", namespace, "q"))
            and o["status"].get("observedGeneration") == 2
            and o
        ),
    )
    row = queue_row(engine, namespace, "q")
    assert row.paused is True and row.lease_seconds == 90 and row.spec_generation == 2
    assert obj["status"]["paused"] is True
    assert obj["status"]["conditions"][0]["observedGeneration"] == 2


def test_delete_without_tasks_removes_row_and_finalizer(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    kube.create(orbit_resource("Queue", namespace, "q", {}))
    kube.wait_ready("Queue", namespace, "q")

    kube.delete(ORBIT, "Queue", namespace, "q")

    kube.wait_gone(ORBIT, "Queue", namespace, "q")
    assert queue_row(engine, namespace, "q") is None


def test_block_keeps_a_queue_with_waiting_tasks_until_policy_cancel(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    kube.create(orbit_resource("Queue", namespace, "q", {"deletionPolicy": "Block"}))
    kube.wait_ready("Queue", namespace, "q")
    task = submit(engine, SubmitRequest(namespace=namespace, queue="q", handler="h")).task_id

    kube.delete(ORBIT, "Queue", namespace, "q")

    obj = kube.wait_ready("Queue", namespace, "q", status="False", reason="HasUnfinishedTasks")
    message = obj["status"]["conditions"][0]["message"]
    assert "1 unfinished tasks (1 waiting" in message
    assert "deletionPolicy" in message
    assert obj["metadata"]["deletionTimestamp"]
    assert "orbit.dev/finalizer" in obj["metadata"]["finalizers"]
    assert queue_row(engine, namespace, "q") is not None
    assert task_state(engine, task) == TaskState.WAITING

    # A Queue being deleted can still be edited: Cancel cancels the task and lets it go.
    kube.patch(ORBIT, "Queue", namespace, "q", {"spec": {"deletionPolicy": "Cancel"}})

    kube.wait_gone(ORBIT, "Queue", namespace, "q")
    assert task_state(engine, task) == TaskState.CANCELLED
    assert queue_row(engine, namespace, "q") is None


def test_resync_restores_a_row_deleted_or_edited_by_hand(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    kube.create(orbit_resource("Queue", namespace, "q", {"priority": 7}))
    kube.wait_ready("Queue", namespace, "q")
    wait_for("queue row", lambda: queue_row(engine, namespace, "q"))

    with engine.begin() as conn:
        conn.execute(queues.delete().where(queues.c.namespace == namespace))
    wait_for("row restored", lambda: queue_row(engine, namespace, "q"))

    with engine.begin() as conn:
        conn.execute(
            queues.update().where(queues.c.namespace == namespace).values(priority=99, paused=True)
        )
    restored = wait_for(
        "row repaired",
        lambda: (row := queue_row(engine, namespace, "q")) and row.priority == 7 and row,
    )
    assert restored.paused is False


def test_status_counts_follow_the_backlog(kube: Kube, engine: sa.Engine, namespace: str) -> None:
    kube.create(orbit_resource("Queue", namespace, "q", {}))
    kube.wait_ready("Queue", namespace, "q")

    for i in range(3):
        submit(engine, SubmitRequest(namespace=namespace, queue="q", handler=f"h{i}"))

    wait_for(
        "status.waiting == 3",
        lambda: (kube.orbit("Queue", namespace, "q") or {})["status"].get("waiting") == 3,
    )
