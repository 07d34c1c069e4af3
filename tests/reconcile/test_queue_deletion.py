"""Deleting a Queue follows its deletionPolicy; a queue with unfinished work says so."""

from __future__ import annotations

import functools

import sqlalchemy as sa

from orbit.reconcile import queue
from orbit.reconcile.admission import admit
from orbit.reconcile.resource import Resource
from orbit_store.db import run_transaction
from orbit_store.errors import Conflict
from orbit_store.pulse import service
from orbit_store.pulse.queues import queue_counts
from orbit_store.pulse.submit import SubmitRequest
from orbit_store.schema import queues


def queue_resource(policy: str) -> Resource:
    body, refusals = admit(
        {
            "apiVersion": "orbit.dev/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "mail", "namespace": "ops"},
            "spec": {"deletionPolicy": policy},
        }
    )
    assert refusals == []
    return Resource("Queue", "ops", "mail", body["spec"])


def declare_with_waiting_task(store: sa.Engine, resource: Resource) -> str:
    run_transaction(store, lambda c: queue.reconcile(c, resource))
    return service.submit(store, SubmitRequest(namespace="ops", queue="mail", handler="h")).task_id


def queue_exists(store: sa.Engine) -> bool:
    with store.connect() as conn:
        return (
            conn.execute(sa.select(queues.c.id).where(queues.c.name == "mail")).first() is not None
        )


def test_block_keeps_a_queue_with_waiting_tasks_and_says_why(store: sa.Engine) -> None:
    resource = queue_resource("Block")
    declare_with_waiting_task(store, resource)
    deletion = run_transaction(store, lambda c: queue.delete(c, resource))
    assert not deletion.done and deletion.reason == "HasUnfinishedTasks"
    assert (
        "1 unfinished tasks (1 waiting" in deletion.message
        and "Drain or Cancel" in deletion.message
    )
    assert queue_exists(store)


def test_drain_refuses_new_submissions_and_finishes_when_the_backlog_is_gone(
    store: sa.Engine,
) -> None:
    resource = queue_resource("Drain")
    task_id = declare_with_waiting_task(store, resource)
    assert not run_transaction(store, lambda c: queue.delete(c, resource)).done
    try:
        service.submit(store, SubmitRequest(namespace="ops", queue="mail", handler="h"))
        raise AssertionError("a draining queue must refuse submissions")
    except Conflict as exc:
        assert "being deleted" in str(exc)
    from orbit_store.pulse.cancel import cancel_task

    run_transaction(
        store, functools.partial(cancel_task, namespace="ops", task_id=task_id, actor="t")
    )
    assert run_transaction(store, lambda c: queue.delete(c, resource)).done
    assert not queue_exists(store)


def test_cancel_cancels_waiting_tasks_and_completes_the_deletion(store: sa.Engine) -> None:
    resource = queue_resource("Cancel")
    declare_with_waiting_task(store, resource)
    assert run_transaction(store, lambda c: queue.delete(c, resource)).done
    with store.connect() as conn:
        assert sum(queue_counts(conn, "ops", "mail").values()) == 0
