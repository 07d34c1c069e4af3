"""The product card's two Kubernetes journeys, through the real API server, the operator, a real
`orbit server` on MariaDB and real `orbit worker` processes:

- `kubectl apply` of a Schedule → it fires tasks on time (every instant, none missed) and a
  worker runs them; `kubectl get` shows the last and next fire;
- `kubectl apply` of a WorkflowDefinition → a workflow starts from it and completes.

The tenants' tokens are issued in MySQL directly: a Credential needs a Secret, which this
server cannot hold (tests/operator covers Credential with the emulator).
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml
from e2e.conftest import Server, make_tenant, start_server, stop_server

from orbit_sdk import Client

from .conftest import Cluster, Kube, Operator, orbit_resource, wait_for

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "examples" / "manifests" / "workflowdefinition-order.yaml"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("journeys-server") / "server.log"
    started = start_server(
        database_url, log, "--reaper-interval", "0.5", "--heartbeat-interval", "0.5"
    )
    yield started
    stop_server(started)


def test_a_schedule_applied_with_kubectl_fires_on_time_and_a_worker_runs_it(
    cluster: Cluster, api: Kube, engine: sa.Engine, operator: Operator, server: Server
) -> None:
    tenant = make_tenant(server, engine, ["submit", "work", "review"])
    namespace = tenant.namespace
    schedule = orbit_resource(
        "Schedule",
        namespace,
        "heartbeat",
        {
            "schedule": "*/2 * * * * *",  # every two seconds (leading seconds field)
            "timeZone": "Europe/Berlin",
            "concurrencyPolicy": "Allow",
            "startingDeadlineSeconds": 30,  # a fire later than this is recorded as missed
            "taskTemplate": {"handler": "e2e.echo", "params": {"from": "kubectl"}},
        },
    )
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(schedule))
    api.wait_ready("Schedule", namespace, "heartbeat")
    worker = tenant.start_worker()
    try:
        with Client(server.url, token=tenant.token) as client:

            def three_ran() -> list[dict[str, object]] | None:
                status = (api.orbit("Schedule", namespace, "heartbeat") or {})["status"]
                done = [
                    o
                    for o in status.get("recentOccurrences", [])
                    if o.get("taskState") == "SUCCEEDED"
                ]
                return done if len(done) >= 3 else None

            done = wait_for("three fires run by the worker", three_ran)
            task = client.get(namespace, str(done[0]["taskId"]))
    finally:
        worker.kill()
        worker.wait(10)
    assert task.result["echo"] == {"from": "kubectl"}
    status = (api.orbit("Schedule", namespace, "heartbeat") or {})["status"]
    occurrences = status["recentOccurrences"]
    # On time: every instant fired (none missed, skipped or merged), each once.
    assert [(o["status"], o["instants"]) for o in occurrences] == [("FIRED", 1)] * len(
        occurrences
    ), occurrences
    times = sorted(dt.datetime.fromisoformat(o["scheduledTime"]) for o in occurrences)
    gaps = {(later - earlier).total_seconds() for earlier, later in itertools.pairwise(times)}
    assert gaps == {2.0}, times  # consecutive instants of */2, none skipped
    assert status["nextScheduleTime"] > status["lastScheduleTime"]
    table = cluster.kubectl("-n", namespace, "get", "schedules").stdout.splitlines()
    assert table[1].split()[1:3] == ["*/2", "*"]  # SCHEDULE column starts with the expression


def test_a_workflow_definition_applied_with_kubectl_runs_a_workflow_to_completion(
    cluster: Cluster, api: Kube, engine: sa.Engine, operator: Operator, server: Server
) -> None:
    tenant = make_tenant(server, engine, ["admin"])
    namespace = tenant.namespace
    definition = yaml.safe_load(WORKFLOW.read_text())
    definition["metadata"]["namespace"] = namespace
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(definition))
    obj = api.wait_ready("WorkflowDefinition", namespace, "order-fulfilment")
    assert obj["status"]["observedGeneration"] == 1
    worker = tenant.start_worker("examples.workflows.worker:worker")
    try:
        with Client(server.url, token=tenant.token) as client:
            started = client.start_workflow(
                namespace, "order-fulfilment", input={"order": 7, "amount": 12.5}
            )
            wait_for(
                "the approval step waits",
                lambda: (
                    client.get_workflow(namespace, started.id).step("approval").state == "ACTIVE"
                ),
            )
            client.signal_workflow(namespace, started.id, "approved", {"by": "kube"})
            done = client.wait_workflow(namespace, started.id, timeout=90)
    finally:
        worker.kill()
        worker.wait(10)
    assert done.state == "SUCCEEDED"
    assert done.output == {"order": 7, "approvedBy": "kube", "tracking": "TRK-BOX-7"}
