"""Worker pods: registered when Running; when gone, their sessions are revoked and their
running attempts handled by Pulse's rules (safe retried, unsafe to review)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from conftest import Kube, wait_for

from orbit_store.db import run_transaction
from orbit_store.pulse.claim.claim import claim_tasks
from orbit_store.pulse.leases.start import start_attempt
from orbit_store.pulse.model import Safety, TaskState
from orbit_store.pulse.service import reap, submit
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.pulse.workers.sessions import register_session
from orbit_store.schema import tasks, worker_pods, worker_sessions

pytestmark = pytest.mark.slow


def pod(namespace: str, name: str, pool: str | None = "shop") -> dict[str, Any]:
    labels = {"orbit.dev/pool": pool} if pool else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"nodeName": "node-1", "containers": [{"name": "worker", "image": "w:1"}]},
    }


def run_pod(kube: Kube, namespace: str, name: str, pool: str | None = "shop") -> str:
    uid = str(kube.create(pod(namespace, name, pool))["metadata"]["uid"])
    kube.patch("v1", "Pod", namespace, name, {"status": {"phase": "Running"}}, sub="status")
    return uid


def pod_row(engine: sa.Engine, uid: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.select(worker_pods).where(worker_pods.c.uid == uid)).one_or_none()


def state_of(engine: sa.Engine, task_id: str) -> str:
    with engine.connect() as conn:
        return str(conn.execute(sa.select(tasks.c.state).where(tasks.c.id == task_id)).scalar_one())


def test_running_pod_is_registered_and_a_failed_one_forgotten(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    uid = run_pod(kube, namespace, "shop-1")
    row = wait_for("pod registered", lambda: pod_row(engine, uid))
    assert (row.namespace, row.pod_name, row.pool, row.node, row.phase) == (
        namespace,
        "shop-1",
        "shop",
        "node-1",
        "Running",
    )
    assert row.deleted_at is None

    kube.patch("v1", "Pod", namespace, "shop-1", {"status": {"phase": "Failed"}}, sub="status")
    wait_for("pod forgotten", lambda: pod_row(engine, uid).deleted_at is not None)


def test_an_unlabelled_pod_is_not_registered_until_it_carries_a_pool_label(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    unlabelled = run_pod(kube, namespace, "other", pool=None)
    # A labelled pod created afterwards is registered: the operator has seen the pods by now.
    later = run_pod(kube, namespace, "shop-after")
    wait_for("later pod registered", lambda: pod_row(engine, later))
    assert pod_row(engine, unlabelled) is None
    # The same pod, once labelled, is registered: it was ignored for its missing label only.
    kube.patch(
        "v1", "Pod", namespace, "other", {"metadata": {"labels": {"orbit.dev/pool": "shop"}}}
    )
    assert wait_for("labelled pod registered", lambda: pod_row(engine, unlabelled)).pool == "shop"


def test_deleted_pod_revokes_its_session_and_its_attempts_lapse_by_safety(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    uid = run_pod(kube, namespace, "shop-2")
    wait_for("pod registered", lambda: pod_row(engine, uid))
    session = run_transaction(
        engine,
        lambda conn: register_session(
            conn,
            namespace=namespace,
            worker_name=f"shop-2-{uuid.uuid4().hex[:4]}",
            queues=["default"],
            ttl_seconds=600,
            pod_uid=uid,
            require_registered_pod=True,
        ),
    )
    safe = submit(
        engine,
        SubmitRequest(namespace=namespace, queue="default", handler="h", safety=Safety.SAFE),
    ).task_id
    unsafe = submit(
        engine,
        SubmitRequest(namespace=namespace, queue="default", handler="h", safety=Safety.UNSAFE),
    ).task_id
    grants = run_transaction(
        engine,
        lambda conn: claim_tasks(
            conn, namespace=namespace, queues_=["default"], limit=2, worker_session_id=session.id
        ),
    )
    assert {g.task_id for g in grants} == {safe, unsafe}
    for grant in grants:
        run_transaction(
            engine,
            lambda conn, g=grant: start_attempt(
                conn, namespace=namespace, attempt_id=g.attempt_id, token=g.token
            ),
        )

    kube.delete("v1", "Pod", namespace, "shop-2")

    def revoked() -> bool:
        with engine.connect() as conn:
            state = conn.execute(
                sa.select(worker_sessions.c.state).where(worker_sessions.c.id == session.id)
            ).scalar_one()
        return state == "REVOKED"

    wait_for("session revoked", revoked)
    assert pod_row(engine, uid).deleted_at is not None
    report = reap(engine, namespace=namespace)
    assert report.leases_lapsed == 2
    assert state_of(engine, safe) == TaskState.WAITING
    assert state_of(engine, unsafe) == TaskState.NEEDS_REVIEW
