"""``POST /v1/attempts:start`` and ``:complete`` (worker protocol 2): one answer per item, in
request order; a refused item carries the problem the single-item call answers, and its
neighbours apply (invariant 3 per item)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from orbit_store.db import create_store_engine, run_transaction
from orbit_store.fencing import reopen_dispatch
from orbit_store.recovery.restore_fence import restore_fence

from ..conftest import Api

PROBLEMS = "https://orbit.dev/problems/"


async def _leased(api: Api, count: int) -> list[dict[str, Any]]:
    session = await api.session()
    for _ in range(count):
        await asyncio.to_thread(api.submit)
    body = {"max_tasks": count, "wait_seconds": 0}
    leases = await api.call("POST", f"/v1/worker-sessions/{session}/lease", body)
    assert len(leases["leases"]) == count
    return list(leases["leases"])


def test_a_wrong_token_and_an_unknown_attempt_are_refused_alone_inv3(api: Api) -> None:
    async def scenario() -> Any:
        first, second = await _leased(api, 2)
        items = [
            {"attempt_id": first["attempt_id"], "token": first["token"]},
            {"attempt_id": second["attempt_id"], "token": "wrong"},
            {"attempt_id": "no-such-attempt", "token": "x"},
        ]
        return await api.call("POST", "/v1/attempts:start", {"items": items})

    results = asyncio.run(scenario())["results"]
    assert [r["status"] for r in results] == ["ok", "refused", "refused"]
    assert results[0]["lease_expires_at"] is not None
    assert results[0]["lease_remaining_seconds"] > 0, "the local lease deadline is measured by it"
    assert results[1]["problem"]["type"] == PROBLEMS + "invalid-attempt-token"
    assert results[2]["problem"]["type"] == PROBLEMS + "not-found"


def test_completions_answer_per_item_and_an_unstarted_attempt_is_a_validation_problem(
    api: Api,
) -> None:
    async def scenario() -> Any:
        started, unstarted, other = await _leased(api, 3)
        for grant in (started, other):
            item = {"attempt_id": grant["attempt_id"], "token": grant["token"]}
            await api.call("POST", "/v1/attempts:start", {"items": [item]})
        report = {"outcome": "succeeded", "result": {"ok": True}}
        items = [
            {"attempt_id": g["attempt_id"], "token": g["token"], **report}
            for g in (started, unstarted)
        ]
        items.append(
            {"attempt_id": other["attempt_id"], "token": other["token"], "outcome": "failed"}
        )
        first = await api.call("POST", "/v1/attempts:complete", {"items": items})
        again = await api.call("POST", "/v1/attempts:complete", {"items": items[:1]})
        return first, again

    first, again = asyncio.run(scenario())
    applied, refused, failed = first["results"]
    assert (applied["status"], applied["outcome_status"], applied["task_state"]) == (
        "ok",
        "applied",
        "SUCCEEDED",
    )
    assert refused["status"] == "refused"
    assert refused["problem"]["type"] == PROBLEMS + "validation"
    assert (failed["outcome_status"], failed["task_state"]) == ("applied", "FAILED")
    assert again["results"][0]["outcome_status"] == "duplicate"


def test_the_openapi_document_names_the_worker_protocol(api: Api) -> None:
    assert api.app.openapi()["info"]["x-worker-protocol"] >= 2  # 3 (lease with start) adds to 2


def test_a_report_fenced_by_a_restore_is_refused_alone_in_a_batch(
    migrated_database: Callable[[], str],
) -> None:
    """A batch carrying a pre-fence attempt beside a post-reopen one: the old report answers
    ``restore-fenced`` (kept as evidence, seed §7) and its neighbour applies."""
    engine = create_store_engine(migrated_database())  # a fence closes a whole database
    api = Api(engine)
    try:

        async def scenario() -> Any:
            [old] = await _leased(api, 1)
            item = {"attempt_id": old["attempt_id"], "token": old["token"]}
            await api.call("POST", "/v1/attempts:start", {"items": [item]})
            await asyncio.to_thread(restore_fence, engine, reason="restored", actor="test")
            await asyncio.to_thread(
                run_transaction,
                engine,
                functools.partial(reopen_dispatch, reason="reconciled", actor="test"),
            )
            [new] = await _leased(api, 1)
            item = {"attempt_id": new["attempt_id"], "token": new["token"]}
            await api.call("POST", "/v1/attempts:start", {"items": [item]})
            report = {"outcome": "succeeded", "result": {}}
            items = [
                {"attempt_id": g["attempt_id"], "token": g["token"], **report} for g in (old, new)
            ]
            return await api.call("POST", "/v1/attempts:complete", {"items": items})

        fenced, applied = asyncio.run(scenario())["results"]
    finally:
        engine.dispose()
    assert fenced["status"] == "refused"
    assert fenced["problem"]["type"] == PROBLEMS + "restore-fenced"
    assert (applied["status"], applied["outcome_status"]) == ("ok", "applied")
