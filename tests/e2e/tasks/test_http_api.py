"""The HTTP API through the real server: idempotent submission under concurrency, auth and
namespace scoping, the problem shape."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import sqlalchemy as sa

from ..conftest import Server, Tenant, make_tenant


def test_fifty_concurrent_identical_submissions_create_one_task_inv6(tenant: Tenant) -> None:
    body = {"handler": "e2e.echo", "params": {"order": 7}, "idempotency_key": "order-7"}
    url = f"{tenant.server.url}/v1/namespaces/{tenant.namespace}/tasks"

    def submit(_: int) -> tuple[int, str]:
        r = httpx.post(url, json=body, headers=tenant.headers, timeout=30)
        return r.status_code, r.json()["id"]

    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(submit, range(50)))
    assert len({task_id for _, task_id in results}) == 1
    assert sorted({code for code, _ in results}) in ([200, 201], [201])
    assert [code for code, _ in results].count(201) == 1
    page = httpx.get(url, headers=tenant.headers).json()
    assert len(page["items"]) == 1


def test_a_different_request_under_the_same_key_is_a_409_problem(tenant: Tenant) -> None:
    url = f"{tenant.server.url}/v1/namespaces/{tenant.namespace}/tasks"
    httpx.post(url, json={"handler": "a", "idempotency_key": "k"}, headers=tenant.headers)
    r = httpx.post(url, json={"handler": "b", "idempotency_key": "k"}, headers=tenant.headers)
    assert r.status_code == 409
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["type"] == "https://orbit.dev/problems/idempotency-conflict"


def test_an_undeclared_queue_is_a_404_problem_not_silently_created(tenant: Tenant) -> None:
    r = httpx.post(
        f"{tenant.server.url}/v1/namespaces/{tenant.namespace}/tasks",
        json={"handler": "a", "queue": "nope"},
        headers=tenant.headers,
    )
    assert r.status_code == 404 and r.json()["type"].endswith("/not-found")
    assert "not declared" in r.json()["detail"]


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer orb_wrong"}, {"Authorization": "Basic abc"}]
)
def test_requests_without_a_valid_token_get_401_and_change_nothing(
    tenant: Tenant, headers: dict[str, str]
) -> None:
    url = f"{tenant.server.url}/v1/namespaces/{tenant.namespace}/tasks"
    r = httpx.post(url, json={"handler": "a"}, headers=headers)
    assert r.status_code == 401 and r.json()["type"].endswith("/unauthorized")
    assert httpx.get(url, headers=tenant.headers).json()["items"] == []


def test_a_token_for_namespace_a_cannot_touch_namespace_b(
    server: Server, mariadb_engine: sa.Engine
) -> None:
    a = make_tenant(server, mariadb_engine, ["submit", "work", "review"])
    b = make_tenant(server, mariadb_engine, ["submit", "work", "review"])
    base = server.url
    task = httpx.post(
        f"{base}/v1/namespaces/{b.namespace}/tasks", json={"handler": "x"}, headers=b.headers
    ).json()
    b_session = httpx.post(
        f"{base}/v1/worker-sessions",
        json={"namespace": b.namespace, "worker_name": "w"},
        headers=b.headers,
    ).json()
    lease = httpx.post(
        f"{base}/v1/worker-sessions/{b_session['id']}/lease",
        json={"max_tasks": 1},
        headers=b.headers,
    ).json()["leases"][0]
    attempt, token = lease["attempt_id"], lease["token"]
    tasks_b = f"{base}/v1/namespaces/{b.namespace}/tasks"
    forbidden = [
        httpx.get(f"{tasks_b}/{task['id']}", headers=a.headers),
        httpx.get(tasks_b, headers=a.headers),
        httpx.post(tasks_b, json={"handler": "x"}, headers=a.headers),
        httpx.post(f"{tasks_b}/{task['id']}/cancel", json={}, headers=a.headers),
        httpx.post(
            f"{base}/v1/worker-sessions",
            json={"namespace": b.namespace, "worker_name": "w"},
            headers=a.headers,
        ),
    ]
    assert [r.status_code for r in forbidden] == [403] * 5
    hidden = [
        httpx.post(
            f"{base}/v1/worker-sessions/{b_session['id']}/lease", json={}, headers=a.headers
        ),
        httpx.post(f"{base}/v1/attempts/{attempt}/start", json={"token": token}, headers=a.headers),
        httpx.post(
            f"{base}/v1/attempts/{attempt}/complete",
            json={"token": token, "outcome": "succeeded"},
            headers=a.headers,
        ),
    ]
    assert [r.status_code for r in hidden] == [404] * 3
    beat = httpx.post(
        f"{base}/v1/attempts/heartbeat",
        json={"items": [{"attempt_id": attempt, "token": token}]},
        headers=a.headers,
    ).json()
    assert beat["results"][0]["status"] == "lost"
    after = httpx.get(f"{tasks_b}/{task['id']}", headers=b.headers).json()
    assert (after["state"], after["cancel_requested"]) == ("LEASED", False)


def test_a_submit_only_token_cannot_act_as_a_worker(
    server: Server, mariadb_engine: sa.Engine
) -> None:
    t = make_tenant(server, mariadb_engine, ["submit"])
    r = httpx.post(
        f"{server.url}/v1/worker-sessions",
        json={"namespace": t.namespace, "worker_name": "w"},
        headers=t.headers,
    )
    assert r.status_code == 403 and "work" in r.json()["detail"]


def test_the_root_points_at_the_console_and_the_docs(server: Server) -> None:
    """GET / is where a person or a script starts: a browser is sent to the web console,
    anything else gets the links as JSON (it was a 404 problem)."""
    links = httpx.get(f"{server.url}/", headers={"Accept": "application/json"})
    assert links.status_code == 200
    expected = {
        "console": "/ui/",
        "docs": "/docs",
        "openapi": "/openapi.json",
        "health": "/healthz",
    }
    assert expected.items() <= links.json().items()
    browser = httpx.get(f"{server.url}/", headers={"Accept": "text/html,*/*;q=0.8"})
    assert browser.status_code == 307 and browser.headers["location"] == "/ui/"
    for link in links.json().values():
        if link.startswith("/"):
            assert httpx.get(f"{server.url}{link}").status_code == 200, link


def test_probes_and_metrics(server: Server) -> None:
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{server.url}/readyz").status_code == 200
    metrics = httpx.get(f"{server.url}/metrics").text
    assert "orbit_tasks_submitted_total" in metrics and "orbit_queue_tasks" in metrics


@pytest.mark.parametrize("token", ["%%%", "bm90LWEtdXVpZA", "!!"])
def test_a_page_token_the_api_did_not_issue_is_a_422(tenant: Tenant, token: str) -> None:
    r = httpx.get(
        f"{tenant.server.url}/v1/namespaces/{tenant.namespace}/tasks",
        params={"page_token": token},
        headers=tenant.headers,
    )
    assert r.status_code == 422 and r.json()["type"].endswith("/validation")


def test_review_then_retry_over_http_and_a_second_retry_names_the_successor(
    tenant: Tenant,
) -> None:
    base = f"{tenant.server.url}/v1/namespaces/{tenant.namespace}/tasks"
    task = httpx.post(
        base, json={"handler": "x", "safety": "unsafe"}, headers=tenant.headers
    ).json()
    session = httpx.post(
        f"{tenant.server.url}/v1/worker-sessions",
        json={"namespace": tenant.namespace, "worker_name": "w"},
        headers=tenant.headers,
    ).json()
    lease = httpx.post(
        f"{tenant.server.url}/v1/worker-sessions/{session['id']}/lease",
        json={"max_tasks": 1},
        headers=tenant.headers,
    ).json()["leases"][0]
    attempt = f"{tenant.server.url}/v1/attempts/{lease['attempt_id']}"
    httpx.post(f"{attempt}/start", json={"token": lease["token"]}, headers=tenant.headers)
    httpx.post(
        f"{attempt}/complete",
        json={"token": lease["token"], "outcome": "unknown"},
        headers=tenant.headers,
    )
    current = httpx.get(f"{base}/{task['id']}", headers=tenant.headers).json()
    assert current["state"] == "NEEDS_REVIEW"
    reviewed = httpx.post(
        f"{base}/{task['id']}/review",
        headers=tenant.headers,
        json={
            "decision": "failed",
            "reason": "provider says not charged",
            "evidence_ref": "psp-1",
            "expected_state_version": current["state_version"],
            "execution_ended": True,
        },
    ).json()
    assert reviewed["state"] == "FAILED"
    retry_body = {
        "reason": "charge again",
        "expected_state_version": reviewed["state_version"],
        "safe_to_retry": True,
    }
    first = httpx.post(f"{base}/{task['id']}/retry", json=retry_body, headers=tenant.headers)
    assert first.status_code == 201 and first.json()["retry_of"] == task["id"]
    second = httpx.post(f"{base}/{task['id']}/retry", json=retry_body, headers=tenant.headers)
    assert second.status_code == 409 and second.json()["retry_task_id"] == first.json()["id"]
