"""A half-open database connection (a failover, a proxy that stopped forwarding) holds no
request of the real server beyond ``--database-timeout``: the transaction on it is given up and
runs again on a new connection, and the submissions waiting behind it go on. Every keyed
submission ends accepted exactly once (invariants 1 and 6), and the server is ready after."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa
from half_open_proxy import HalfOpenProxy
from sqlalchemy.engine import make_url

from orbit_sdk import Client, RetryPolicy
from orbit_store.schema import tasks

from ..conftest import Server, Tenant, is_ready, make_tenant, start_server, stop_server, wait_until

SUBMITTERS = 6
EACH = 5
#: The SDK's patience: a few database timeouts, not the minutes a stuck connection lasts.
PATIENT = RetryPolicy(max_attempts=20, max_elapsed=120.0)


@pytest.fixture
def proxy(mariadb_url: str) -> Iterator[HalfOpenProxy]:
    proxy = HalfOpenProxy(make_url(mariadb_url).port or 3306)
    yield proxy
    proxy.close()


@pytest.fixture
def proxied_server(mariadb_url: str, proxy: HalfOpenProxy, tmp_path: Path) -> Iterator[Server]:
    url = make_url(mariadb_url).set(host="127.0.0.1", port=proxy.port)
    server = start_server(
        url.render_as_string(hide_password=False),
        tmp_path / "server.log",
        "--database-timeout",
        "2",
    )
    yield server
    stop_server(server)


def _submit_all(server: Server, tenant: Tenant, submitter: int) -> list[str]:
    with Client(server.url, token=tenant.token, retry=PATIENT, timeout=60) as client:
        return [
            client.submit(
                tenant.namespace, handler="e2e.echo", idempotency_key=f"{submitter}-{n}"
            ).id
            for n in range(EACH)
        ]


def test_a_half_open_database_connection_holds_no_request_past_the_timeout_inv1_inv6(
    proxied_server: Server, proxy: HalfOpenProxy, mariadb_engine: sa.Engine
) -> None:
    tenant = make_tenant(proxied_server, mariadb_engine, ["submit"])
    with ThreadPoolExecutor(SUBMITTERS) as pool:  # warm: connections pooled through the proxy
        list(pool.map(lambda n: _submit_all(proxied_server, tenant, 100 + n), range(SUBMITTERS)))
    assert proxy.freeze() >= 1
    with ThreadPoolExecutor(SUBMITTERS) as pool:
        accepted = list(
            pool.map(lambda n: _submit_all(proxied_server, tenant, n), range(SUBMITTERS))
        )
    assert [len(ids) for ids in accepted] == [EACH] * SUBMITTERS
    with mariadb_engine.connect() as conn:
        stored = conn.execute(
            sa.select(sa.func.count()).where(tasks.c.namespace == tenant.namespace)
        ).scalar_one()
    assert stored == 2 * SUBMITTERS * EACH, "each key accepted once"
    wait_until(lambda: is_ready(proxied_server), timeout=60)
