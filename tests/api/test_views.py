"""The read-only API the console is built on: the overview, worker sessions and the task list's
filters, each scoped to the token's namespace; a ``read`` token sees and changes nothing else."""

from __future__ import annotations

import datetime as dt
import uuid

import sqlalchemy as sa
from fastapi.testclient import TestClient

from .conftest import Api, token_headers


def _submit(http: TestClient, api: Api, **body: object) -> str:
    answer = http.post(f"/v1/namespaces/{api.namespace}/tasks", json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def test_the_task_list_finds_a_task_by_key_handler_and_creation_time(
    api: Api, http: TestClient
) -> None:
    tasks = f"/v1/namespaces/{api.namespace}/tasks"
    before = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)
    mail = _submit(http, api, handler="shop.mail", idempotency_key="order-7")
    _submit(http, api, handler="shop.charge", idempotency_key="order-8")

    def ids(**query: str) -> list[str]:
        answer = http.get(tasks, params=query)
        assert answer.status_code == 200, answer.text
        return [t["id"] for t in answer.json()["items"]]

    assert ids(idempotency_key="order-7") == [mail]
    assert ids(idempotency_key="no-such-key") == []
    assert ids(handler="shop.mail") == [mail]
    assert len(ids(created_after=before.isoformat())) == 2
    assert ids(created_before=before.isoformat()) == []
    assert ids(handler="shop.mail", state="SUCCEEDED") == []


def test_overview_and_worker_sessions_answer_for_the_token_s_namespace(
    api: Api, http: TestClient
) -> None:
    _submit(http, api, handler="h")
    session = http.post(
        "/v1/worker-sessions",
        json={"namespace": api.namespace, "worker_name": "w-1", "handlers": ["h"]},
    ).json()

    overview = http.get(f"/v1/namespaces/{api.namespace}/overview").json()
    (queue,) = overview["queues"]
    assert (queue["name"], queue["tasks"]["WAITING"]) == ("default", 1)
    assert overview["needs_review"] == 0 and len(overview["outcomes_per_minute"]) == 15

    sessions = http.get(f"/v1/namespaces/{api.namespace}/worker-sessions").json()["items"]
    assert [(s["id"], s["state"], s["handlers"]) for s in sessions] == [
        (session["id"], "ACTIVE", ["h"])
    ]


def test_a_read_token_reads_everything_and_changes_nothing(
    api: Api, http: TestClient, mariadb_engine: sa.Engine
) -> None:
    task = _submit(http, api, handler="h")
    viewer = token_headers(mariadb_engine, api.namespace, "read")
    base = f"/v1/namespaces/{api.namespace}"
    for path in ("/overview", "/worker-sessions", "/tasks", f"/tasks/{task}", "/schedules"):
        assert http.get(base + path, headers=viewer).status_code == 200, path
    refused = http.post(f"{base}/tasks/{task}/cancel", json={}, headers=viewer)
    assert refused.status_code == 403
    assert "submit role" in refused.json()["detail"]
    assert http.post(f"{base}/tasks", json={"handler": "h"}, headers=viewer).status_code == 403
    assert http.get(f"{base}/tasks/{task}").json()["state"] == "WAITING"


def test_another_namespace_s_token_sees_nothing_of_this_one(
    api: Api, http: TestClient, mariadb_engine: sa.Engine
) -> None:
    _submit(http, api, handler="h")
    elsewhere = f"elsewhere-{uuid.uuid4().hex[:8]}"
    stranger = token_headers(mariadb_engine, elsewhere, "admin")
    for path in ("/overview", "/worker-sessions", "/tasks"):
        answer = http.get(f"/v1/namespaces/{api.namespace}{path}", headers=stranger)
        assert answer.status_code == 403, path
        assert answer.json()["token_namespace"] == elsewhere


def test_trigger_now_fires_a_schedule_once_and_needs_the_submit_role(
    api: Api, http: TestClient, mariadb_engine: sa.Engine
) -> None:
    base = f"/v1/namespaces/{api.namespace}/schedules"
    created = http.post(
        base, json={"name": "nightly", "cron": "0 3 * * *", "task": {"handler": "h"}}
    )
    assert created.status_code == 201, created.text
    viewer = token_headers(mariadb_engine, api.namespace, "read")
    assert http.post(f"{base}/nightly/trigger", headers=viewer).status_code == 403

    fired = http.post(f"{base}/nightly/trigger", json={"reason": "needed now"})

    assert fired.status_code == 200, fired.text
    body = fired.json()
    assert (body["status"], body["reason"]) == ("FIRED", "Manual")
    task = http.get(f"/v1/namespaces/{api.namespace}/tasks/{body['task_id']}").json()
    assert task["handler"] == "h"
    schedule = http.get(f"{base}/nightly").json()
    assert schedule["next_fire_at"] == created.json()["next_fire_at"]
    assert [o["reason"] for o in schedule["occurrences"]] == ["Manual"]
    assert http.post(f"{base}/missing/trigger").status_code == 404


def test_a_waiting_task_says_why_it_waits(api: Api, http: TestClient) -> None:
    tasks = f"/v1/namespaces/{api.namespace}/tasks"
    later = _submit(http, api, handler="h", delay_seconds=3600)
    detail = http.get(f"{tasks}/{later}").json()
    assert [c["kind"] for c in detail["waiting_causes"]] == ["scheduled", "no_live_worker"]
    assert "no live worker session serves queue 'default'" in detail["waiting_causes"][1]["detail"]
    listed = http.get(tasks).json()["items"][0]
    assert "waiting_causes" not in listed  # one task at a time: never per row of a list
