"""A connection lost at COMMIT: the server logs it with the request id and
answers a problem that says the outcome is unknown and the call is safe to retry — never the
driver's raw text. The server's MySQL connection is killed (KILL CONNECTION from another
connection) while its COMMIT waits behind ``BACKUP STAGE BLOCK_COMMIT``, on a MariaDB this test
owns (a global commit block must never touch the shared server)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from chaos.mariadb_instance import InstanceUnavailable, MariaDBInstance, started_instance

from orbit_store.access.credentials import create_token
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.upgrade import migrate

from ..conftest import Server, start_server, stop_server, wait_until

pytestmark = pytest.mark.slow

QUIET = (  # no engine loop commits while the test holds the commit block
    *("--reaper-interval", "3600", "--scheduler-interval", "3600"),
    *("--delivery-interval", "3600", "--gauge-interval", "3600"),
)


@pytest.fixture
def own_mariadb(tmp_path: Path) -> Iterator[MariaDBInstance]:
    try:
        instance = started_instance(tmp_path / "mariadb")
    except InstanceUnavailable as exc:
        pytest.skip(f"cannot start a private MariaDB for this test: {exc}")
    yield instance
    instance.stop()


@pytest.fixture
def server_on_own_mariadb(
    own_mariadb: MariaDBInstance, tmp_path: Path
) -> Iterator[tuple[Server, str]]:
    url = own_mariadb.create_database("orbit")
    engine = create_store_engine(url)
    migrate.upgrade(engine)
    token = run_transaction(
        engine, lambda conn: create_token(conn, namespace="shop", name="t", roles=["submit"])
    ).token
    engine.dispose()
    server = start_server(url, tmp_path / "server.log", *QUIET)
    yield server, token
    stop_server(server)


def kill_connections_waiting_to_commit(instance: MariaDBInstance) -> int:
    with instance.admin() as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT id FROM information_schema.processlist "
            "WHERE info = 'COMMIT' AND state LIKE 'Waiting for backup lock%'"
        )
        ids = [row[0] for row in cur.fetchall()]
        for connection_id in ids:
            cur.execute(f"KILL CONNECTION {int(connection_id)}")
    return len(ids)


def test_a_connection_lost_at_commit_is_logged_and_answered_outcome_unknown(
    own_mariadb: MariaDBInstance, server_on_own_mariadb: tuple[Server, str]
) -> None:
    server, token = server_on_own_mariadb
    answers: list[httpx.Response] = []
    blocker = own_mariadb.admin()
    with blocker.cursor() as cur:
        cur.execute("BACKUP STAGE START")
        cur.execute("BACKUP STAGE BLOCK_COMMIT")
        submit = threading.Thread(
            target=lambda: answers.append(
                httpx.post(
                    f"{server.url}/v1/namespaces/shop/tasks",
                    json={"handler": "shop.charge", "params": {"order": 1}},
                    headers={"Authorization": f"Bearer {token}", "X-Request-Id": "req-commit-1"},
                    timeout=30,
                )
            )
        )
        submit.start()
        # The replica's liveness beat commits every half second too: keep killing whatever
        # waits to commit until the submit has its answer, so the kill cannot miss it.
        deadline = time.monotonic() + 15
        while submit.is_alive() and time.monotonic() < deadline:
            kill_connections_waiting_to_commit(own_mariadb)
            submit.join(0.05)
        cur.execute("BACKUP STAGE END")
    blocker.close()
    submit.join(30)

    answer = answers[0]
    assert answer.status_code == 503
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.headers["x-request-id"] == "req-commit-1"
    body = answer.json()
    assert body["type"].endswith("/outcome-unknown")
    assert body["retry_safe"] is True and body["request_id"] == "req-commit-1"
    assert "may or may not" in body["detail"]
    assert "2013" not in answer.text and "Lost connection" not in answer.text

    def logged() -> dict[str, object] | None:
        for line in server.log.read_text().splitlines():
            if line.startswith("{") and "req-commit-1" in line:
                return json.loads(line)  # type: ignore[no-any-return]
        return None

    entry = wait_until(logged, timeout=30)
    assert entry["level"] == "warning" and "outcome unknown" in str(entry["msg"])
    assert entry["path"] == "/v1/namespaces/shop/tasks"


def test_every_answer_carries_a_request_id(server_on_own_mariadb: tuple[Server, str]) -> None:
    server, _ = server_on_own_mariadb
    first = httpx.get(f"{server.url}/healthz").headers["x-request-id"]
    second = httpx.get(f"{server.url}/healthz").headers["x-request-id"]
    assert first and second and first != second
    given = httpx.get(f"{server.url}/healthz", headers={"X-Request-Id": "abc.1"})
    assert given.headers["x-request-id"] == "abc.1"
