"""Restore fencing end to end (seed §7, invariants 3, 7, 8): a real `orbit server`, a real dump
and restore of its database, `orbit admin restore-fence` from the command line, a worker holding
pre-restore leases over HTTP, the admin API, and real `orbit worker` processes that wait while
dispatch is closed and run the work after the reopen. Each test has its own database and server:
a fence closes dispatch for the whole database."""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import sqlalchemy as sa

from orbit_sdk import Client
from orbit_store.access.credentials import create_token
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.fencing import SYSTEM_NAMESPACE

from ..conftest import ORBIT, ROOT, Server, Tenant, start_server, stop_server, wait_until

if TYPE_CHECKING:
    from conftest import Backups  # tests/conftest.py

pytestmark = pytest.mark.slow
FAST = ("--reaper-interval", "0.2", "--heartbeat-interval", "0.5", "--gauge-interval", "0.3")


@dataclass
class Site:
    """A database of its own, its server, a tenant (submit, work) and a system admin token."""

    database_url: str
    engine: sa.Engine
    server: Server
    tenant: Tenant
    admin_token: str
    log: Path

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_token}"}

    def restart(self) -> None:
        self.server = start_server(self.database_url, self.log, *FAST)
        self.tenant.server = self.server


def _token(engine: sa.Engine, namespace: str, roles: list[str]) -> str:
    name = f"e2e-{'-'.join(roles)}"
    issued = run_transaction(
        engine, functools.partial(create_token, namespace=namespace, name=name, roles=roles)
    )
    return issued.token


@pytest.fixture
def site(migrated_database: Callable[[], str], tmp_path: Path) -> Iterator[Site]:
    url = migrated_database()
    engine = create_store_engine(url)
    log = tmp_path / "server.log"
    server = start_server(url, log, *FAST)
    namespace = f"e2e-{os.urandom(5).hex()}"
    tenant = Tenant(namespace, _token(engine, namespace, ["submit", "work"]), server)
    made = Site(url, engine, server, tenant, _token(engine, SYSTEM_NAMESPACE, ["admin"]), log)
    yield made
    for process in tenant.workers:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    stop_server(made.server)
    engine.dispose()


class HandWorker:
    """A worker played by hand over HTTP, so the test decides when each lease is used."""

    def __init__(self, tenant: Tenant, name: str) -> None:
        self.tenant = tenant
        self.session = self.post(
            "/v1/worker-sessions", namespace=tenant.namespace, worker_name=name
        )
        assert self.session.status_code == 201, self.session.text

    def post(self, path: str, **body: Any) -> httpx.Response:
        return httpx.post(
            f"{self.tenant.server.url}{path}", json=body, headers=self.tenant.headers, timeout=30
        )

    def lease(self) -> dict[str, Any]:
        answer = self.post(
            f"/v1/worker-sessions/{self.session.json()['id']}/lease", max_tasks=1, wait_seconds=5
        )
        assert answer.status_code == 200, answer.text
        [lease] = answer.json()["leases"]
        return dict(lease)

    def start(self, lease: dict[str, Any]) -> httpx.Response:
        return self.post(f"/v1/attempts/{lease['attempt_id']}/start", token=lease["token"])

    def renew(self, lease: dict[str, Any]) -> dict[str, Any]:
        answer = self.post(
            "/v1/attempts/heartbeat",
            items=[{"attempt_id": lease["attempt_id"], "token": lease["token"]}],
        )
        assert answer.status_code == 200, answer.text
        return dict(answer.json()["results"][0])

    def complete(self, lease: dict[str, Any], **report: Any) -> httpx.Response:
        report.setdefault("outcome", "succeeded")
        return self.post(
            f"/v1/attempts/{lease['attempt_id']}/complete", token=lease["token"], **report
        )


def _orbit(*args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ORBIT, *args, "--database-url", database_url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def _slug(answer: httpx.Response) -> str:
    return str(answer.json()["type"]).rsplit("/", 1)[-1]


def test_after_a_restore_and_restore_fence_a_pre_restore_lease_can_do_nothing_over_http(
    site: Site, backups: Backups, tmp_path: Path
) -> None:
    tenant = site.tenant
    client = Client(site.server.url, token=tenant.token)
    charge = client.submit(tenant.namespace, handler="e2e.echo", safety="unsafe", params={})
    hand = HandWorker(tenant, "by-hand")
    charging = hand.lease()
    assert hand.start(charging).status_code == 200
    mail = client.submit(tenant.namespace, handler="e2e.echo", params={"to": "a@example.com"})

    dump = backups.take(site.database_url)  # the charge RUNNING, the mail WAITING

    assert hand.complete(charging, result={"charged": True}).status_code == 200
    mailing = hand.lease()  # the run goes on: a lease the backup will not know
    assert mailing["task_id"] == mail.id
    assert hand.start(mailing).status_code == 200

    # The playbook: stop the servers, restore, fence, start them again.
    stop_server(site.server)
    backups.restore(site.database_url, dump)
    fenced = _orbit(
        "admin", "restore-fence", "--reason", "restored the 02:00 backup",
        database_url=site.database_url,
    )  # fmt: skip
    assert fenced.returncode == 0, fenced.stderr
    assert "dispatch CLOSED" in fenced.stdout
    site.restart()
    client.close()
    client = Client(site.server.url, token=tenant.token)

    for lease, slug in ((charging, "restore-fenced"), (mailing, "not-found")):
        refused = hand.start(lease)
        assert (refused.status_code, _slug(refused)) == (409 if slug != "not-found" else 404, slug)
        assert hand.renew(lease)["status"] == "lost"
        refused = hand.complete(lease, result={"done": True})
        assert _slug(refused) == slug
    assert "restore fence" in hand.renew(charging)["reason"]
    assert client.get(tenant.namespace, charge.id).state == "NEEDS_REVIEW"  # inv. 7

    after = HandWorker(tenant, "after-the-fence")
    closed = after.post(f"/v1/worker-sessions/{after.session.json()['id']}/lease", wait_seconds=0)
    assert (closed.status_code, _slug(closed)) == (503, "dispatch-closed")
    status = httpx.get(f"{site.server.url}/v1/admin/restore-fence", headers=site.admin).json()
    assert status["dispatch_open"] is False and status["epoch"] > charging["epoch"]
    wait_until(lambda: "orbit_dispatch_fenced 1.0" in httpx.get(f"{site.server.url}/metrics").text)

    not_system = httpx.post(
        f"{site.server.url}/v1/admin/restore-fence/reopen",
        json={"reason": "reconciled"},
        headers={"Authorization": f"Bearer {_token(site.engine, tenant.namespace, ['admin'])}"},
    )
    assert not_system.status_code == 403
    reopened = httpx.post(
        f"{site.server.url}/v1/admin/restore-fence/reopen",
        json={"reason": "reconciled the charges with the provider"},
        headers=site.admin,
    )
    assert reopened.status_code == 200, reopened.text

    tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path))  # a real `orbit worker`
    done = client.wait(tenant.namespace, mail.id, timeout=30)
    assert done.state == "SUCCEEDED"
    new = done.attempts[-1]
    assert new.generation == mailing["generation"]  # the restore repeated the generation
    assert (new.epoch, new.generation) > (mailing["epoch"], mailing["generation"])  # not the token
    audit = httpx.get(
        f"{site.server.url}/v1/audit", params={"namespace": SYSTEM_NAMESPACE}, headers=site.admin
    ).json()["items"]
    assert {row["action"] for row in audit} == {"restore.fence", "restore.reopen"}
    client.close()
    stop_server(site.server)
    verified = _orbit("admin", "verify", database_url=site.database_url)
    assert verified.returncode == 0, verified.stdout
    site.restart()


def test_a_running_orbit_worker_is_fenced_waits_while_closed_and_works_after_the_reopen(
    site: Site, tmp_path: Path
) -> None:
    tenant = site.tenant
    worker = tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path))
    with Client(site.server.url, token=tenant.token) as client:
        task = client.submit(tenant.namespace, handler="e2e.slow", params={"seconds": 3})
        wait_until(lambda: (tmp_path / "slow-started").exists(), timeout=30)

        fence = httpx.post(
            f"{site.server.url}/v1/admin/restore-fence",
            json={"reason": "restored the 02:00 backup"},
            headers=site.admin,
            timeout=60,
        )
        assert fence.status_code == 200, fence.text
        assert fence.json()["settled"] == {"WAITING": 1}  # safe and running: retried later

        # The handler finishes; its report is refused and kept as evidence, not applied.
        wait_until(lambda: (tmp_path / "slow-finished").exists(), timeout=30)
        wait_until(lambda: client.get(tenant.namespace, task.id).attempts[0].late_outcome)
        assert client.get(tenant.namespace, task.id).state == "WAITING"

        reopened = httpx.post(
            f"{site.server.url}/v1/admin/restore-fence/reopen",
            json={"reason": "nothing to reconcile"},
            headers=site.admin,
        )
        assert reopened.status_code == 200
        done = client.wait(tenant.namespace, task.id, timeout=60)
    assert done.state == "SUCCEEDED"
    assert [a.outcome for a in done.attempts] == ["LAPSED", "SUCCEEDED"]
    worker.terminate()
    worker.wait(30)
    said = tenant.log_of(worker)
    assert "dispatch is closed by a restore fence" in said
    assert "fenced by restore" in said
