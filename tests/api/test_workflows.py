"""Workflow instances over HTTP in process (``/v1/namespaces/{ns}/workflows``): start
(idempotent by start key, seed invariant 6), read, list, history, signals, and pause, resume and
cancel, with the refusals a user meets, role checks and namespace scoping."""

from __future__ import annotations

import asyncio
import functools
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from orbit_store.db import run_transaction
from orbit_store.pulse.limits.queues import put_queue
from orbit_store.pulse.limits.quota_declarations import QuotaSpec, put_quota
from orbit_store.pulse.model import QueuePolicy
from orbit_store.schema import namespaces

from .conftest import Api, token_headers
from .test_workflow_definitions import SPEC

MISSING_ID = "0190d5a8-0000-7000-8000-000000000000"
WAIT_FIRST = {
    "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
    "steps": [
        {"name": "approval", "wait": {"signal": "go"}},
        {"name": "ship", "dependsOn": ["approval"], "task": {"handler": "shop.ship"}},
    ],
}


def _base(api: Api) -> str:
    return f"/v1/namespaces/{api.namespace}"


@pytest.fixture
def flows(admin_api: Api, admin_http: TestClient) -> TestClient:
    """``admin_http`` with "flow" (a task step, then a wait) and "gate" (a wait first)."""
    for name, spec in (("flow", SPEC), ("gate", WAIT_FIRST)):
        body = {"name": name, "spec": spec}
        published = admin_http.post(f"{_base(admin_api)}/workflow-definitions", json=body)
        assert published.status_code == 201, published.text
    return admin_http


def _start(http: TestClient, api: Api, definition: str = "flow", **more: Any) -> dict[str, Any]:
    answer = http.post(f"{_base(api)}/workflows", json={"definition": definition, **more})
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def test_a_started_workflow_runs_its_first_step_and_is_located(
    admin_api: Api, flows: TestClient
) -> None:
    started = flows.post(
        f"{_base(admin_api)}/workflows", json={"definition": "flow", "input": {"n": 7}}
    )

    assert started.status_code == 201, started.text
    body = started.json()
    assert started.headers["location"] == f"{_base(admin_api)}/workflows/{body['id']}"
    assert (body["state"], body["version"], body["replayed"]) == ("RUNNING", 1, False)
    detail = flows.get(started.headers["location"]).json()
    steps = {s["name"]: s for s in detail["steps"]}
    assert steps["first"]["state"] == "ACTIVE" and steps["approval"]["state"] == "PENDING"
    (activation,) = steps["first"]["activations"]
    task = flows.get(f"{_base(admin_api)}/tasks/{activation['task_id']}").json()
    assert (task["handler"], task["params"]) == ("shop.echo", {"n": 7})


def test_the_same_start_key_finds_the_same_workflow_inv6(admin_api: Api, flows: TestClient) -> None:
    body = {"definition": "flow", "start_key": "order-7", "input": {"n": 7}}
    first = flows.post(f"{_base(admin_api)}/workflows", json=body)

    again = flows.post(f"{_base(admin_api)}/workflows", json=body)
    other = flows.post(f"{_base(admin_api)}/workflows", json={**body, "input": {"n": 8}})

    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["id"] == first.json()["id"]
    assert other.status_code == 409 and other.json()["type"].endswith("/idempotency-conflict")
    assert len(flows.get(f"{_base(admin_api)}/workflows").json()["items"]) == 1


def test_a_start_the_definition_refuses_is_a_problem_naming_why(
    admin_api: Api, flows: TestClient
) -> None:
    workflows = f"{_base(admin_api)}/workflows"

    bad_input = flows.post(workflows, json={"definition": "gate", "input": {"n": "seven"}})
    unknown = flows.post(workflows, json={"definition": "nope"})
    bad_field = flows.post(workflows, json={"definition": "flow", "inputs": {}})

    assert bad_input.status_code == 422, bad_input.text
    assert "input.n: 'seven' is not of type 'integer'" in bad_input.json()["detail"]
    assert unknown.status_code == 404 and "not published" in unknown.json()["detail"]
    assert ["body", "inputs"] in [e["loc"] for e in bad_field.json()["errors"]]
    assert flows.get(workflows).json()["items"] == []


def test_input_over_the_payload_limit_is_refused_413(mariadb_engine: sa.Engine) -> None:
    small = Api(mariadb_engine, roles=("admin",), max_payload_bytes=1024)
    with TestClient(small.app) as client:
        client.headers["Authorization"] = f"Bearer {small.token}"
        body = {"name": "flow", "spec": SPEC}
        client.post(f"{_base(small)}/workflow-definitions", json=body)
        start = {"definition": "flow", "input": {"n": 1, "pad": "x" * 2048}}
        refused = client.post(f"{_base(small)}/workflows", json=start)
        assert refused.status_code == 413, refused.text
        assert refused.json()["field"] == "input"


def test_a_signal_is_consumed_by_an_active_wait_and_a_replay_is_the_same_signal(
    admin_api: Api, flows: TestClient
) -> None:
    wf = _start(flows, admin_api, "gate")
    signals = f"{_base(admin_api)}/workflows/{wf['id']}/signals"

    sent = flows.post(signals, json={"signal_id": "s-1", "name": "go", "payload": {"ok": 1}})
    replay = flows.post(signals, json={"signal_id": "s-1", "name": "go", "payload": {"ok": 1}})
    reused = flows.post(signals, json={"signal_id": "s-1", "name": "go", "payload": {"ok": 2}})

    assert sent.status_code == 201, sent.text
    assert (sent.json()["state"], sent.json()["consumed_by_step"]) == ("CONSUMED", "approval")
    assert replay.status_code == 200 and replay.json()["replayed"] is True
    assert reused.status_code == 409 and reused.json()["type"].endswith("/idempotency-conflict")


def test_a_signal_before_its_wait_is_pending_and_an_unknown_name_is_refused(
    admin_api: Api, flows: TestClient
) -> None:
    wf = _start(flows, admin_api, input={"n": 1})
    signals = f"{_base(admin_api)}/workflows/{wf['id']}/signals"

    early = flows.post(signals, json={"signal_id": "s-1", "name": "go"})
    unknown = flows.post(signals, json={"signal_id": "s-2", "name": "stop"})

    assert early.status_code == 201 and early.json()["state"] == "PENDING"
    detail = flows.get(f"{_base(admin_api)}/workflows/{wf['id']}").json()
    assert [s["signal_id"] for s in detail["pending_signals"]] == ["s-1"]
    assert unknown.status_code == 422 and "has no wait for signal 'stop'" in unknown.text


def test_pause_resume_and_cancel_are_recorded_in_the_history(
    admin_api: Api, flows: TestClient
) -> None:
    wf = _start(flows, admin_api, input={"n": 5})
    one = f"{_base(admin_api)}/workflows/{wf['id']}"

    paused = flows.post(f"{one}/pause", json={"reason": "incident 12"}).json()
    resumed = flows.post(f"{one}/resume").json()
    cancelled = flows.post(f"{one}/cancel", json={"reason": "customer left"}).json()

    assert (paused["paused"], paused["control_version"]) == (True, 2)
    assert (resumed["paused"], resumed["control_version"]) == (False, 3)
    assert cancelled["state"] == "CANCELLED" and cancelled["finished_at"] is not None
    events = flows.get(f"{one}/history").json()["events"]
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "instance.started" and kinds[-1] == "instance.cancelled"
    assert {"instance.paused", "instance.resumed", "task.created"} <= set(kinds)
    reason = next(e for e in events if e["kind"] == "instance.paused")["details"]["reason"]
    assert reason == "incident 12"


def test_a_finished_workflow_accepts_no_signal(admin_api: Api, flows: TestClient) -> None:
    wf = _start(flows, admin_api, "gate")
    one = f"{_base(admin_api)}/workflows/{wf['id']}"
    flows.post(f"{one}/cancel")

    refused = flows.post(f"{one}/signals", json={"signal_id": "late", "name": "go"})

    assert refused.status_code == 409, refused.text
    assert "is CANCELLED: it accepts no more signals" in refused.json()["detail"]


def test_the_list_filters_by_state_and_definition_and_pages_newest_first(
    admin_api: Api, flows: TestClient
) -> None:
    older = _start(flows, admin_api, input={"n": 1})
    newer = _start(flows, admin_api, input={"n": 2})
    gate = _start(flows, admin_api, "gate")
    flows.post(f"{_base(admin_api)}/workflows/{gate['id']}/cancel")
    workflows = f"{_base(admin_api)}/workflows"

    def ids(**query: Any) -> list[str]:
        return [w["id"] for w in flows.get(workflows, params=query).json()["items"]]

    assert ids(definition="flow") == [newer["id"], older["id"]]
    assert ids(state="CANCELLED") == [gate["id"]]
    page = flows.get(workflows, params={"page_size": 2}).json()
    rest = flows.get(workflows, params={"page_size": 2, "page_token": page["next_page_token"]})
    assert [w["id"] for w in page["items"] + rest.json()["items"]] == [
        gate["id"],
        newer["id"],
        older["id"],
    ]
    assert flows.get(workflows, params={"state": "SLEEPY"}).status_code == 422


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", ""),
        ("GET", "/history"),
        ("POST", "/signals"),
        ("POST", "/pause"),
        ("POST", "/resume"),
        ("POST", "/cancel"),
    ],
)
def test_every_route_of_a_missing_workflow_answers_404(
    admin_api: Api, flows: TestClient, method: str, path: str
) -> None:
    body = {"signal_id": "s", "name": "go"} if path == "/signals" else None

    answer = flows.request(method, f"{_base(admin_api)}/workflows/{MISSING_ID}{path}", json=body)

    assert answer.status_code == 404, answer.text
    assert answer.json()["type"].endswith("/not-found")


def test_another_namespace_s_workflow_id_looks_missing_and_its_token_is_refused(
    admin_api: Api, flows: TestClient, mariadb_engine: sa.Engine
) -> None:
    wf = _start(flows, admin_api, input={"n": 1})
    elsewhere = f"other-{uuid.uuid4().hex[:8]}"
    stranger = token_headers(mariadb_engine, elsewhere, "admin")
    theirs = f"/v1/namespaces/{elsewhere}/workflows/{wf['id']}"

    assert flows.get(theirs, headers=stranger).status_code == 404
    assert flows.post(f"{theirs}/cancel", headers=stranger).status_code == 404
    refused = flows.get(f"{_base(admin_api)}/workflows/{wf['id']}", headers=stranger)
    assert refused.status_code == 403 and refused.json()["token_namespace"] == elsewhere
    assert flows.get(f"{_base(admin_api)}/workflows/{wf['id']}").json()["state"] == "RUNNING"


def test_a_read_token_reads_workflows_and_changes_none(
    admin_api: Api, flows: TestClient, mariadb_engine: sa.Engine
) -> None:
    wf = _start(flows, admin_api, input={"n": 1})
    one = f"{_base(admin_api)}/workflows/{wf['id']}"
    viewer = token_headers(mariadb_engine, admin_api.namespace, "read")

    for path in (one, f"{one}/history", f"{_base(admin_api)}/workflows"):
        assert flows.get(path, headers=viewer).status_code == 200, path
    for path, body in [
        (f"{_base(admin_api)}/workflows", {"definition": "flow", "input": {"n": 2}}),
        (f"{one}/signals", {"signal_id": "s", "name": "go"}),
        (f"{one}/pause", None),
        (f"{one}/cancel", None),
    ]:
        refused = flows.post(path, json=body, headers=viewer)
        assert refused.status_code == 403, path
        assert "needs the submit role" in refused.json()["detail"]
    assert flows.get(one).json()["paused"] is False


async def _starts_queued_behind_one(api: Api, bodies: list[dict[str, Any]]) -> list[Any]:
    """Start ``bodies[0]`` while a transaction of the test holds the namespace row (its first
    task waits on it), then the rest (they wait for a group); release the row; every answer."""
    groups = api.app.state.ctx.start_groups
    path = f"{_base(api)}/workflows"

    def post(body: dict[str, Any]) -> Any:
        expect = body.pop("_expect", 0)
        return asyncio.ensure_future(api.call("POST", path, body, expect=expect))

    with api.engine.connect() as blocker:
        blocker.begin()
        blocker.execute(
            sa.select(namespaces.c.name).where(namespaces.c.name == api.namespace).with_for_update()
        )
        first = post(bodies[0])
        await _until(lambda: groups.running == 1)
        queued = [post(body) for body in bodies[1:]]
        await _until(lambda: groups.waiting == len(bodies) - 1)
        blocker.commit()
    return list(await asyncio.gather(first, *queued))


async def _until(condition: Any) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in 5 s")


def test_concurrent_starts_share_a_transaction_and_each_gets_its_own_answer(
    admin_api: Api, flows: TestClient
) -> None:
    """Starts queued behind a running one go together in one group: new ones 201, a start key
    repeated with the same request the same workflow, another request under it 409, an
    unknown definition 404 — the others of the group start."""
    registry = admin_api.app.state.ctx.metrics.registry
    labels = {"call": "start_group"}
    before = registry.get_sample_value("orbit_batch_items_count", labels) or 0.0
    bodies: list[dict[str, Any]] = [
        {"definition": "flow", "input": {"n": 0}},
        *({"definition": "flow", "input": {"n": n}, "start_key": f"k{n}"} for n in range(1, 5)),
        {"definition": "flow", "input": {"n": 1}, "start_key": "k1"},
        {"definition": "flow", "input": {"n": 9}, "start_key": "k2", "_expect": 409},
        {"definition": "nowhere", "_expect": 404},
    ]
    answers = asyncio.run(_starts_queued_behind_one(admin_api, bodies))
    after = registry.get_sample_value("orbit_batch_items_count", labels) or 0.0
    assert after - before == 2, "one alone, then the seven queued behind it together"
    new = answers[:5]
    assert [a["replayed"] for a in new] == [False] * 5 and len({a["id"] for a in new}) == 5
    assert (answers[5]["id"], answers[5]["replayed"]) == (answers[1]["id"], True)
    assert answers[6]["type"].endswith("idempotency-conflict")
    assert answers[7]["type"].endswith("not-found")
    for answer in new:
        detail = flows.get(f"{_base(admin_api)}/workflows/{answer['id']}").json()
        steps = {s["name"]: s["state"] for s in detail["steps"]}
        assert steps["first"] == "ACTIVE", detail


def test_a_queued_start_its_quota_refuses_is_429_and_the_rest_start_together(
    admin_api: Api, flows: TestClient
) -> None:
    """Among the starts queued behind a running one, one whose first task a full quota refuses
    is answered 429 alone; the group is decided again without it and the six others start in
    one transaction (one INSERT of their instances), not one each."""
    routed = {"steps": [{"name": "first", "task": {"handler": "h", "queue": "${input.queue}"}}]}
    body = {"name": "routed", "spec": routed}
    published = flows.post(f"{_base(admin_api)}/workflow-definitions", json=body)
    assert published.status_code == 201, published.text
    for work in (
        functools.partial(put_queue, policy=QueuePolicy(name="full")),
        functools.partial(put_quota, spec=QuotaSpec("q", queue="full", max_waiting=0)),
    ):
        run_transaction(admin_api.engine, functools.partial(work, namespace=admin_api.namespace))
    bodies: list[dict[str, Any]] = [{"definition": "flow", "input": {"n": n}} for n in range(8)]
    bodies[3] = {"definition": "routed", "input": {"queue": "full"}, "_expect": 429}
    sent: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(statement)

    engine = admin_api.app.state.ctx.engine
    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        answers = asyncio.run(_starts_queued_behind_one(admin_api, bodies))
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
    assert answers[3]["type"].endswith("quota-exceeded"), answers[3]
    new = [a for position, a in enumerate(answers) if position != 3]
    assert [a["replayed"] for a in new] == [False] * 7 and len({a["id"] for a in new}) == 7
    inserts = [s for s in sent if s.lstrip().upper().startswith("INSERT INTO WORKFLOW_INSTANCES")]
    assert len(inserts) == 4, "the first alone, the refused group, the six, the refused alone"
