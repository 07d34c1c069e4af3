"""What the database cannot store is refused at the door with a 422 problem naming the field:
non-JSON numbers (NaN, Infinity, -Infinity, and 1e400, which parses as Infinity), arrays and
objects nested deeper than ``MAX_JSON_DEPTH``, text that is not Unicode — in every route that
takes JSON. Nothing is written (invariant 1: no answer but a refusal). A batch refuses only the
item; a completion whose result cannot be stored completes the attempt as a failure saying why,
instead of being refused and retried (invariant 4: the outcome, the attempt and the events
commit together)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from orbit_sdk.json_values import MAX_JSON_DEPTH

from .conftest import Api, asgi_request, authed

PROBLEMS = "https://orbit.dev/problems/"


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


#: Raw JSON texts Python's parser accepts and the database does not store.
UNSTORABLE = {
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "1e400": "1e400",
    "over-the-depth": json.dumps(nested(MAX_JSON_DEPTH + 1)),
    "32-deep": json.dumps(nested(32)),
    "lone-surrogate": '"\\ud800"',
}


V = "\u2063value"  # stands for the raw JSON text a test puts in a document


def _doc(document: Any, raw: str) -> str:
    """``document`` as JSON text with ``raw`` where it holds :data:`V`."""
    return json.dumps(document).replace(json.dumps(V), raw)


def _post(api: Api, path: str, raw: str) -> tuple[int, Any]:
    status, _, body = asgi_request(api.app, path, raw.encode(), authed(api))
    return status, body


def _names(problem: dict[str, Any], field: str) -> bool:
    """The problem names ``field``: in an error's ``loc``, its ``field`` member or its detail."""
    locs = [".".join(str(p) for p in e.get("loc", [])) for e in problem.get("errors") or []]
    return (
        any(field in loc for loc in locs)
        or field in str(problem.get("field", ""))
        or field in str(problem.get("detail", ""))
    )


def _tasks(api: Api) -> list[Any]:
    path = f"/v1/namespaces/{api.namespace}/tasks"
    return list(asyncio.run(api.call("GET", path, None))["items"])


@pytest.mark.parametrize("raw", list(UNSTORABLE.values()), ids=list(UNSTORABLE))
def test_a_submission_with_params_the_database_cannot_store_is_a_422_naming_params_inv1(
    api: Api, raw: str
) -> None:
    path = f"/v1/namespaces/{api.namespace}/tasks"
    status, problem = _post(api, path, _doc({"handler": "h", "params": {"x": V}}, raw))
    assert status == 422 and problem["type"] == PROBLEMS + "validation", problem
    assert _names(problem, "params"), problem
    assert _tasks(api) == [], "nothing written"


def test_params_nested_to_the_documented_depth_are_stored_and_read_back(api: Api) -> None:
    params = nested(MAX_JSON_DEPTH)
    path = f"/v1/namespaces/{api.namespace}/tasks"
    created = asyncio.run(api.call("POST", path, {"handler": "h", "params": params}))
    read = asyncio.run(api.call("GET", f"{path}/{created['id']}", None))
    assert read["params"] == params


def test_a_batch_refuses_only_the_item_the_database_cannot_store_inv1(api: Api) -> None:
    items = '[{"handler": "h"}, {"handler": "h", "params": {"x": NaN}}, {"handler": "h"}]'
    status, answer = _post(
        api, f"/v1/namespaces/{api.namespace}/tasks:batch", f'{{"items": {items}}}'
    )
    assert status == 200, answer
    assert [r["status"] for r in answer["results"]] == ["created", "refused", "created"]
    problem = answer["results"][1]["problem"]
    assert problem["status"] == 422 and _names(problem, "params"), problem
    assert len(_tasks(api)) == 2


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("workflows", {"definition": "d", "input": {"x": V}}),
        ("workflows/w-1/signals", {"signal_id": "s", "name": "go", "payload": {"x": V}}),
        ("schedules", {"name": "s", "cron": "* * * * *", "task": {"handler": "h", "params": V}}),
        ("workflow-definitions", {"name": "d", "spec": {"steps": V}}),
    ],
    ids=["workflow-input", "signal-payload", "schedule-template", "definition-spec"],
)
@pytest.mark.parametrize(
    "raw", ["NaN", "-Infinity", json.dumps(nested(40))], ids=["NaN", "-Inf", "40-deep"]
)
def test_every_route_that_takes_json_refuses_what_cannot_be_stored(
    admin_api: Api, route: str, body: str, raw: str
) -> None:
    field = {"workflows": "input", "schedules": "params", "workflow-definitions": "spec"}.get(
        route, "payload"
    )
    path = f"/v1/namespaces/{admin_api.namespace}/{route}"
    status, problem = _post(admin_api, path, _doc(body, raw))
    assert status == 422 and _names(problem, field), problem


async def _running(api: Api, count: int) -> list[dict[str, Any]]:
    session = await api.session()
    for _ in range(count):
        await asyncio.to_thread(api.submit)
    body = {"max_tasks": count, "wait_seconds": 0}
    leases = (await api.call("POST", f"/v1/worker-sessions/{session}/lease", body))["leases"]
    items = [{"attempt_id": g["attempt_id"], "token": g["token"]} for g in leases]
    await api.call("POST", "/v1/attempts:start", {"items": items})
    return list(leases)


def test_a_result_that_cannot_be_stored_fails_the_attempt_saying_why_inv4(api: Api) -> None:
    (grant,) = asyncio.run(_running(api, 1))
    report = {"token": grant["token"], "outcome": "succeeded", "result": {"x": V}}
    status, answer = _post(api, f"/v1/attempts/{grant['attempt_id']}/complete", _doc(report, "NaN"))
    assert status == 200 and (answer["status"], answer["task_state"]) == ("applied", "FAILED")
    path = f"/v1/namespaces/{api.namespace}/tasks/{grant['task_id']}"
    task = asyncio.run(api.call("GET", path, None))
    assert task["error"]["type"] == "ResultNotStorable"
    assert "result.x" in task["error"]["message"] and "NaN" in task["error"]["message"]
    assert task["result"] is None


def test_a_completion_batch_fails_only_the_attempt_whose_result_cannot_be_stored_inv4(
    api: Api,
) -> None:
    grants = asyncio.run(_running(api, 3))
    results = [{"ok": 1}, nested(40), {"ok": 3}]
    items = [
        {"attempt_id": g["attempt_id"], "token": g["token"], "outcome": "succeeded", "result": r}
        for g, r in zip(grants, results, strict=True)
    ]
    status, answer = _post(api, "/v1/attempts:complete", json.dumps({"items": items}))
    assert status == 200, answer
    states = [(r["status"], r["task_state"]) for r in answer["results"]]
    assert states == [("ok", "SUCCEEDED"), ("ok", "FAILED"), ("ok", "SUCCEEDED")]


def test_an_error_that_cannot_be_stored_is_replaced_by_one_that_says_why(api: Api) -> None:
    (grant,) = asyncio.run(_running(api, 1))
    report = {"token": grant["token"], "outcome": "failed", "retryable": True, "error": {"why": V}}
    status, answer = _post(
        api, f"/v1/attempts/{grant['attempt_id']}/complete", _doc(report, "1e400")
    )
    assert status == 200 and answer["status"] == "applied", answer
    path = f"/v1/namespaces/{api.namespace}/tasks/{grant['task_id']}"
    task = asyncio.run(api.call("GET", path, None))
    assert task["state"] == "WAITING", "still retryable, as the worker said"
    attempt = task["attempts"][0]
    assert (
        attempt["error"]["type"] == "ErrorNotStorable"
        and "error.why" in attempt["error"]["message"]
    )


def test_unstorable_submissions_beside_valid_concurrent_ones_leave_those_untouched_inv1(
    api: Api,
) -> None:
    """Submissions that arrive together share a transaction: a NaN among them is refused at the
    door and the others are all accepted."""
    path = f"/v1/namespaces/{api.namespace}/tasks"

    async def one(n: int) -> int:
        raw = _doc({"handler": "h", "params": {"x": V}}, "NaN" if n % 4 == 0 else str(n))
        status, _ = await asyncio.to_thread(_post, api, path, raw)
        return status

    async def all_of_them() -> list[int]:
        return list(await asyncio.gather(*(one(n) for n in range(40))))

    statuses = asyncio.run(all_of_them())
    assert [s for n, s in enumerate(statuses) if n % 4 == 0] == [422] * 10
    assert [s for n, s in enumerate(statuses) if n % 4] == [201] * 30
    assert len(_tasks(api)) == 30
