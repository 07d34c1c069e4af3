"""A default Helm install in miniature: the migration hook (`orbit admin migrate` as the DDL
user, naming the server's URL) creates the server's own user, and `orbit server` runs as that
user — serving, running its engine loops and auditing — while audit rows stay append-only for
it (seed §2, invariant 8)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from orbit_sdk import Client

from ..conftest import (
    ORBIT,
    ROOT,
    Server,
    is_ready,
    make_tenant,
    start_server,
    stop_server,
    wait_until,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def runtime_url(mariadb_url: str, mariadb_engine: sa.Engine) -> Iterator[str]:
    user = f"orbit_srv_{uuid.uuid4().hex[:8]}"
    url = make_url(mariadb_url).set(username=user, password=uuid.uuid4().hex)
    yield url.render_as_string(hide_password=False)
    with mariadb_engine.begin() as conn:
        conn.exec_driver_sql("DROP USER IF EXISTS %s@%s", (user, "%"))


@pytest.fixture
def least_privilege_server(
    mariadb_url: str, runtime_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    hook = subprocess.run(
        [ORBIT, "admin", "migrate", "--database-url", mariadb_url],
        env={"ORBIT_RUNTIME_DATABASE_URL": runtime_url, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert hook.returncode == 0, hook.stderr
    assert "audit_log is append-only for it" in hook.stdout
    started = start_server(runtime_url, tmp_path_factory.mktemp("least") / "server.log")
    yield started
    stop_server(started)


def test_the_server_runs_as_its_own_user_and_cannot_rewrite_audit_rows(
    least_privilege_server: Server, runtime_url: str, mariadb_engine: sa.Engine
) -> None:
    server = least_privilege_server
    wait_until(lambda: is_ready(server), timeout=60)
    tenant = make_tenant(server, mariadb_engine, ["submit", "admin"])
    with Client(server.url, token=tenant.token) as client:
        task = client.submit(tenant.namespace, handler="e2e.echo", delay=3600)
        client.cancel(tenant.namespace, task.id, reason="audited as the server's user")
        (entry,) = client.audit(tenant.namespace, action="task.cancel").items
    assert entry.reason == "audited as the server's user"
    assert httpx.get(f"{server.url}/metrics").status_code == 200
    log = server.log.read_text()
    assert "engine loop pass failed" not in log and "command denied" not in log
    as_server = sa.create_engine(runtime_url)
    try:
        with as_server.connect() as conn, pytest.raises(sa.exc.OperationalError, match="1142"):
            conn.exec_driver_sql("UPDATE audit_log SET reason = 'rewritten'")
    finally:
        as_server.dispose()
