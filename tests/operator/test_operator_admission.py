"""The operator's own admission: a resource that reaches it without the API server's checks (an
older CRD, a server that does not check, as this emulator does not) is refused the same way —
Ready=False, InvalidSpec, the field named, nothing written. A real API server refuses these
manifests itself (tests/kube/test_api_server.py)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from conftest import ORBIT, Kube, orbit_resource

from orbit_store.schema import queues, quotas

pytestmark = pytest.mark.slow


def row(engine: sa.Engine, table: sa.Table, namespace: str, name: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(
            sa.select(table).where(table.c.namespace == namespace, table.c.name == name)
        ).one_or_none()


def queue_row(engine: sa.Engine, namespace: str, name: str) -> Any:
    return row(engine, queues, namespace, name)


def quota_row(engine: sa.Engine, namespace: str, name: str) -> Any:
    return row(engine, quotas, namespace, name)


def test_invalid_spec_is_refused_with_the_field_and_nothing_is_written(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    # The CEL rule on spec.retry.backoff: maxSeconds (default 300) < initialSeconds.
    kube.create(
        orbit_resource("Queue", namespace, "bad", {"retry": {"backoff": {"initialSeconds": 600}}})
    )

    obj = kube.wait_ready("Queue", namespace, "bad", status="False", reason="InvalidSpec")
    ready = obj["status"]["conditions"][0]
    assert "spec.retry.backoff.maxSeconds" in ready["message"]
    assert "greater than or equal to initialSeconds" in ready["message"]
    assert "observedGeneration" not in obj["status"]
    assert queue_row(engine, namespace, "bad") is None

    # A valid spec afterwards is applied; an invalid change later leaves the row as it was.
    kube.patch(ORBIT, "Queue", namespace, "bad", {"spec": {"retry": {"backoff": None}}})
    kube.wait_ready("Queue", namespace, "bad")
    kube.patch(ORBIT, "Queue", namespace, "bad", {"spec": {"priority": 5000}})
    kube.wait_ready("Queue", namespace, "bad", status="False", reason="InvalidSpec")
    assert queue_row(engine, namespace, "bad").priority == 0


def test_quota_without_a_limit_is_invalid(kube: Kube, engine: sa.Engine, namespace: str) -> None:
    kube.create(orbit_resource("Quota", namespace, "empty", {"queue": "q"}))

    obj = kube.wait_ready("Quota", namespace, "empty", status="False", reason="InvalidSpec")
    assert (
        "at least one of maxWaiting, maxRunning or submitRate"
        in (obj["status"]["conditions"][0]["message"])
    )
    assert quota_row(engine, namespace, "empty") is None

    # Deleting a resource that never took effect is not blocked.
    kube.delete(ORBIT, "Quota", namespace, "empty")
    kube.wait_gone(ORBIT, "Quota", namespace, "empty")
