"""The audit trail over HTTP in process (``GET /v1/audit``): newest first, filtered by actor,
action family, resource and time, paged; the admin role of the namespace it reads."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import sqlalchemy as sa
from fastapi.testclient import TestClient

from .conftest import Api, token_headers


def _audited(http: TestClient, api: Api) -> None:
    """Three audited changes: a schedule created then suspended, a subscription declared."""
    schedules = f"/v1/namespaces/{api.namespace}/schedules"
    body = {"name": "nightly", "cron": "0 3 * * *", "task": {"handler": "h"}, "reason": "new"}
    assert http.post(schedules, json=body).status_code == 201
    assert http.post(f"{schedules}/nightly/suspend", json={"reason": "freeze"}).status_code == 200
    put = {"mode": "pull", "reason": "billing"}
    assert http.put(f"/v1/namespaces/{api.namespace}/subscriptions/bill", json=put).is_success


def _entries(http: TestClient, **query: Any) -> list[dict[str, Any]]:
    answer = http.get("/v1/audit", params=query)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


def test_the_trail_lists_who_did_what_and_why_newest_first(
    admin_api: Api, admin_http: TestClient
) -> None:
    _audited(admin_http, admin_api)

    entries = _entries(admin_http)

    assert [(e["action"], e["resource_id"], e["reason"]) for e in entries] == [
        ("subscription.create", "bill", "billing"),
        ("schedule.suspend", "nightly", "freeze"),
        ("schedule.create", "nightly", "new"),
    ]
    assert {(e["namespace"], e["actor"]) for e in entries} == {(admin_api.namespace, "t")}


def test_the_trail_filters_by_action_family_resource_actor_and_time(
    admin_api: Api, admin_http: TestClient
) -> None:
    _audited(admin_http, admin_api)
    newest = _entries(admin_http)[0]["at"]

    def actions(**query: Any) -> list[str]:
        return [e["action"] for e in _entries(admin_http, **query)]

    assert actions(action="schedule.*") == ["schedule.suspend", "schedule.create"]
    assert actions(action="schedule.create") == ["schedule.create"]
    assert actions(resource_kind="subscription") == ["subscription.create"]
    assert actions(resource_id="nightly") == ["schedule.suspend", "schedule.create"]
    assert actions(actor="someone-else") == []
    assert actions(until="2000-01-01T00:00:00Z") == []
    assert "subscription.create" in actions(since=newest)


def test_the_trail_pages_and_refuses_a_token_it_did_not_issue(
    admin_api: Api, admin_http: TestClient
) -> None:
    _audited(admin_http, admin_api)

    first = admin_http.get("/v1/audit", params={"page_size": 2}).json()
    rest = admin_http.get("/v1/audit", params={"page_token": first["next_page_token"]}).json()
    bad = admin_http.get("/v1/audit", params={"page_token": "not-a-token"})
    too_big = admin_http.get("/v1/audit", params={"page_size": 501})

    assert [e["action"] for e in first["items"] + rest["items"]] == [
        "subscription.create",
        "schedule.suspend",
        "schedule.create",
    ]
    assert rest["next_page_token"] is None
    assert bad.status_code == 422 and "page_token" in bad.json()["detail"]
    assert too_big.status_code == 422
    assert ["query", "page_size"] in [e["loc"] for e in too_big.json()["errors"]]


def test_a_forged_page_token_of_the_right_shape_is_refused_not_answered_empty(
    admin_http: TestClient,
) -> None:
    forged = base64.urlsafe_b64encode(json.dumps(["2020-01-01", {"x": 1}]).encode()).decode()

    answer = admin_http.get("/v1/audit", params={"page_token": forged})

    assert answer.status_code == 422 and "page_token" in answer.json()["detail"]


def test_reading_the_trail_needs_the_admin_role(
    admin_api: Api, admin_http: TestClient, mariadb_engine: sa.Engine
) -> None:
    _audited(admin_http, admin_api)

    for role in ("read", "submit", "review"):
        headers = token_headers(mariadb_engine, admin_api.namespace, role)
        refused = admin_http.get("/v1/audit", headers=headers)
        assert refused.status_code == 403, role
        assert "needs the admin role" in refused.json()["detail"]


def test_another_namespace_s_trail_is_refused_and_its_own_is_apart(
    admin_api: Api, admin_http: TestClient, mariadb_engine: sa.Engine
) -> None:
    _audited(admin_http, admin_api)
    elsewhere = f"other-{uuid.uuid4().hex[:8]}"
    stranger = token_headers(mariadb_engine, elsewhere, "admin")

    refused = admin_http.get(
        "/v1/audit", params={"namespace": admin_api.namespace}, headers=stranger
    )
    own = admin_http.get("/v1/audit", headers=stranger)

    assert refused.status_code == 403 and refused.json()["token_namespace"] == elsewhere
    assert own.status_code == 200 and own.json()["items"] == []


def test_each_schedule_change_is_audited_with_its_version_and_what_changed(
    admin_api: Api, admin_http: TestClient
) -> None:
    _audited(admin_http, admin_api)
    schedules = f"/v1/namespaces/{admin_api.namespace}/schedules"
    assert admin_http.delete(f"{schedules}/nightly", params={"reason": "retired"}).is_success

    trail = _entries(admin_http, resource_kind="Schedule", resource_id="nightly")

    assert [(e["action"], e["reason"], e["resource_version"]) for e in trail] == [
        ("schedule.delete", "retired", 2),
        ("schedule.suspend", "freeze", 2),
        ("schedule.create", "new", 1),
    ]
    assert trail[1]["after"]["changed"] == ["suspended", "version"]
