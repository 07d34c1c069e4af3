"""Result subscriptions over HTTP in process (``/v1/namespaces/{ns}/subscriptions``): declare,
read, list, pull and acknowledge, park and redrive, delete, with the refusals a user meets.
Declaring, deleting and redriving need the admin role; pulling and acking the submit role."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from e2e.receiver import new_secret
from fastapi.testclient import TestClient
from polling import wait_for

from .conftest import Api, token_headers


def _base(api: Api) -> str:
    return f"/v1/namespaces/{api.namespace}/subscriptions"


def _cancelled_task(http: TestClient, api: Api) -> str:
    """An outcome without a worker: a task submitted for later, then cancelled."""
    tasks = f"/v1/namespaces/{api.namespace}/tasks"
    task = http.post(tasks, json={"handler": "shop.receipt", "delay_seconds": 3600}).json()
    assert http.post(f"{tasks}/{task['id']}/cancel", json={}).status_code == 200
    return str(task["id"])


def _pull_receipts(http: TestClient, api: Api, **more: Any) -> str:
    """A pull subscription "receipts" of CANCELLED outcomes, declared before any outcome."""
    body = {"mode": "pull", "filter": {"outcomes": ["CANCELLED"]}, **more}
    answer = http.put(f"{_base(api)}/receipts", json=body)
    assert answer.status_code == 201, answer.text
    return f"{_base(api)}/receipts"


def test_declaring_creates_then_updates_and_reads_back(
    admin_api: Api, admin_http: TestClient
) -> None:
    one = f"{_base(admin_api)}/receipts"
    body = {"mode": "pull", "filter": {"handlers": ["shop.*"]}, "reason": "billing"}

    created = admin_http.put(one, json=body)
    unchanged = admin_http.put(one, json=body)
    updated = admin_http.put(one, json={**body, "max_attempts": 3})

    assert created.status_code == 201, created.text
    assert (created.json()["version"], created.json()["filter"]["handlers"]) == (1, ["shop.*"])
    assert unchanged.status_code == 200 and unchanged.json()["version"] == 1
    assert updated.status_code == 200 and updated.json()["version"] == 2
    read = admin_http.get(one).json()
    assert read["max_attempts"] == 3
    assert read["deliveries"] == {"PENDING": 0, "DELIVERED": 0, "PARKED": 0}
    assert [s["name"] for s in admin_http.get(_base(admin_api)).json()["items"]] == ["receipts"]


def test_pulled_events_are_held_until_acked_and_an_ack_is_idempotent(
    admin_api: Api, admin_http: TestClient
) -> None:
    one = _pull_receipts(admin_http, admin_api)
    task_id = _cancelled_task(admin_http, admin_api)

    batch = admin_http.get(f"{one}/events", params={"ack_deadline_seconds": 60}).json()
    (event,) = batch["events"]
    held = admin_http.get(f"{one}/events").json()["events"]
    acked = admin_http.post(f"{one}/ack", json={"event_ids": [event["id"], "no-such-event"]})
    again = admin_http.post(f"{one}/ack", json={"event_ids": [event["id"]]})

    assert (event["task_id"], event["task_state"], event["attempt"]) == (task_id, "CANCELLED", 1)
    assert held == []
    assert acked.json()["results"] == {event["id"]: "acked", "no-such-event": "unknown"}
    assert again.json()["results"] == {event["id"]: "already_acked"}
    assert admin_http.get(one).json()["deliveries"]["DELIVERED"] == 1


def test_an_event_handed_out_max_attempts_times_is_parked_then_redriven(
    admin_api: Api, admin_http: TestClient
) -> None:
    one = _pull_receipts(admin_http, admin_api, max_attempts=1)
    task_id = _cancelled_task(admin_http, admin_api)
    admin_http.get(f"{one}/events", params={"ack_deadline_seconds": 1})

    wait_for(
        "the unacknowledged event to be parked after its deadline",
        lambda: admin_http.get(f"{one}/events").json()["parked"] == 1,
    )
    redriven = admin_http.post(f"{one}/redrive", json={"reason": "consumer fixed"})

    assert redriven.status_code == 200 and redriven.json() == {"redriven": 1}
    (event,) = admin_http.get(f"{one}/events").json()["events"]
    assert event["task_id"] == task_id
    refused = admin_http.post(f"{one}/redrive", json={})
    assert ["body", "reason"] in [e["loc"] for e in refused.json()["errors"]]


def test_deleting_with_undelivered_events_is_a_conflict_unless_they_are_discarded(
    admin_api: Api, admin_http: TestClient
) -> None:
    one = _pull_receipts(admin_http, admin_api)
    _cancelled_task(admin_http, admin_api)

    refused = admin_http.delete(one)
    discarded = admin_http.delete(one, params={"discard_undelivered": "true", "reason": "gone"})

    assert refused.status_code == 409, refused.text
    assert discarded.status_code == 200, discarded.text
    assert "has 1 pending and 0 parked deliveries" in refused.json()["detail"]
    assert discarded.json()["deliveries"] == {"PENDING": 1, "DELIVERED": 0, "PARKED": 0}
    assert admin_http.get(one).status_code == 404


def test_a_push_subscription_is_refused_naming_a_secret_or_url_it_cannot_use(
    mariadb_engine: sa.Engine, tmp_path: Path
) -> None:
    api = Api(mariadb_engine, roles=("admin",), webhook_secrets_dir=str(tmp_path))
    (tmp_path / api.namespace).mkdir()
    (tmp_path / api.namespace / "hook").write_text(new_secret() + "\n")
    push = {"mode": "push", "url": "https://93.184.215.14/hook", "secret_ref": "hook"}
    with TestClient(api.app) as client:
        client.headers["Authorization"] = f"Bearer {api.token}"
        no_secret = client.put(f"{_base(api)}/a", json={**push, "secret_ref": "missing"})
        loopback = client.put(f"{_base(api)}/b", json={**push, "url": "http://127.0.0.1:9/"})
        accepted = client.put(f"{_base(api)}/c", json=push)
        pulled = client.get(f"{_base(api)}/c/events")

    assert no_secret.status_code == 422 and no_secret.json()["detail"].startswith("secret_ref: ")
    assert loopback.status_code == 422 and loopback.json()["detail"].startswith("url: ")
    assert accepted.status_code == 201, accepted.text
    assert pulled.status_code == 409 and "is a push subscription" in pulled.json()["detail"]


def test_invalid_bodies_and_parameters_are_refused_naming_the_field(
    admin_api: Api, admin_http: TestClient
) -> None:
    one = _pull_receipts(admin_http, admin_api)

    bad_mode = admin_http.put(one, json={"mode": "carrier-pigeon"})
    bad_outcome = admin_http.put(one, json={"mode": "pull", "filter": {"outcomes": ["DONE"]}})
    bad_queue = admin_http.put(one, json={"mode": "pull", "filter": {"queues": ["Bad Queue"]}})
    bad_limit = admin_http.get(f"{one}/events", params={"limit": 0})
    empty_ack = admin_http.post(f"{one}/ack", json={"event_ids": []})

    for answer, loc in [
        (bad_mode, ["body", "mode"]),
        (bad_outcome, ["body", "filter", "outcomes", 0]),
        (bad_queue, ["body", "filter", "queues", 0]),
        (bad_limit, ["query", "limit"]),
        (empty_ack, ["body", "event_ids"]),
    ]:
        assert answer.status_code == 422, answer.text
        assert loc in [e["loc"] for e in answer.json()["errors"]], answer.text


def test_every_route_of_a_missing_subscription_answers_404(
    admin_api: Api, admin_http: TestClient
) -> None:
    missing = f"{_base(admin_api)}/missing"

    for method, path, body in [
        ("GET", "", None),
        ("DELETE", "", None),
        ("GET", "/events", None),
        ("POST", "/ack", {"event_ids": ["e"]}),
        ("POST", "/redrive", {"reason": "r"}),
    ]:
        answer = admin_http.request(method, missing + path, json=body)
        assert answer.status_code == 404, (method, path, answer.text)


def test_declaring_deleting_and_redriving_need_the_admin_role_and_pulling_submit(
    admin_api: Api, admin_http: TestClient, mariadb_engine: sa.Engine
) -> None:
    one = _pull_receipts(admin_http, admin_api)
    submitter = token_headers(mariadb_engine, admin_api.namespace, "submit")
    viewer = token_headers(mariadb_engine, admin_api.namespace, "read")

    for method, path, body in [
        ("PUT", "", {"mode": "pull"}),
        ("DELETE", "", None),
        ("POST", "/redrive", {"reason": "r"}),
    ]:
        answer = admin_http.request(method, one + path, json=body, headers=submitter)
        assert answer.status_code == 403, (method, path)
        assert "needs the admin role" in answer.json()["detail"]
    assert admin_http.get(f"{one}/events", headers=submitter).status_code == 200
    assert admin_http.get(one, headers=viewer).status_code == 200
    refused = admin_http.get(f"{one}/events", headers=viewer)
    assert refused.status_code == 403 and "needs the submit role" in refused.json()["detail"]


def test_another_namespace_s_token_is_refused_and_its_names_are_its_own(
    admin_api: Api, admin_http: TestClient, mariadb_engine: sa.Engine
) -> None:
    one = _pull_receipts(admin_http, admin_api)
    elsewhere = f"other-{uuid.uuid4().hex[:8]}"
    stranger = token_headers(mariadb_engine, elsewhere, "admin")
    theirs = f"/v1/namespaces/{elsewhere}/subscriptions"

    refused = admin_http.get(one, headers=stranger)

    assert refused.status_code == 403 and refused.json()["token_namespace"] == elsewhere
    assert admin_http.get(theirs, headers=stranger).json()["items"] == []
    assert admin_http.get(f"{theirs}/receipts", headers=stranger).status_code == 404
