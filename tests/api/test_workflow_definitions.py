"""Workflow definitions over HTTP in process (``/v1/namespaces/{ns}/workflow-definitions``):
publishing is idempotent by digest, a changed spec is a new immutable version, an invalid spec
is refused naming every field, and only an admin of the namespace may publish."""

from __future__ import annotations

import uuid
from typing import Any

import sqlalchemy as sa
from fastapi.testclient import TestClient

from .conftest import Api, token_headers

SPEC: dict[str, Any] = {
    "steps": [
        {"name": "first", "task": {"handler": "shop.echo", "params": {"n": "${input.n}"}}},
        {"name": "approval", "dependsOn": ["first"], "wait": {"signal": "go"}},
    ]
}


def _base(api: Api) -> str:
    return f"/v1/namespaces/{api.namespace}/workflow-definitions"


def test_publishing_the_same_spec_again_adds_no_version_and_a_change_adds_one(
    admin_api: Api, admin_http: TestClient
) -> None:
    changed = {
        **SPEC,
        "steps": [
            *SPEC["steps"],
            {"name": "done", "dependsOn": ["approval"], "task": {"handler": "shop.done"}},
        ],
    }

    first = admin_http.post(_base(admin_api), json={"name": "flow", "spec": SPEC})
    again = admin_http.post(_base(admin_api), json={"name": "flow", "spec": SPEC})
    second = admin_http.post(_base(admin_api), json={"name": "flow", "spec": changed})

    assert first.status_code == 201, first.text
    assert (first.json()["published_version"], first.json()["changed"]) == (1, True)
    assert again.status_code == 200, again.text
    assert (again.json()["published_version"], again.json()["changed"]) == (1, False)
    assert second.status_code == 201 and second.json()["published_version"] == 2
    read = admin_http.get(f"{_base(admin_api)}/flow").json()
    assert read["latest_version"] == 2 and [v["version"] for v in read["versions"]] == [1, 2]
    assert read["versions"][0]["digest"] != read["versions"][1]["digest"]


def test_an_invalid_spec_is_refused_with_each_problem_under_spec(
    admin_api: Api, admin_http: TestClient
) -> None:
    spec = {"steps": [{"name": "a", "task": {"handler": "h"}, "dependsOn": ["nowhere"]}]}

    refused = admin_http.post(_base(admin_api), json={"name": "flow", "spec": spec})

    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"] == [
        {"loc": ["spec", "steps[0].dependsOn[0]"], "msg": "unknown step 'nowhere' (steps are: a)"}
    ]
    assert admin_http.get(f"{_base(admin_api)}/flow").status_code == 404


def test_a_bad_definition_name_is_refused_naming_the_field(
    admin_api: Api, admin_http: TestClient
) -> None:
    refused = admin_http.post(_base(admin_api), json={"name": "Flow_1", "spec": SPEC})

    assert refused.status_code == 422, refused.text
    assert ["body", "name"] in [e["loc"] for e in refused.json()["errors"]]


def test_a_spec_over_the_payload_limit_is_refused_413(mariadb_engine: sa.Engine) -> None:
    small = Api(mariadb_engine, roles=("admin",), max_payload_bytes=1024)
    big = {"steps": [{"name": "a", "task": {"handler": "h", "params": {"x": "y" * 2048}}}]}
    with TestClient(small.app) as client:
        client.headers["Authorization"] = f"Bearer {small.token}"
        refused = client.post(_base(small), json={"name": "flow", "spec": big})
        assert refused.status_code == 413, refused.text
        assert refused.json()["field"] == "spec"
        assert client.get(f"{_base(small)}/flow").status_code == 404


def test_publishing_needs_the_admin_role_and_reading_does_not(
    admin_api: Api, admin_http: TestClient, mariadb_engine: sa.Engine
) -> None:
    admin_http.post(_base(admin_api), json={"name": "flow", "spec": SPEC})
    submitter = token_headers(mariadb_engine, admin_api.namespace, "submit")
    viewer = token_headers(mariadb_engine, admin_api.namespace, "read")

    refused = admin_http.post(
        _base(admin_api), json={"name": "other", "spec": SPEC}, headers=submitter
    )

    assert refused.status_code == 403 and "needs the admin role" in refused.json()["detail"]
    assert admin_http.get(f"{_base(admin_api)}/flow", headers=viewer).status_code == 200
    assert admin_http.get(f"{_base(admin_api)}/other").status_code == 404


def test_another_namespace_sees_neither_the_definition_nor_this_namespace(
    admin_api: Api, admin_http: TestClient, mariadb_engine: sa.Engine
) -> None:
    admin_http.post(_base(admin_api), json={"name": "flow", "spec": SPEC})
    elsewhere = f"other-{uuid.uuid4().hex[:8]}"
    stranger = token_headers(mariadb_engine, elsewhere, "admin")

    refused = admin_http.get(f"{_base(admin_api)}/flow", headers=stranger)
    theirs = admin_http.get(
        f"/v1/namespaces/{elsewhere}/workflow-definitions/flow", headers=stranger
    )

    assert refused.status_code == 403 and refused.json()["token_namespace"] == elsewhere
    assert theirs.status_code == 404, theirs.text
    assert "'flow' not found" in theirs.json()["detail"]


def test_publishing_is_audited_once_per_new_version(admin_api: Api, admin_http: TestClient) -> None:
    changed = {"steps": [{"name": "only", "task": {"handler": "shop.only"}}]}
    for spec, reason in [(SPEC, "first"), (SPEC, "same again"), (changed, "new step")]:
        body = {"name": "flow", "spec": spec, "reason": reason}
        assert admin_http.post(_base(admin_api), json=body).is_success

    trail = admin_http.get("/v1/audit", params={"action": "workflowdefinition.*"}).json()
    digest = admin_http.get(f"{_base(admin_api)}/flow").json()["versions"][-1]["digest"]

    assert [(e["action"], e["resource_version"], e["reason"]) for e in trail["items"]] == [
        ("workflowdefinition.publish", 2, "new step"),
        ("workflowdefinition.publish", 1, "first"),
    ]
    assert trail["items"][0]["after"]["fields"]["digest"] == digest
