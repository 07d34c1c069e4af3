"""The workflow API through the real server: idempotent starts and signals under concurrency,
pause and resume, history, metrics. Roles, namespace scoping and the audit of publishing are
tested in process (tests/api/test_workflows.py, test_workflow_definitions.py)."""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from polling import wait_for

from orbit_sdk import Client
from orbit_store.db import run_transaction
from orbit_store.pulse.limits.quota_declarations import QuotaSpec, put_quota

from ..conftest import FLOW_SPEC, Server, Tenant, flow_admin, make_tenant

pytestmark = pytest.mark.slow

SPEC = FLOW_SPEC


@pytest.fixture
def admin(server: Server, mariadb_engine: sa.Engine) -> Tenant:
    return flow_admin(server, mariadb_engine)


def url(tenant: Tenant, path: str) -> str:
    return f"{tenant.server.url}/v1/namespaces/{tenant.namespace}/{path}"


def test_fifty_concurrent_identical_starts_create_one_workflow_inv6(admin: Tenant) -> None:
    body = {"definition": "flow", "start_key": "order-7", "input": {"n": 7}}

    def start(_: int) -> tuple[int, str]:
        r = httpx.post(url(admin, "workflows"), json=body, headers=admin.headers, timeout=30)
        return r.status_code, r.json()["id"]

    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(start, range(50)))
    assert len({wid for _, wid in results}) == 1
    assert [code for code, _ in results].count(201) == 1
    page = httpx.get(url(admin, "workflows"), headers=admin.headers).json()
    assert len(page["items"]) == 1


def test_concurrent_identical_signals_are_one_signal(admin: Tenant) -> None:
    with Client(admin.server.url, token=admin.token) as client:
        wf = client.start_workflow(admin.namespace, "flow", input={"n": 1})

        def send(_: int) -> Any:
            return client.signal_workflow(admin.namespace, wf.id, "go", signal_id="s-1")

        with ThreadPoolExecutor(20) as pool:
            results = list(pool.map(send, range(20)))
        assert [r.replayed for r in results].count(False) == 1
        assert [
            s.signal_id for s in client.get_workflow(admin.namespace, wf.id).pending_signals
        ] == ["s-1"]


def test_pause_resume_cancel_history_and_metrics(admin: Tenant) -> None:
    with Client(admin.server.url, token=admin.token) as client:
        wf = client.start_workflow(admin.namespace, "flow", input={"n": 5})
        paused = client.pause_workflow(admin.namespace, wf.id, reason="incident 12")
        assert (paused.paused, paused.control_version) == (True, 2)
        resumed = client.resume_workflow(admin.namespace, wf.id)
        assert (resumed.paused, resumed.control_version) == (False, 3)
        cancelled = client.cancel_workflow(admin.namespace, wf.id, reason="customer left")
        assert cancelled.state == "CANCELLED"
        kinds = [e.kind for e in client.workflow_history(admin.namespace, wf.id)]
        assert kinds[0] == "instance.started" and kinds[-1] == "instance.cancelled"
        assert {"instance.paused", "instance.resumed", "task.created"} <= set(kinds)
        paused_event = next(
            e
            for e in client.workflow_history(admin.namespace, wf.id)
            if e.kind == "instance.paused"
        )
        assert paused_event.actor == "e2e" and paused_event.details["reason"] == "incident 12"
    metrics = httpx.get(f"{admin.server.url}/metrics").text
    assert (
        f'orbit_workflows_finished_total{{namespace="{admin.namespace}",state="CANCELLED"}} 1.0'
        in metrics
    )
    assert f'orbit_workflow_step_advances_total{{namespace="{admin.namespace}"}}' in metrics
    for name in ("orbit_workflow_inbox_backlog", "orbit_workflow_instances"):
        assert f"# TYPE {name} gauge" in metrics


def test_a_signal_and_a_resume_are_accepted_whatever_the_quota_issue_seed5(
    admin: Tenant, mariadb_engine: sa.Engine
) -> None:
    """Seed §5 "信号受理": the signal is stored and answered 2xx although the next step's task
    hits a full quota; the workflow says why it does not advance, and goes on when the quota
    frees. The same for resume."""
    spec = {
        "steps": [
            {"name": "approval", "wait": {"signal": "go"}},
            {"name": "ship", "dependsOn": ["approval"], "task": {"handler": "e2e.echo"}},
        ]
    }

    def quota(max_waiting: int) -> None:
        spec_ = QuotaSpec(name="full", max_waiting=max_waiting)
        run_transaction(
            mariadb_engine, functools.partial(put_quota, namespace=admin.namespace, spec=spec_)
        )

    with Client(admin.server.url, token=admin.token) as client:
        client.publish_workflow(admin.namespace, "gate", spec)
        signalled = client.start_workflow(admin.namespace, "gate")
        resumed = client.start_workflow(admin.namespace, "gate")
        client.pause_workflow(admin.namespace, resumed.id)
        client.signal_workflow(admin.namespace, resumed.id, "go", signal_id="r-1")
        quota(0)

        sent = client.signal_workflow(admin.namespace, signalled.id, "go", signal_id="s-1")
        assert client.resume_workflow(admin.namespace, resumed.id).paused is False

        assert (sent.state, sent.consumed_by_step) == ("CONSUMED", "approval")
        for wf in (signalled, resumed):
            stalled = wait_for(
                "the workflow to say why it does not advance",
                lambda wf=wf: client.get_workflow(admin.namespace, wf.id).orchestration_error,
            )
            assert "quota 'full'" in stalled
        quota(10)
        for wf in (signalled, resumed):
            wait_for(
                "the next step once the quota frees",
                lambda wf=wf: (
                    client.get_workflow(admin.namespace, wf.id).step("ship").state == "ACTIVE"
                ),
            )


def test_review_then_retry_of_a_step_task_resumes_the_workflow_inv8(
    server: Server, mariadb_engine: sa.Engine
) -> None:
    """A workflow step's task → unknown outcome → NEEDS_REVIEW (step parked) → reviewed as
    failed → manual retry: the successor carries the step and the workflow completes."""
    tenant = make_tenant(server, mariadb_engine, ["admin", "submit", "work", "review"])
    spec = {
        "steps": [
            {"name": "charge", "task": {"handler": "e2e.charge", "safety": "unsafe"}},
            {"name": "ship", "dependsOn": ["charge"], "task": {"handler": "e2e.ship"}},
        ]
    }
    base = f"{server.url}/v1"
    tasks = f"{base}/namespaces/{tenant.namespace}/tasks"
    session = httpx.post(
        f"{base}/worker-sessions",
        json={"namespace": tenant.namespace, "worker_name": "w"},
        headers=tenant.headers,
    ).json()

    def run_next(outcome: str) -> str:
        """Lease the next task, start it and report ``outcome``; its id."""
        lease = wait_for(
            "a task to lease",
            lambda: httpx.post(
                f"{base}/worker-sessions/{session['id']}/lease",
                json={"max_tasks": 1},
                headers=tenant.headers,
            ).json()["leases"],
        )[0]
        attempt = f"{base}/attempts/{lease['attempt_id']}"
        token = {"token": lease["token"]}
        httpx.post(f"{attempt}/start", json=token, headers=tenant.headers)
        body = {**token, "outcome": outcome, "result": {"ok": True}}
        httpx.post(f"{attempt}/complete", json=body, headers=tenant.headers)
        return str(lease["task_id"])

    with Client(server.url, token=tenant.token) as client:
        client.publish_workflow(tenant.namespace, "order", spec)
        wf = client.start_workflow(tenant.namespace, "order")

        def step(name: str) -> Any:
            return client.get_workflow(tenant.namespace, wf.id).step(name)

        charge = run_next("unknown")
        wait_for("the step to park", lambda: step("charge").state == "PARKED")
        current = httpx.get(f"{tasks}/{charge}", headers=tenant.headers).json()
        reviewed = client.review(
            tenant.namespace,
            charge,
            decision="failed",
            reason="the provider says not charged",
            evidence_ref="psp-1",
            expected_state_version=current["state_version"],
            execution_ended=True,
        )
        retried = client.retry(
            tenant.namespace,
            charge,
            reason="charge again",
            expected_state_version=reviewed.state_version,
            safe_to_retry=True,
        )
        wait_for(
            "the retry to carry the step",
            lambda: step("charge").activations[-1].task_id == retried.id,
        )
        assert run_next("succeeded") == retried.id
        run_next("succeeded")  # ship
        wait_for(
            "the workflow to complete",
            lambda: client.get_workflow(tenant.namespace, wf.id).state == "SUCCEEDED",
        )
