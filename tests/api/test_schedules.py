"""Schedules over HTTP in process (``/v1/namespaces/{ns}/schedules``): create, read, list,
update, suspend, resume, delete and preview, with the refusals a user meets. Triggering is in
test_views.py."""

from __future__ import annotations

import uuid
from typing import Any

import sqlalchemy as sa
from fastapi.testclient import TestClient

from .conftest import Api, token_headers


def _base(api: Api) -> str:
    return f"/v1/namespaces/{api.namespace}/schedules"


def _body(name: str = "nightly", **more: Any) -> dict[str, Any]:
    return {"name": name, "cron": "0 3 * * *", "task": {"handler": "reports.nightly"}, **more}


def _problem(answer: Any, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    return dict(answer.json())


def test_a_created_schedule_is_read_back_listed_and_located(api: Api, http: TestClient) -> None:
    created = http.post(_base(api), json=_body(time_zone="Europe/Berlin", reason="reports"))

    assert created.status_code == 201, created.text
    assert created.headers["location"] == f"{_base(api)}/nightly"
    got = http.get(created.headers["location"]).json()
    assert (got["cron"], got["time_zone"], got["state"], got["version"]) == (
        "0 3 * * *",
        "Europe/Berlin",
        "Active",
        1,
    )
    assert got["task"]["handler"] == "reports.nightly" and got["next_fire_at"] is not None
    assert got["source"] == "api" and got["occurrences"] == []
    assert [s["name"] for s in http.get(_base(api)).json()["items"]] == ["nightly"]


def test_a_second_schedule_of_the_same_name_is_a_conflict(api: Api, http: TestClient) -> None:
    assert http.post(_base(api), json=_body()).status_code == 201

    refused = _problem(http.post(_base(api), json=_body(cron="0 4 * * *")), 409)

    assert "'nightly' already exists" in refused["detail"]
    assert http.get(f"{_base(api)}/nightly").json()["cron"] == "0 3 * * *"


def test_an_invalid_expression_or_zone_is_refused_naming_the_field(
    api: Api, http: TestClient
) -> None:
    bad_cron = _problem(http.post(_base(api), json=_body(cron="61 * * * *")), 422)
    bad_zone = _problem(http.post(_base(api), json=_body(time_zone="Mars/Olympus")), 422)

    assert bad_cron["detail"].startswith("cron: '61 * * * *' is not a valid cron expression")
    assert bad_zone["detail"].startswith("time_zone: 'Mars/Olympus' is not an IANA time zone")
    assert http.get(_base(api)).json()["items"] == []


def test_a_body_with_an_unknown_field_or_bad_name_is_refused_naming_it(
    api: Api, http: TestClient
) -> None:
    unknown = _problem(http.post(_base(api), json=_body(schedule="0 3 * * *")), 422)
    bad_name = _problem(http.post(_base(api), json=_body(name="Not_A_Name")), 422)

    assert ["body", "schedule"] in [e["loc"] for e in unknown["errors"]]
    assert ["body", "name"] in [e["loc"] for e in bad_name["errors"]]


def test_template_params_over_the_payload_limit_are_refused_413(
    mariadb_engine: sa.Engine,
) -> None:
    small = Api(mariadb_engine, roles=("submit",), max_payload_bytes=1024)
    with TestClient(small.app) as client:
        client.headers["Authorization"] = f"Bearer {small.token}"
        body = _body(task={"handler": "h", "params": {"blob": "x" * 2048}})
        refused = _problem(client.post(_base(small), json=body), 413)
        assert refused["field"] == "task.params"
        assert client.get(_base(small)).json()["items"] == []


def test_an_update_bumps_the_version_and_a_stale_expected_version_is_a_conflict(
    api: Api, http: TestClient
) -> None:
    http.post(_base(api), json=_body())
    spec = {"cron": "30 3 * * *", "task": {"handler": "reports.nightly"}}

    updated = http.put(f"{_base(api)}/nightly", json={**spec, "expected_version": 1})
    stale = http.put(
        f"{_base(api)}/nightly", json={**spec, "cron": "0 5 * * *", "expected_version": 1}
    )

    assert updated.status_code == 200, updated.text
    assert (updated.json()["cron"], updated.json()["version"]) == ("30 3 * * *", 2)
    _problem(stale, 409)
    assert http.get(f"{_base(api)}/nightly").json()["cron"] == "30 3 * * *"


def test_suspend_then_resume_changes_the_state_each_time(api: Api, http: TestClient) -> None:
    http.post(_base(api), json=_body())

    suspended = http.post(f"{_base(api)}/nightly/suspend", json={"reason": "maintenance"})
    resumed = http.post(f"{_base(api)}/nightly/resume")

    assert suspended.status_code == 200, suspended.text
    assert (suspended.json()["state"], suspended.json()["suspend"]) == ("Suspended", True)
    assert (resumed.json()["state"], resumed.json()["suspend"]) == ("Active", False)
    assert resumed.json()["next_fire_at"] is not None


def test_a_deleted_schedule_is_gone_and_deleting_again_is_404(api: Api, http: TestClient) -> None:
    http.post(_base(api), json=_body())

    deleted = http.delete(f"{_base(api)}/nightly", params={"reason": "retired"})

    assert deleted.status_code == 204 and not deleted.content
    _problem(http.get(f"{_base(api)}/nightly"), 404)
    _problem(http.delete(f"{_base(api)}/nightly"), 404)


def test_every_route_of_a_missing_schedule_answers_404(api: Api, http: TestClient) -> None:
    missing = f"{_base(api)}/missing"
    spec = {"cron": "0 3 * * *", "task": {"handler": "h"}}

    assert _problem(http.get(missing), 404)["detail"].startswith("schedule 'missing' not found")
    _problem(http.put(missing, json=spec), 404)
    _problem(http.post(f"{missing}/suspend"), 404)
    _problem(http.post(f"{missing}/resume"), 404)


def test_a_preview_lists_the_next_instants_and_stores_nothing(api: Api, http: TestClient) -> None:
    body = {
        "cron": "0 9 * * MON-FRI",
        "time_zone": "Europe/Berlin",
        "after": "2026-01-02T12:00:00Z",
        "count": 3,
    }

    preview = http.post(f"{_base(api)}/preview", json=body)

    assert preview.status_code == 200, preview.text
    assert [i["at"][:16] for i in preview.json()["instants"]] == [
        "2026-01-05T08:00",
        "2026-01-06T08:00",
        "2026-01-07T08:00",
    ]
    assert preview.json()["instants"][0]["local"].startswith("2026-01-05T09:00")
    assert http.get(_base(api)).json()["items"] == []


def test_the_list_pages_by_name_and_refuses_a_token_it_did_not_issue(
    api: Api, http: TestClient
) -> None:
    for name in ("a-1", "a-2", "a-3"):
        http.post(_base(api), json=_body(name))

    first = http.get(_base(api), params={"page_size": 2}).json()
    second = http.get(
        _base(api), params={"page_size": 2, "page_token": first["next_page_token"]}
    ).json()

    assert [s["name"] for s in first["items"]] == ["a-1", "a-2"]
    assert [s["name"] for s in second["items"]] == ["a-3"] and second["next_page_token"] is None
    refused = _problem(http.get(_base(api), params={"page_token": "!!"}), 422)
    assert "page_token" in refused["detail"]


def test_a_read_token_reads_and_previews_but_changes_nothing(
    api: Api, http: TestClient, mariadb_engine: sa.Engine
) -> None:
    http.post(_base(api), json=_body())
    viewer = token_headers(mariadb_engine, api.namespace, "read")
    spec = {"cron": "0 4 * * *", "task": {"handler": "h"}}

    assert http.get(f"{_base(api)}/nightly", headers=viewer).status_code == 200
    assert http.get(_base(api), headers=viewer).status_code == 200
    preview = {"cron": "0 4 * * *"}
    assert http.post(f"{_base(api)}/preview", json=preview, headers=viewer).status_code == 200
    for method, path, body in [
        ("POST", "", _body("other")),
        ("PUT", "/nightly", spec),
        ("POST", "/nightly/suspend", None),
        ("DELETE", "/nightly", None),
    ]:
        answer = http.request(method, _base(api) + path, json=body, headers=viewer)
        assert "needs the submit role" in _problem(answer, 403)["detail"], (method, path)
    assert http.get(f"{_base(api)}/nightly").json()["version"] == 1


def test_another_namespace_s_token_is_refused_and_its_schedules_stay_apart(
    api: Api, http: TestClient, mariadb_engine: sa.Engine
) -> None:
    http.post(_base(api), json=_body())
    elsewhere = f"other-{uuid.uuid4().hex[:8]}"
    stranger = token_headers(mariadb_engine, elsewhere, "submit")
    theirs = f"/v1/namespaces/{elsewhere}/schedules"

    refused = _problem(http.get(f"{_base(api)}/nightly", headers=stranger), 403)

    assert refused["token_namespace"] == elsewhere
    assert http.get(theirs, headers=stranger).json()["items"] == []
    _problem(http.get(f"{theirs}/nightly", headers=stranger), 404)
    _problem(http.delete(f"{theirs}/nightly", headers=stranger), 404)
    assert http.get(f"{_base(api)}/nightly").status_code == 200
