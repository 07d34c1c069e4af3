"""The lease request's ``start_handlers`` (worker protocol 3) through HTTP: grants of
the named handlers come back started, bad input is named, and a started grant whose client had
gone is handed back unspent (invariant 7: nothing ran). The app runs in-process on MariaDB."""

from __future__ import annotations

import asyncio
from typing import Any

import sqlalchemy as sa

from orbit.api.schemas.batches import WORKER_PROTOCOL
from orbit_store.schema import task_attempts, task_events, tasks

from ..conftest import Api


def _lease(api: Api, body: dict[str, Any], **kw: Any) -> Any:
    async def scenario() -> Any:
        session = await api.session()  # declares handler "h"
        return await api.call("POST", f"/v1/worker-sessions/{session}/lease", body, **kw)

    return asyncio.run(scenario())


def _task(api: Api, task_id: str) -> Any:
    with api.engine.connect() as conn:
        return conn.execute(sa.select(tasks).where(tasks.c.id == task_id)).one()


def _attempts(api: Api, task_id: str) -> list[Any]:
    with api.engine.connect() as conn:
        query = sa.select(task_attempts).where(task_attempts.c.task_id == task_id)
        return list(conn.execute(query))


def test_a_lease_with_start_answers_started_running_grants(api: Api) -> None:
    task_id = api.submit()
    answer = _lease(api, {"max_tasks": 1, "start_handlers": ["h"]})
    [lease] = answer["leases"]
    assert lease["task_id"] == task_id and lease["started"] is True
    assert lease["lease_remaining_seconds"] == 30.0
    assert _task(api, task_id).state == "RUNNING"


def test_the_started_grant_records_both_events_and_no_start_call_is_needed(api: Api) -> None:
    task_id = api.submit()
    [lease] = _lease(api, {"max_tasks": 1, "start_handlers": ["h"]})["leases"]

    async def complete() -> Any:
        body = {"token": lease["token"], "outcome": "succeeded", "result": 1}
        return await api.call("POST", f"/v1/attempts/{lease['attempt_id']}/complete", body)

    assert asyncio.run(complete())["task_state"] == "SUCCEEDED"
    with api.engine.connect() as conn:
        query = sa.select(task_events.c.to_state).where(task_events.c.task_id == task_id)
        states = list(conn.execute(query.order_by(task_events.c.state_version)).scalars())
    assert states == ["WAITING", "LEASED", "RUNNING", "SUCCEEDED"]


def test_a_lease_without_start_handlers_answers_leased_grants(api: Api) -> None:
    task_id = api.submit()
    [lease] = _lease(api, {"max_tasks": 1})["leases"]
    assert lease["started"] is False
    assert _task(api, task_id).state == "LEASED"


def test_a_blank_start_handler_name_is_refused_naming_the_field(api: Api) -> None:
    problem = _lease(api, {"max_tasks": 1, "start_handlers": [""]}, expect=422)
    assert "start_handlers" in str(problem["errors"])


def test_start_handlers_must_be_a_list_of_names(api: Api) -> None:
    problem = _lease(api, {"max_tasks": 1, "start_handlers": "h"}, expect=422)
    assert "start_handlers" in str(problem["errors"])


def test_a_started_grant_to_a_client_that_disconnected_is_handed_back_unspent(api: Api) -> None:
    """The rule for grants whose client is gone: the worker never received the token, so the
    handler never ran — RUNNING → WAITING at once, the attempt RELEASED and not counted."""
    task_id = api.submit()
    answer = _lease(
        api, {"max_tasks": 1, "wait_seconds": 0, "start_handlers": ["h"]}, disconnect=True
    )
    assert answer["leases"] == []
    task = _task(api, task_id)
    assert (task.state, task.wait_path, task.attempts_used) == ("WAITING", "READY", 0)
    [attempt] = _attempts(api, task_id)
    assert attempt.started_at is not None  # it had been started by the claim
    assert attempt.outcome == "RELEASED" and "disconnected" in attempt.outcome_reason


def test_the_openapi_document_declares_lease_with_start(api: Api) -> None:
    async def openapi() -> Any:
        return await api.call("GET", "/openapi.json", None)

    document = asyncio.run(openapi())
    assert document["info"]["x-worker-protocol"] == WORKER_PROTOCOL >= 3
    lease_request = document["components"]["schemas"]["LeaseRequest"]
    assert "start_handlers" in lease_request["properties"]
