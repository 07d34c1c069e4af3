"""``POST /v1/namespaces/{ns}/tasks:batch``: one answer per item, in order; refusals and
conflicts are per item (invariants 1, 6 per item)."""

from __future__ import annotations

import asyncio
from typing import Any

from .conftest import Api

PROBLEMS = "https://orbit.dev/problems/"


def _batch(api: Api, items: list[dict[str, Any]], *, status: int = 200) -> Any:
    path = f"/v1/namespaces/{api.namespace}/tasks:batch"
    return asyncio.run(api.call("POST", path, {"items": items}, expect=status))


def test_each_item_is_created_replayed_conflicting_or_refused_on_its_own(api: Api) -> None:
    earlier = _batch(api, [{"handler": "h", "idempotency_key": "old", "params": {"n": 0}}])
    answer = _batch(
        api,
        [
            {"handler": "h", "idempotency_key": "a", "params": {"n": 1}},
            {"handler": "h", "idempotency_key": "old", "params": {"n": 0}},
            {"handler": "h", "idempotency_key": "old", "params": {"n": 9}},
            {"handler": "h", "idempotency_key": "b", "queue": "undeclared"},
            {"handler": "h", "idempotency_key": "a", "params": {"n": 1}},
        ],
    )
    results = answer["results"]
    assert [r["status"] for r in results] == [
        "created",
        "replayed",
        "conflict",
        "refused",
        "replayed",
    ]
    assert [r["index"] for r in results] == [0, 1, 2, 3, 4]
    assert results[1]["task_id"] == earlier["results"][0]["task_id"]
    assert results[2]["problem"]["type"] == PROBLEMS + "idempotency-conflict"
    assert results[3]["problem"]["type"] == PROBLEMS + "not-found"
    assert results[4]["task_id"] == results[0]["task_id"], "a repeated key replays its first item"
    assert (answer["created"], answer["replayed"], answer["failed"]) == (1, 2, 2)


def test_more_than_a_thousand_items_is_refused_as_a_whole(api: Api) -> None:
    problem = _batch(api, [{"handler": "h"}] * 1001, status=422)
    assert problem["type"] == PROBLEMS + "validation"


def test_a_new_task_is_answered_from_what_was_written_exactly_as_a_read_shows_it(api: Api) -> None:
    """The submit response is built from the written row (no read-back): it must say what a
    GET of the task says."""
    body = {"handler": "h", "params": {"x": [1, 2.5, "é"]}, "priority": 7, "delay_seconds": 30}

    async def scenario() -> tuple[Any, Any]:
        created = await api.call("POST", f"/v1/namespaces/{api.namespace}/tasks", body)
        path = f"/v1/namespaces/{api.namespace}/tasks/{created['id']}"
        return created, await api.call("GET", path, None)

    created, read = asyncio.run(scenario())
    for detail_only in (
        "attempts",
        "events",
        "waiting_causes",
        "progress",
        "runnable_by_live_worker",
    ):
        read.pop(detail_only)
    created.pop("runnable_by_live_worker")
    assert created == read
    assert created["waiting_reason"] == "scheduled"


def test_with_tasks_each_item_carries_the_task_the_single_submission_answers(api: Api) -> None:
    """``with_tasks`` (the SDK's coalesced submissions): a created item's task is what
    ``POST …/tasks`` answers for it, a replayed one's is the task read now, ``replayed: true``
    (invariant 6); a refused item carries none."""
    single = {"handler": "h", "idempotency_key": "k-1", "params": {"n": 1}, "priority": 3}
    path = f"/v1/namespaces/{api.namespace}/tasks:batch"
    items = [
        {"handler": "h", "idempotency_key": "k-2", "params": {"n": 2}, "delay_seconds": 60},
        single,
        {"handler": "h", "queue": "undeclared"},
    ]

    async def scenario() -> tuple[Any, Any]:
        first = await api.call("POST", f"/v1/namespaces/{api.namespace}/tasks", single)
        return first, await api.call("POST", path, {"items": items, "with_tasks": True})

    first, answer = asyncio.run(scenario())
    created, replayed, refused = answer["results"]
    assert created["status"] == "created" and replayed["status"] == "replayed"
    assert created["task"]["id"] == created["task_id"]
    assert (created["task"]["params"], created["task"]["waiting_reason"]) == ({"n": 2}, "scheduled")
    assert created["task"]["replayed"] is False
    assert replayed["task"] == {**first, "replayed": True}
    assert refused["status"] == "refused" and refused["task"] is None
    plain = _batch(api, [{"handler": "h"}])["results"][0]
    assert plain["task"] is None, "without with_tasks the answer stays short"
