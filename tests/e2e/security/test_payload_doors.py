"""One payload limit at every door (``--max-payload-bytes``, 1 MiB here), over real HTTP
against `orbit server`: a workflow's input, a signal's payload, a schedule's task template and a
definition's spec are refused with the same 413 ``payload-too-large`` problem as a task's
params, naming the field, and nothing is stored; a workflow step whose rendered params exceed
the limit fails with that reason instead of making an oversized task."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from orbit_sdk import Client, PayloadTooLarge

from ..conftest import Server, Tenant, flow_admin, wait_until

LIMIT = 1024 * 1024
BLOB = "x" * (LIMIT + 1)


@pytest.fixture
def admin(server: Server, mariadb_engine: sa.Engine) -> Tenant:
    return flow_admin(server, mariadb_engine)


def post(tenant: Tenant, path: str, body: dict[str, Any], method: str = "POST") -> httpx.Response:
    url = f"{tenant.server.url}/v1/namespaces/{tenant.namespace}/{path}"
    return httpx.request(method, url, json=body, headers=tenant.headers, timeout=30)


def assert_too_large(answer: httpx.Response, field: str) -> None:
    problem = answer.json()
    assert answer.status_code == 413, problem
    assert problem["type"].endswith("/payload-too-large")
    assert (problem["field"], problem["limit_bytes"]) == (field, LIMIT)
    assert "the limit is 1048576 bytes" in problem["detail"]


def test_a_workflow_input_over_the_limit_is_a_413_and_starts_nothing(admin: Tenant) -> None:
    answer = post(admin, "workflows", {"definition": "flow", "input": {"blob": BLOB}})
    assert_too_large(answer, "input")
    listed = httpx.get(
        f"{admin.server.url}/v1/namespaces/{admin.namespace}/workflows", headers=admin.headers
    )
    assert listed.json()["items"] == []


def test_a_signal_payload_over_the_limit_is_a_413_and_is_not_stored(admin: Tenant) -> None:
    with Client(admin.server.url, token=admin.token) as client:
        wf = client.start_workflow(admin.namespace, "flow", input={"n": 1})
        with pytest.raises(PayloadTooLarge):
            client.signal_workflow(admin.namespace, wf.id, "go", payload={"blob": BLOB})
        detail = client.get_workflow(admin.namespace, wf.id)
    assert detail.pending_signals == []
    body = {"signal_id": "s-big", "name": "go", "payload": BLOB}
    answer = post(admin, f"workflows/{wf.id}/signals", body)
    assert_too_large(answer, "payload")


def test_a_schedule_template_over_the_limit_is_a_413_on_create_and_update(
    admin: Tenant,
) -> None:
    template = {"handler": "reports.nightly", "params": {"blob": BLOB}}
    created = post(admin, "schedules", {"name": "big", "cron": "@daily", "task": template})
    assert_too_large(created, "task.params")
    fine = {"handler": "reports.nightly", "params": {"n": 1}}
    assert post(admin, "schedules", {"name": "ok", "cron": "@daily", "task": fine}).is_success
    updated = post(admin, "schedules/ok", {"cron": "@daily", "task": template}, method="PUT")
    assert_too_large(updated, "task.params")
    stored = httpx.get(
        f"{admin.server.url}/v1/namespaces/{admin.namespace}/schedules/ok", headers=admin.headers
    ).json()
    assert stored["task"]["params"] == {"n": 1} and stored["version"] == 1


def test_a_definition_spec_over_the_limit_is_a_413(admin: Tenant) -> None:
    step = {"name": "a", "task": {"handler": "h", "params": {"blob": BLOB}}}
    answer = post(admin, "workflow-definitions", {"name": "huge", "spec": {"steps": [step]}})
    assert_too_large(answer, "spec")


def test_a_step_whose_rendered_params_exceed_the_limit_fails_with_that_reason(
    admin: Tenant,
) -> None:
    """Input under the limit, but the step's template repeats it: the step's task would hold
    twice as much. The step fails naming the limit; no task is created."""
    spec = {
        "steps": [
            {
                "name": "twice",
                "task": {
                    "handler": "e2e.echo",
                    "params": {"a": "${input.blob}", "b": "${input.blob}"},
                },
            }
        ]
    }
    half = "y" * (LIMIT // 2 + 10)
    with Client(admin.server.url, token=admin.token) as client:
        client.publish_workflow(admin.namespace, "twice", spec)
        wf = client.start_workflow(admin.namespace, "twice", input={"blob": half})
        detail = wait_until(
            lambda: (d := client.get_workflow(admin.namespace, wf.id)).state == "FAILED" and d
        )
        tasks = list(client.iter_tasks(admin.namespace))
    (step,) = detail.steps
    assert step.state == "FAILED" and step.error["type"] == "payload_too_large"
    assert "the limit is 1048576 bytes" in step.error["message"]
    assert tasks == []
