"""Invariant 8 through the operator: applying, pausing and deleting a Queue custom resource each
append an audit row (actor orbit-operator, the resource's generation) through the reconcile
functions `orbit apply` shares (tests/reconcile/test_apply_audit.py)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store.schema import audit_log

from .conftest import ORBIT, Kube, orbit_resource, wait_for

pytestmark = pytest.mark.slow


def audit_rows(engine: sa.Engine, namespace: str) -> list[Any]:
    with engine.connect() as conn:
        query = (
            sa.select(audit_log)
            .where(audit_log.c.namespace == namespace)
            .order_by(audit_log.c.at, audit_log.c.id)
        )
        return list(conn.execute(query))


def test_operator_audits_queue_apply_pause_and_delete(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    kube.create(orbit_resource("Queue", namespace, "payments", {}))
    kube.wait_ready("Queue", namespace, "payments")
    kube.patch(ORBIT, "Queue", namespace, "payments", {"spec": {"paused": True}})
    wait_for("pause audited", lambda: len(audit_rows(engine, namespace)) == 2)
    kube.delete(ORBIT, "Queue", namespace, "payments")
    rows = wait_for(
        "delete audited",
        lambda: (r := audit_rows(engine, namespace)) and len(r) == 3 and r,
    )

    assert [(r.action, r.resource_kind, r.resource_id) for r in rows] == [
        ("queue.apply", "Queue", "payments"),
        ("queue.pause", "Queue", "payments"),
        ("queue.delete", "Queue", "payments"),
    ]
    assert {r.actor for r in rows} == {"orbit-operator"}
    assert [r.resource_version for r in rows[:2]] == [1, 2]
    assert "deleted in Kubernetes" in rows[2].reason
