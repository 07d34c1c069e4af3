"""Outcome reports riding the next lease request (worker protocol 4) through HTTP: each report is
applied with its own token and fencing (invariants 3, 4) and answered on its own, exactly as
``POST /v1/attempts:complete`` answers it, and the same request's claim grants new work. The
app runs in-process on MariaDB."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import sqlalchemy as sa

from orbit.api.schemas.batches import WORKER_PROTOCOL
from orbit_store.db import run_transaction
from orbit_store.pulse import service
from orbit_store.pulse.workers.sessions import revoke_session
from orbit_store.schema import task_events, tasks

from ..conftest import Api

PROBLEMS = "https://orbit.dev/problems/"


def _lease(api: Api, session: str, body: dict[str, Any], **kw: Any) -> Any:
    return asyncio.run(api.call("POST", f"/v1/worker-sessions/{session}/lease", body, **kw))


def _session(api: Api, name: str = "w") -> str:
    body = {"namespace": api.namespace, "worker_name": name, "handlers": ["h"]}
    return str(asyncio.run(api.call("POST", "/v1/worker-sessions", body))["id"])


def _state(api: Api, task_id: str) -> str:
    with api.engine.connect() as conn:
        return str(conn.execute(sa.select(tasks.c.state).where(tasks.c.id == task_id)).scalar())


def _report(lease: dict[str, Any], outcome: str = "succeeded", **fields: Any) -> dict[str, Any]:
    return {
        "attempt_id": lease["attempt_id"],
        "token": lease["token"],
        "outcome": outcome,
        **fields,
    }


def _started(api: Api, session: str, count: int) -> list[dict[str, Any]]:
    for _ in range(count):
        api.submit()
    leases = _lease(api, session, {"max_tasks": count, "start_handlers": ["h"]})["leases"]
    assert len(leases) == count and all(lease["started"] for lease in leases)
    return list(leases)


def test_reports_on_a_lease_are_applied_and_the_claim_grants_more_inv4(api: Api) -> None:
    session = _session(api)
    first, second = _started(api, session, 2)
    waiting = api.submit()
    answer = _lease(
        api,
        session,
        {
            "max_tasks": 2,
            "start_handlers": ["h"],
            "reports": [_report(first, result={"n": 1}), _report(second, "failed", error="x")],
        },
    )
    assert [(r["attempt_id"], r["status"], r["outcome_status"]) for r in answer["reports"]] == [
        (first["attempt_id"], "ok", "applied"),
        (second["attempt_id"], "ok", "applied"),
    ]
    assert [r["task_state"] for r in answer["reports"]] == ["SUCCEEDED", "FAILED"]
    assert [lease["task_id"] for lease in answer["leases"]] == [waiting]
    assert _state(api, first["task_id"]) == "SUCCEEDED"
    with api.engine.connect() as conn:
        query = sa.select(task_events.c.to_state).where(task_events.c.task_id == first["task_id"])
        events = list(conn.execute(query.order_by(task_events.c.state_version)).scalars())
    assert events == ["WAITING", "LEASED", "RUNNING", "SUCCEEDED"]


def test_a_wrong_token_and_a_lapsed_lease_are_refused_alone_inv3(api: Api) -> None:
    """Three reports in one lease request: a wrong token (403), an attempt whose lease ended
    when its session was revoked (the task went back to WAITING: 409 stale-attempt, kept as
    evidence) and a valid one, which applies."""
    lost_session, session = _session(api, "lost"), _session(api)
    [lapsed] = _started(api, lost_session, 1)
    run_transaction(
        api.engine,
        functools.partial(
            revoke_session, namespace=api.namespace, session_id=lost_session, reason="pod gone"
        ),
    )
    service.reap(api.engine, namespace=api.namespace)  # a revoked session's leases lapse
    assert _state(api, lapsed["task_id"]) == "WAITING"
    [valid, forged] = _started(api, session, 2)
    forged_report = {**_report(forged), "token": "not-the-token"}
    answer = _lease(
        api,
        session,
        {"max_tasks": 1, "reports": [forged_report, _report(lapsed), _report(valid)]},
    )
    statuses = [(r["status"], (r["problem"] or {}).get("type")) for r in answer["reports"]]
    assert statuses == [
        ("refused", PROBLEMS + "invalid-attempt-token"),
        ("refused", PROBLEMS + "stale-attempt"),
        ("ok", None),
    ]
    assert _state(api, forged["task_id"]) == "RUNNING"  # nothing applied for the forged report
    assert _state(api, valid["task_id"]) == "SUCCEEDED"
    assert (
        _state(api, lapsed["task_id"]) == "WAITING"
    )  # its retry waits; the late report is evidence


def test_a_report_sent_again_answers_duplicate_and_changes_nothing_inv6(api: Api) -> None:
    session = _session(api)
    [lease] = _started(api, session, 1)
    body = {"max_tasks": 1, "reports": [_report(lease, result=1)]}
    assert _lease(api, session, body)["reports"][0]["outcome_status"] == "applied"
    again = _lease(api, session, body)["reports"][0]
    assert (again["status"], again["outcome_status"]) == ("ok", "duplicate")
    assert _state(api, lease["task_id"]) == "SUCCEEDED"


def test_reports_are_answered_when_nothing_is_left_to_grant(api: Api) -> None:
    session = _session(api)
    [lease] = _started(api, session, 1)
    answer = _lease(api, session, {"max_tasks": 4, "reports": [_report(lease)]})
    assert answer["leases"] == [] and answer["reports"][0]["outcome_status"] == "applied"


def test_a_report_without_its_token_is_refused_naming_the_field(api: Api) -> None:
    session = _session(api)
    problem = _lease(
        api,
        session,
        {"max_tasks": 1, "reports": [{"attempt_id": "a", "outcome": "succeeded"}]},
        expect=422,
    )
    assert "reports" in str(problem["errors"]) and "token" in str(problem["errors"])


def test_the_openapi_document_declares_worker_protocol_4(api: Api) -> None:
    assert WORKER_PROTOCOL == 4
    assert api.app.openapi()["info"]["x-worker-protocol"] == 4


def test_grants_of_a_request_carrying_reports_are_not_handed_back_inv2(api: Api) -> None:
    """A request with reports answers at once; its client is not asked whether it is still
    there, so a disconnected one's grants stay granted (they lapse as any lost answer's do),
    and its reports apply."""
    session = _session(api)
    [lease] = _started(api, session, 1)
    waiting = api.submit()
    body = {"max_tasks": 1, "start_handlers": ["h"], "reports": [_report(lease)]}
    answer = _lease(api, session, body, disconnect=True)
    assert [g["task_id"] for g in answer["leases"]] == [waiting]
    assert answer["reports"][0]["outcome_status"] == "applied"
    assert _state(api, waiting) == "RUNNING"
