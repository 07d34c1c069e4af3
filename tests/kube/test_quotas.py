"""Quota resources through the operator."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store.pulse.limits.quota import WHOLE_NAMESPACE
from orbit_store.schema import quotas

from .conftest import ORBIT, Kube, orbit_resource, wait_for

pytestmark = pytest.mark.slow


def quota_row(engine: sa.Engine, namespace: str, name: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(
            sa.select(quotas).where(quotas.c.namespace == namespace, quotas.c.name == name)
        ).one_or_none()


def test_quota_lifecycle(kube: Kube, engine: sa.Engine, namespace: str) -> None:
    kube.create(
        orbit_resource(
            "Quota", namespace, "limits", {"maxWaiting": 100, "submitRate": {"perSecond": 2.5}}
        )
    )

    obj = kube.wait_ready("Quota", namespace, "limits")
    assert obj["status"]["observedGeneration"] == 1
    assert obj["status"]["conditions"][0]["message"] == "enforced for the namespace"
    row = quota_row(engine, namespace, "limits")
    assert (row.queue, row.max_waiting, row.max_running) == (WHOLE_NAMESPACE, 100, None)
    assert (row.submit_rate_per_second, row.submit_burst) == (2.5, 1)  # burst defaulted

    kube.create(orbit_resource("Queue", namespace, "q", {}))
    kube.wait_ready("Queue", namespace, "q")
    kube.patch(ORBIT, "Quota", namespace, "limits", {"spec": {"queue": "q", "maxRunning": 3}})
    wait_for(
        "quota updated",
        lambda: (r := quota_row(engine, namespace, "limits")) and r.max_running == 3 and r,
    )
    obj = kube.wait_ready("Quota", namespace, "limits")
    wait_for(
        "observedGeneration 2",
        lambda: kube.orbit("Quota", namespace, "limits")["status"]["observedGeneration"] == 2,
    )
    assert quota_row(engine, namespace, "limits").queue == "q"

    kube.delete(ORBIT, "Quota", namespace, "limits")
    kube.wait_gone(ORBIT, "Quota", namespace, "limits")
    assert quota_row(engine, namespace, "limits") is None


def test_a_quota_naming_an_undeclared_queue_waits_for_it(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    """Resources applied together arrive in any order: a Quota before its Queue is a temporary
    condition that says what it waits for, and is retried until the Queue is declared."""
    kube.create(orbit_resource("Quota", namespace, "late", {"queue": "later", "maxWaiting": 5}))
    obj = kube.wait_ready("Quota", namespace, "late", status="False", reason="QueueNotFound")
    message = obj["status"]["conditions"][0]["message"]
    assert "waiting for Queue later" in message, message
    assert "observedGeneration" not in obj["status"]
    assert quota_row(engine, namespace, "late") is None

    kube.create(orbit_resource("Queue", namespace, "later", {}))
    obj = kube.wait_ready("Quota", namespace, "late")
    assert obj["status"]["observedGeneration"] == 1
    assert quota_row(engine, namespace, "late").queue == "later"
