"""The restore fence over HTTP in process (``/v1/admin/restore-fence``): any namespace's admin
reads it; only an admin of the system namespace fences and reopens. The fence is database-wide,
so this file has a database of its own, and every test leaves dispatch open."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from orbit_store.db import create_store_engine
from orbit_store.fencing import SYSTEM_NAMESPACE

from .conftest import Api, token_headers

FENCE = "/v1/admin/restore-fence"


@pytest.fixture(scope="module")
def fence_engine(migrated_database: Callable[[], str]) -> Iterator[sa.Engine]:
    engine = create_store_engine(migrated_database())
    yield engine
    engine.dispose()


@pytest.fixture
def tenant(fence_engine: sa.Engine) -> Api:
    """An admin of an ordinary namespace."""
    return Api(fence_engine, roles=("admin",))


@pytest.fixture
def client(tenant: Api) -> Iterator[TestClient]:
    """The app with no token of its own: each request names whose it is."""
    with TestClient(tenant.app) as started:
        yield started


@pytest.fixture
def system(fence_engine: sa.Engine, client: TestClient) -> Iterator[dict[str, str]]:
    """An admin of the system namespace; dispatch is open again after the test."""
    headers = token_headers(fence_engine, SYSTEM_NAMESPACE, "admin")
    yield headers
    if not client.get(FENCE, headers=headers).json()["dispatch_open"]:
        client.post(f"{FENCE}/reopen", json={"reason": "test cleanup"}, headers=headers)


def _as(api: Api) -> dict[str, str]:
    return {"Authorization": f"Bearer {api.token}"}


def _status(client: TestClient, headers: dict[str, str]) -> dict[str, Any]:
    answer = client.get(FENCE, headers=headers)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_any_namespace_s_admin_reads_the_fence_and_a_reader_may_not(
    tenant: Api, client: TestClient, fence_engine: sa.Engine
) -> None:
    viewer = token_headers(fence_engine, tenant.namespace, "read")

    status = _status(client, _as(tenant))
    refused = client.get(FENCE, headers=viewer)

    assert status["dispatch_open"] is True and isinstance(status["epoch"], int)
    assert refused.status_code == 403 and "needs the admin role" in refused.json()["detail"]


def test_a_system_admin_fences_ends_every_session_and_reopens_inv3(
    tenant: Api, client: TestClient, system: dict[str, str]
) -> None:
    """Seed invariant 3: a grant from before the fence can do nothing after it; here its
    worker session is ended, so leasing on it is refused. Fence and reopen are audited."""
    before = _status(client, system)["epoch"]
    body = {"namespace": tenant.namespace, "worker_name": "w", "handlers": ["h"]}
    session = client.post("/v1/worker-sessions", json=body, headers=_as(tenant)).json()

    fenced = client.post(FENCE, json={"reason": "restored the 02:00 backup"}, headers=system)

    assert fenced.status_code == 200, fenced.text
    report = fenced.json()
    epoch = report["fence"]["epoch"]
    assert epoch > before and report["errors"] == 0
    ended = {n["namespace"]: n["sessions_ended"] for n in report["namespaces"]}
    assert ended[tenant.namespace] == 1
    closed = _status(client, _as(tenant))
    assert (closed["epoch"], closed["dispatch_open"]) == (epoch, False)
    lease = client.post(
        f"/v1/worker-sessions/{session['id']}/lease", json={"max_tasks": 1}, headers=_as(tenant)
    )
    assert lease.status_code == 409 and "is REVOKED" in lease.json()["detail"]

    reopened = client.post(f"{FENCE}/reopen", json={"reason": "reconciled"}, headers=system)

    assert reopened.status_code == 200, reopened.text
    assert (reopened.json()["reopen_reason"], reopened.json()["epoch"]) == ("reconciled", epoch)
    status = _status(client, _as(tenant))
    assert status["dispatch_open"] is True
    assert status["history"][0]["reason"] == "restored the 02:00 backup"
    trail = client.get("/v1/audit", params={"action": "restore.*"}, headers=system).json()
    assert [e["reason"] for e in trail["items"][:2]] == ["reconciled", "restored the 02:00 backup"]


def test_reopening_open_dispatch_is_a_conflict(client: TestClient, system: dict[str, str]) -> None:
    refused = client.post(f"{FENCE}/reopen", json={"reason": "again"}, headers=system)

    assert refused.status_code == 409, refused.text
    assert refused.json()["type"].endswith("/conflict")


def test_only_the_system_namespace_s_admin_fences_or_reopens(
    tenant: Api, client: TestClient, fence_engine: sa.Engine, system: dict[str, str]
) -> None:
    before = _status(client, system)["epoch"]
    system_reader = token_headers(fence_engine, SYSTEM_NAMESPACE, "read")

    for headers in (_as(tenant), system_reader):
        for path in (FENCE, f"{FENCE}/reopen"):
            refused = client.post(path, json={"reason": "why not"}, headers=headers)
            assert refused.status_code == 403, (path, refused.text)
    assert (_status(client, system)["epoch"], _status(client, system)["dispatch_open"]) == (
        before,
        True,
    )


def test_a_fence_without_a_reason_is_refused_naming_it(
    client: TestClient, system: dict[str, str]
) -> None:
    before = _status(client, system)["epoch"]

    for body in ({}, {"reason": ""}):
        refused = client.post(FENCE, json=body, headers=system)
        assert refused.status_code == 422, refused.text
        assert ["body", "reason"] in [e["loc"] for e in refused.json()["errors"]]
    assert _status(client, system)["epoch"] == before
