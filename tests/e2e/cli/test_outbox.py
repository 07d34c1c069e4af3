"""Seed §6.1: the client-side transactional outbox (orbit_sdk.outbox + `orbit outbox relay`)
against the real server: a rolled-back business transaction sends nothing; a relay that crashes
after submitting but before marking is followed by a replay, not a second task; two relay
processes working one outbox of 1,000 rows create exactly 1,000 tasks."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from orbit_sdk import Client
from orbit_sdk.outbox import OutboxSubmission, Relay, RelayPolicy, enqueue

from ..conftest import ORBIT, ROOT, Server, Tenant, load_example, make_tenant

shop_example = load_example("outbox/shop.py")
Base, outbox, place_order, relay_now = (
    shop_example.Base,
    shop_example.outbox,
    shop_example.place_order,
    shop_example.relay_now,
)


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[sa.Engine]:
    """The example shop's own database (SQLite), with its orders and outbox tables."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    Base.metadata.create_all(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def client(tenant: Tenant) -> Iterator[Client]:
    with Client(tenant.server.url, token=tenant.token) as c:
        yield c


def tasks_in(client: Client, namespace: str) -> list[str]:
    return [t.id for t in client.iter_tasks(namespace, page_size=500)]


def rows(engine: sa.Engine) -> list[sa.Row]:  # type: ignore[type-arg]
    with engine.connect() as conn:
        return list(conn.execute(sa.select(outbox)))


def test_a_placed_order_is_relayed_once_with_its_key(
    shop: sa.Engine, client: Client, tenant: Tenant
) -> None:
    with Session(shop) as session, session.begin():
        order_id = place_order(session, "alice@example.com", "42.00", tenant.namespace).id
    report = relay_now(shop, client)
    assert (report.delivered, report.replayed) == (1, 0)
    (row,) = rows(shop)
    assert (row.state, row.idempotency_key) == ("DELIVERED", f"receipt-{order_id}")
    task = client.get(tenant.namespace, row.task_id)
    assert (task.handler, task.params["order_id"]) == ("shop.send_receipt", order_id)
    assert relay_now(shop, client).leased == 0


def test_a_rolled_back_business_transaction_sends_nothing(
    shop: sa.Engine, client: Client, tenant: Tenant
) -> None:
    with pytest.raises(RuntimeError), Session(shop) as session, session.begin():
        place_order(session, "bob@example.com", "7.00", namespace=tenant.namespace)
        raise RuntimeError("payment declined")
    assert relay_now(shop, client).leased == 0
    assert rows(shop) == [] and tasks_in(client, tenant.namespace) == []


def test_a_relay_crash_after_submit_before_mark_is_resolved_by_a_replay(
    shop: sa.Engine, client: Client, tenant: Tenant
) -> None:
    with Session(shop) as session, session.begin():
        place_order(session, "carol@example.com", "9.99", namespace=tenant.namespace)
    crashed = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.e2e.cli.outbox_crash",
            str(shop.url),
            tenant.server.url,
            tenant.token,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert crashed.returncode == 1, crashed.stderr
    first_task = crashed.stdout.strip()
    (row,) = rows(shop)
    assert (row.state, row.task_id) == ("PENDING", None), "the crash left it unmarked"

    time.sleep(1.1)  # the crashed relay's one-second lease lapses
    report = Relay(shop, outbox, client, RelayPolicy(lease_seconds=1)).run_once()

    assert (report.delivered, report.replayed) == (1, 1)
    (row,) = rows(shop)
    assert (row.state, row.task_id, row.replayed) == ("DELIVERED", first_task, True)
    assert tasks_in(client, tenant.namespace) == [first_task]


def test_a_refused_submission_is_parked_and_a_missing_queue_is_retried_later(
    shop: sa.Engine, client: Client, tenant: Tenant
) -> None:
    with Session(shop) as session, session.begin():
        refused = OutboxSubmission(tenant.namespace, "x.y", options={"priority": 5000})
        enqueue(session, outbox, refused)
        enqueue(session, outbox, OutboxSubmission(tenant.namespace, "x.y", queue="later"))
    report = relay_now(shop, client)
    assert (report.parked, report.retried, report.delivered) == (1, 1, 0)
    by_queue = {row.request["queue"]: row for row in rows(shop)}
    assert by_queue["default"].state == "PARKED" and "priority" in by_queue["default"].last_error
    assert by_queue["later"].state == "PENDING" and "later" in by_queue["later"].last_error


@pytest.mark.slow
def test_two_relay_processes_turn_1000_rows_into_1000_tasks(
    server: Server, mariadb_engine: sa.Engine, empty_mariadb_url: str
) -> None:
    tenant = make_tenant(server, mariadb_engine, ["submit"])
    engine = sa.create_engine(empty_mariadb_url)
    outbox.create(engine)
    with engine.begin() as conn:
        for n in range(1000):
            enqueue(conn, outbox, OutboxSubmission(tenant.namespace, "bulk.job", params={"n": n}))
    engine.dispose()
    relays = [
        subprocess.Popen(
            [
                ORBIT,
                "outbox",
                "relay",
                "--database-url",
                empty_mariadb_url,
                "--until-idle",
                "--batch",
                "25",
            ],
            env=tenant.env(),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    reports = []
    for relay in relays:
        stdout, stderr = relay.communicate(timeout=300)
        assert relay.returncode == 0, stderr
        reports.append(json.loads(stdout))

    assert sum(r["delivered"] for r in reports) == 1000
    with Client(server.url, token=tenant.token) as client:
        assert len(set(tasks_in(client, tenant.namespace))) == 1000
    engine = sa.create_engine(empty_mariadb_url)
    try:
        delivered = rows(engine)
    finally:
        engine.dispose()
    assert {r.state for r in delivered} == {"DELIVERED"}
    assert len({r.task_id for r in delivered}) == 1000
