"""Worker sessions over HTTP as docs/reference/api.md describes them: a name re-registering
closes its older session, closing a session lapses what it holds at once, a heartbeat naming
an ended session is a 409, and a heartbeat renews a session by the TTL it registered with."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx

from orbit_sdk import Client

from ..conftest import Tenant, wait_until

# The queues' default lease is 30 s: a task freed well within it was freed by the session's end.
WELL_WITHIN_THE_LEASE = 10.0


def register(tenant: Tenant, worker_name: str, **extra: Any) -> dict[str, Any]:
    answer = httpx.post(
        f"{tenant.server.url}/v1/worker-sessions",
        json={"namespace": tenant.namespace, "worker_name": worker_name, **extra},
        headers=tenant.headers,
    )
    assert answer.status_code == 201, answer.text
    return answer.json()  # type: ignore[no-any-return]


def lease_one(tenant: Tenant, session: dict[str, Any]) -> dict[str, Any]:
    answer = httpx.post(
        f"{tenant.server.url}/v1/worker-sessions/{session['id']}/lease",
        json={"max_tasks": 1},
        headers=tenant.headers,
    )
    [lease] = answer.json()["leases"]
    return lease  # type: ignore[no-any-return]


def start(tenant: Tenant, lease: dict[str, Any]) -> None:
    answer = httpx.post(
        f"{tenant.server.url}/v1/attempts/{lease['attempt_id']}/start",
        json={"token": lease["token"]},
        headers=tenant.headers,
    )
    assert answer.json()["started"], answer.text


def heartbeat(tenant: Tenant, **body: Any) -> httpx.Response:
    return httpx.post(
        f"{tenant.server.url}/v1/attempts/heartbeat", json=body, headers=tenant.headers
    )


def item(lease: dict[str, Any]) -> dict[str, str]:
    return {"attempt_id": lease["attempt_id"], "token": lease["token"]}


def test_re_registering_a_name_closes_the_older_session_whose_heartbeat_is_then_a_409(
    tenant: Tenant,
) -> None:
    with Client(tenant.server.url, token=tenant.token) as client:
        task = client.submit(tenant.namespace, handler="x.y", safety="unsafe")
        older = register(tenant, "billing-1")
        lease = lease_one(tenant, older)
        start(tenant, lease)
        newer = register(tenant, "billing-1")
        assert (older["generation"], newer["generation"]) == (1, 2)

        refused = heartbeat(tenant, session_id=older["id"], items=[item(lease)])
        assert refused.status_code == 409 and refused.json()["type"].endswith("/conflict")
        [fate] = heartbeat(tenant, items=[item(lease)]).json()["results"]
        # Which reason depends on whether the server's reaper has already lapsed the attempt.
        assert fate["status"] == "lost"
        assert fate["reason"] in ("worker session is CLOSED", "attempt is no longer current")

        def reviewed() -> bool:
            return client.get(tenant.namespace, task.id).state == "NEEDS_REVIEW"

        wait_until(reviewed, timeout=WELL_WITHIN_THE_LEASE)
        assert heartbeat(tenant, session_id=newer["id"]).status_code == 200


def test_deleting_a_session_lapses_the_leases_it_holds_at_once(tenant: Tenant) -> None:
    with Client(tenant.server.url, token=tenant.token) as client:
        task = client.submit(tenant.namespace, handler="x.y")
        session = register(tenant, "leaving-1")
        lease = lease_one(tenant, session)
        closed = httpx.delete(
            f"{tenant.server.url}/v1/worker-sessions/{session['id']}", headers=tenant.headers
        )
        assert closed.status_code == 204

        def lapsed() -> Any:
            detail = client.get(tenant.namespace, task.id)
            return detail if detail.attempts and detail.attempts[0].outcome == "LAPSED" else None

        detail = wait_until(lapsed, timeout=WELL_WITHIN_THE_LEASE)
    assert detail.state == "WAITING", "a lease lapsed before start hands the task back"
    [fate] = heartbeat(tenant, items=[item(lease)]).json()["results"]
    assert fate["status"] == "lost"


def test_a_heartbeat_renews_the_session_by_the_ttl_it_registered_with(tenant: Tenant) -> None:
    session = register(tenant, "long-ttl-1", ttl_seconds=300)
    renewed = heartbeat(tenant, session_id=session["id"]).json()["session"]
    expires = dt.datetime.fromisoformat(renewed["expires_at"].replace("Z", "+00:00"))
    left = (expires - dt.datetime.now(dt.UTC)).total_seconds()
    assert 240 < left <= 301, f"renewed for {left:.0f}s, not the session's 300 s"
    assert renewed["expires_at"] >= session["expires_at"]
