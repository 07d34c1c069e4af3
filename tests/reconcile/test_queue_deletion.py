"""Deleting a Queue follows its deletionPolicy; a queue with unfinished work says so."""

from __future__ import annotations

import functools
import multiprocessing
import time
from typing import Any

import pytest
import sqlalchemy as sa

from orbit.reconcile import queue
from orbit.reconcile.admission import admit
from orbit.reconcile.resource import Resource
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.errors import Conflict, NotFound
from orbit_store.pulse import service
from orbit_store.pulse.limits.queues import queue_counts
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.schema import queues, tasks


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
    from orbit_store.pulse.manual.cancel import cancel_task

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


def _submit_until_gone(url: str, namespace: str, barrier: Any) -> list[str]:
    """Submit to queue 'mail' as fast as possible until it is gone; the ids accepted (201)."""
    engine = create_store_engine(url)
    accepted: list[str] = []
    request = SubmitRequest(namespace=namespace, queue="mail", handler="h")
    with engine.connect():  # connect before the race, not inside its window
        pass
    barrier.wait()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            try:
                accepted.append(service.submit(engine, request).task_id)
            except Conflict:  # draining: accepts nothing more, but not gone yet
                time.sleep(0.001)
            except NotFound:
                return accepted
        raise AssertionError("the queue was never deleted")
    finally:
        engine.dispose()


#: Seconds between the submitters' start and the deletion, one per round. Eight rounds go from
#: "at once" to "with a backlog"; the longer ones run only while nothing was accepted yet (on a
#: starved machine the first submission can take longer than 0.35 s).
DELETION_DELAYS = [0.05 * n for n in range(8)] + [0.7, 1.4, 2.8, 5.6]


@pytest.mark.slow
def test_a_task_accepted_while_its_queue_is_deleted_is_never_stranded(store: sa.Engine) -> None:
    """Six processes submit while the queue is deleted (Cancel policy),
    round after round. Every task they were told was accepted ends cancelled by the deletion;
    none is left WAITING in a queue that no longer exists (before, a submission that had read
    the queue before the deletion committed after it)."""
    if store.dialect.name == "sqlite":
        pytest.skip("several processes racing: MariaDB")
    url = store.url.render_as_string(hide_password=False)
    ctx = multiprocessing.get_context("spawn")
    total = 0
    with ctx.Manager() as manager, ctx.Pool(6) as pool:
        for round_, delay in enumerate(DELETION_DELAYS):
            if round_ >= 8 and total:
                break  # the longer delays are there for a starved machine only
            namespace = f"ops-{round_}"
            resource = Resource("Queue", namespace, "mail", queue_resource("Cancel").spec)
            run_transaction(store, lambda c, r=resource: queue.reconcile(c, r))
            barrier = manager.Barrier(7)
            pending = pool.starmap_async(_submit_until_gone, [(url, namespace, barrier)] * 6)
            barrier.wait()
            time.sleep(delay)  # from "at once" to "with a backlog"
            while not run_transaction(store, lambda c, r=resource: queue.delete(c, r)).done:
                pass
            accepted = [t for batch in pending.get(90) for t in batch]
            total += len(accepted)
            with store.connect() as conn:
                states = conn.execute(
                    sa.select(tasks.c.state, sa.func.count())
                    .where(tasks.c.namespace == namespace)
                    .group_by(tasks.c.state)
                ).all()
            assert dict(states) == ({"CANCELLED": len(accepted)} if accepted else {}), states
    assert total, "nothing was accepted before a deletion: nothing was tested"
