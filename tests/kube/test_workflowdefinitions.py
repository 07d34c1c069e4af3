"""WorkflowDefinition resources through the operator: a version per spec change, status with
the versions and running workflows, deletion withdraws without disturbing running workflows."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from orbit_store.errors import Conflict
from orbit_store.weave import service
from orbit_store.weave.definitions import get_definition
from orbit_store.weave.queries import get_instance
from orbit_store.weave.start import StartRequest

from .conftest import ORBIT, Kube, orbit_resource, wait_for

pytestmark = pytest.mark.slow

SPEC = {"steps": [{"name": "charge", "task": {"handler": "shop.charge"}}]}


def start(engine: sa.Engine, namespace: str) -> str:
    request = StartRequest(namespace, "billing", str(uuid.uuid4()), {})
    result, _ = service.start(engine, request)
    return result.instance_id


def test_workflowdefinition_lifecycle(kube: Kube, engine: sa.Engine, namespace: str) -> None:
    kube.create(orbit_resource("WorkflowDefinition", namespace, "billing", SPEC))
    obj = kube.wait_ready("WorkflowDefinition", namespace, "billing")
    assert obj["status"]["latestVersion"] == 1
    assert obj["status"]["conditions"][0]["message"].startswith("version 1 (sha256 ")
    running = start(engine, namespace)

    changed = {"steps": [{"name": "charge", "task": {"handler": "shop.charge_v2"}}]}
    kube.patch(ORBIT, "WorkflowDefinition", namespace, "billing", {"spec": changed})
    status = wait_for(
        "version 2 in status",
        lambda: (
            (s := kube.orbit("WorkflowDefinition", namespace, "billing")["status"])
            and s.get("latestVersion") == 2
            and s
        ),
    )
    assert [(v["version"], v["runningInstances"]) for v in status["versions"]] == [(1, 1), (2, 0)]

    kube.delete(ORBIT, "WorkflowDefinition", namespace, "billing")
    kube.wait_gone(ORBIT, "WorkflowDefinition", namespace, "billing")
    with engine.connect() as conn:
        info = get_definition(conn, namespace, "billing")
        still = get_instance(conn, namespace, running)
    assert info is not None and info.retired and info.latest_version == 2
    assert still is not None and (still.state, still.version) == ("RUNNING", 1)
    with pytest.raises(Conflict, match="withdrawn"):
        start(engine, namespace)


def test_a_definition_with_a_cycle_is_invalid(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    spec = {
        "steps": [
            {"name": "a", "dependsOn": ["b"], "task": {"handler": "h"}},
            {"name": "b", "dependsOn": ["a"], "task": {"handler": "h"}},
        ]
    }
    kube.create(orbit_resource("WorkflowDefinition", namespace, "loop", spec))
    obj = kube.wait_ready(
        "WorkflowDefinition", namespace, "loop", status="False", reason="InvalidSpec"
    )
    assert "dependsOn forms a cycle: a → b → a" in obj["status"]["conditions"][0]["message"]
    with engine.connect() as conn:
        assert get_definition(conn, namespace, "loop") is None


def test_the_api_cannot_overwrite_a_declared_definition_and_resyncs_publish_nothing(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    """Invariant 10 and ownership: a WorkflowDefinition resource owns its definition, as a
    Schedule resource owns its schedule; a publish through the API is refused (409) and the
    operator's resyncs (every second here) leave version 1 the only version."""
    kube.create(orbit_resource("WorkflowDefinition", namespace, "owned", SPEC))
    kube.wait_ready("WorkflowDefinition", namespace, "owned")
    other = {"steps": [{"name": "charge", "task": {"handler": "shop.other"}}]}
    with pytest.raises(Conflict, match="WorkflowDefinition resource"):
        service.publish(engine, namespace=namespace, name="owned", document=other, actor="eve")
    # Each resync refreshes the status from MySQL: a workflow started now shows up in it only
    # after a resync, so two of them prove two resyncs ran since the refused publish.
    for running in (1, 2):
        service.start(engine, StartRequest(namespace, "owned", str(uuid.uuid4()), {}))
        wait_for(
            f"a resync showing {running} running",
            lambda n=running: (
                kube.orbit("WorkflowDefinition", namespace, "owned")["status"].get(
                    "runningInstances"
                )
                == n
            ),
        )
    with engine.connect() as conn:
        info = get_definition(conn, namespace, "owned")
    assert info is not None
    assert [v.version for v in info.versions] == [1] and info.source == "operator"
