"""Seed §6.2 end to end, through the SDK against the real server: pull with ack and redelivery
after the deadline; webhooks signed, retried after failures and processed once by a receiver that
dedupes by event id; parked after max attempts and visible in /metrics; redrive."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from orbit_sdk import AsyncClient, Client, Conflict, Forbidden, ValidationFailed
from orbit_sdk.webhooks import InvalidWebhook, verify_webhook

from ..cli.test_cli import orbit
from ..conftest import Server, Tenant, make_tenant, start_server, stop_server, wait_until
from ..receiver import Receiver, new_secret


@pytest.fixture
def admin(server: Server, mariadb_engine: sa.Engine) -> Tenant:
    return make_tenant(server, mariadb_engine, ["admin"])


@pytest.fixture
def client(admin: Tenant) -> Iterator[Client]:
    with Client(admin.server.url, token=admin.token) as c:
        yield c


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    started = Receiver(new_secret()).start()
    yield started
    started.stop()


def subscribe_push(
    client: Client, server: Server, namespace: str, name: str, receiver: Receiver, **policy: Any
) -> None:
    """A push subscription to ``receiver``, its secret in the namespace's secrets folder."""
    secret_ref = secret_file(server, namespace, receiver.secret)
    client.put_subscription(
        namespace, name, mode="push", url=receiver.url, secret_ref=secret_ref, **policy
    )


def cancelled_task(client: Client, namespace: str, n: int = 0) -> str:
    """An outcome without a worker: submit for later, cancel."""
    task = client.submit(namespace, handler="shop.receipt", params={"n": n}, delay=3600)
    client.cancel(namespace, task.id, reason="test outcome")
    return task.id


def secret_file(server: Server, namespace: str, secret: str) -> str:
    name = f"hook-{uuid.uuid4().hex[:8]}"
    server.put_webhook_secret(namespace, name, secret)
    return name


def metric(server: Server, name: str, **labels: str) -> float | None:
    text = httpx.get(f"{server.url}/metrics").text
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + "{"):
            head, value = line.rsplit(" ", 1)
            got = ",".join(sorted(head[len(name) + 1 : -1].split(",")))
            if got == wanted:
                return float(value)
    return None


def test_pull_then_ack_and_unacked_events_come_back_after_the_deadline(
    admin: Tenant, client: Client
) -> None:
    ns = admin.namespace
    sub = client.put_subscription(ns, "receipts", mode="pull", outcomes=["CANCELLED"])
    assert (sub.mode, sub.version) == ("pull", 1)
    first_task, second_task = cancelled_task(client, ns, 1), cancelled_task(client, ns, 2)

    batch = client.pull_events(ns, "receipts", limit=10, ack_deadline_seconds=1)
    assert sorted(e.task_id for e in batch.events) == sorted([first_task, second_task])
    assert {e.task_state for e in batch.events} == {"CANCELLED"}
    first = next(e for e in batch.events if e.task_id == first_task)
    assert client.ack_events(ns, "receipts", [first.id]) == {first.id: "acked"}
    assert client.pull_events(ns, "receipts").events == [], "held until the deadline"

    again = wait_until(lambda: client.pull_events(ns, "receipts", ack_deadline_seconds=60).events)
    assert [(e.task_id, e.attempt) for e in again] == [(second_task, 2)]
    client.ack_events(ns, "receipts", [again[0].id])
    assert client.get_subscription(ns, "receipts").deliveries == {
        "PENDING": 0,
        "DELIVERED": 2,
        "PARKED": 0,
    }


def test_a_webhook_failing_three_times_is_processed_exactly_once_with_a_valid_signature(
    admin: Tenant, client: Client, server: Server, receiver: Receiver
) -> None:
    receiver.fail_first = 3
    policy = {"backoff_initial_seconds": 0.1, "backoff_max_seconds": 0.2}
    subscribe_push(client, server, admin.namespace, "hook", receiver, **policy)
    task_id = cancelled_task(client, admin.namespace)
    wait_until(lambda: receiver.processed, timeout=30)
    time.sleep(1)  # any stray redelivery would show up now
    (event,) = receiver.processed.values()
    assert (event["task_id"], event["task_state"], event["attempt"]) == (task_id, "CANCELLED", 4)
    assert receiver.requests == 4 and receiver.rejected_signatures == 0
    sub = client.get_subscription(admin.namespace, "hook")
    assert sub.deliveries["DELIVERED"] == 1
    labels = {"namespace": admin.namespace, "subscription": "hook"}
    assert metric(server, "orbit_delivery_attempts_total", **labels, result="failed") == 3
    assert metric(server, "orbit_delivery_attempts_total", **labels, result="delivered") == 1


def test_a_webhook_that_keeps_failing_is_parked_visible_in_metrics_and_redriven(
    admin: Tenant, client: Client, server: Server, receiver: Receiver
) -> None:
    receiver.always_fail = True
    labels = {"namespace": admin.namespace, "subscription": "flaky"}
    policy = {"max_attempts": 2, "backoff_initial_seconds": 0.1}
    subscribe_push(client, server, admin.namespace, "flaky", receiver, **policy)
    cancelled_task(client, admin.namespace)
    wait_until(lambda: metric(server, "orbit_deliveries_parked", **labels) == 1, timeout=30)
    assert receiver.requests == 2 and receiver.processed == {}
    assert metric(server, "orbit_delivery_attempts_total", **labels, result="parked") == 1
    assert metric(server, "orbit_delivery_backlog", **labels) == 0

    receiver.always_fail = False
    assert client.redrive_subscription(admin.namespace, "flaky", reason="receiver fixed") == 1
    wait_until(lambda: receiver.processed, timeout=30)
    wait_until(lambda: metric(server, "orbit_deliveries_parked", **labels) == 0)
    (entry,) = client.audit(admin.namespace, action="subscription.redrive").items
    assert (entry.resource_id, entry.reason) == ("flaky", "receiver fixed")


def test_the_sdk_verifies_a_delivery_and_refuses_a_tampered_one(
    admin: Tenant, client: Client, server: Server, receiver: Receiver
) -> None:
    captured: list[tuple[dict[str, str], bytes]] = []
    original = receiver.handle

    def capture(headers: dict[str, str], body: bytes) -> int:
        captured.append((headers, body))
        return original(headers, body)

    receiver.handle = capture  # type: ignore[method-assign]
    subscribe_push(client, server, admin.namespace, "sdk", receiver)
    task_id = cancelled_task(client, admin.namespace)
    wait_until(lambda: captured, timeout=30)
    headers, body = captured[0]
    secret = receiver.secret
    assert verify_webhook(secret, headers, body).task_id == task_id
    with pytest.raises(InvalidWebhook):
        verify_webhook(secret, headers, body.replace(b"CANCELLED", b"SUCCEEDED"))
    with pytest.raises(InvalidWebhook, match="tolerance"):
        verify_webhook(secret, headers, body, now=time.time() + 3600)


def test_a_push_subscription_whose_secret_the_server_cannot_read_is_refused(
    admin: Tenant, client: Client
) -> None:
    with pytest.raises(ValidationFailed, match="secret_ref"):
        client.put_subscription(
            admin.namespace, "x", mode="push", url="http://127.0.0.1:9/", secret_ref="missing"
        )


def test_naming_another_namespaces_secret_is_answered_as_naming_one_nobody_has(
    admin: Tenant, server: Server, mariadb_engine: sa.Engine
) -> None:
    """Seed §11, cross-namespace secrets are refused: ``admin``'s namespace names a secret
    that ``other``'s namespace holds. The answer is the one for a name no namespace uses —
    same status, same problem, word for word — and ``other`` itself may use it."""
    other = make_tenant(server, mariadb_engine, ["admin"])
    server.put_webhook_secret(other.namespace, "shared-name", new_secret())
    body = {"mode": "push", "url": "http://127.0.0.1:9/", "secret_ref": "shared-name"}
    url = f"{server.url}/v1/namespaces/{admin.namespace}/subscriptions/steal"

    theirs = httpx.put(url, json=body, headers=admin.headers)
    (server.webhook_secrets / other.namespace / "shared-name").unlink()
    nobodys = httpx.put(url, json=body, headers=admin.headers)

    assert theirs.status_code == nobodys.status_code == 422
    answers = [{k: v for k, v in r.json().items() if k != "request_id"} for r in (theirs, nobodys)]
    assert answers[0] == answers[1] and answers[0]["detail"].startswith("secret_ref: ")
    server.put_webhook_secret(other.namespace, "shared-name", new_secret())
    with Client(server.url, token=other.token) as owner:
        owned = owner.put_subscription(
            other.namespace,
            "mine",
            mode="push",
            url="http://127.0.0.1:9/",
            secret_ref="shared-name",
        )
    assert owned.version == 1


@pytest.fixture(scope="module")
def default_server(mariadb_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`orbit server` as installed: no --webhook-allow."""
    started = start_server(mariadb_url, tmp_path_factory.mktemp("default") / "server.log")
    yield started
    stop_server(started)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://[::1]/hook",
        "http://169.254.169.254/latest/meta-data/iam/",
        "http://10.96.0.1/api/v1/secrets",  # a cluster's Kubernetes API Service
        "http://0.0.0.0:8080/",
    ],
)
def test_a_default_server_refuses_a_push_subscription_to_loopback_link_local_or_private(
    default_server: Server, mariadb_engine: sa.Engine, url: str
) -> None:
    admin = make_tenant(default_server, mariadb_engine, ["admin"])
    default_server.put_webhook_secret(admin.namespace, "hook", new_secret())
    with Client(default_server.url, token=admin.token) as client:
        with pytest.raises(ValidationFailed, match=r"url: host .* resolves to .*--webhook-allow"):
            client.put_subscription(admin.namespace, "x", mode="push", url=url, secret_ref="hook")
        public = client.put_subscription(
            admin.namespace, "ok", mode="push", url="https://93.184.215.14/hook", secret_ref="hook"
        )
    assert public.version == 1


def test_subscriptions_and_audit_are_namespace_scoped_and_need_the_admin_role(
    admin: Tenant, client: Client, server: Server, mariadb_engine: sa.Engine
) -> None:
    client.put_subscription(admin.namespace, "mine", mode="pull", reason="billing wants it")
    submitter = make_tenant(server, mariadb_engine, ["submit"])
    with Client(server.url, token=submitter.token) as other:
        with pytest.raises(Forbidden):
            other.get_subscription(admin.namespace, "mine")
        with pytest.raises(Forbidden):
            other.audit(admin.namespace)
        with pytest.raises(Forbidden):
            other.put_subscription(submitter.namespace, "theirs", mode="pull")
        with pytest.raises(Forbidden):
            other.audit(submitter.namespace)
    (entry,) = client.audit(admin.namespace, resource_kind="subscription").items
    assert (entry.action, entry.actor, entry.reason) == (
        "subscription.create",
        "e2e",
        "billing wants it",
    )


def test_pulling_a_push_subscription_is_a_conflict(
    admin: Tenant, client: Client, server: Server
) -> None:
    client.put_subscription(
        admin.namespace,
        "pushed",
        mode="push",
        url="http://127.0.0.1:9/",
        secret_ref=secret_file(server, admin.namespace, new_secret()),
    )
    with pytest.raises(Conflict, match="push subscription"):
        client.pull_events(admin.namespace, "pushed")


def test_the_cli_declares_pulls_and_acknowledges(admin: Tenant, client: Client) -> None:
    env = admin.env()
    put = orbit("subscription", "put", "cli", "--outcome", "CANCELLED", "-o", "json", env=env)
    assert put.returncode == 0, put.stderr
    task_id = cancelled_task(client, admin.namespace)

    pulled = orbit("subscription", "pull", "cli", "--ack", env=env)
    assert pulled.returncode == 0, pulled.stderr
    (line,) = pulled.stdout.splitlines()
    assert json.loads(line)["task_id"] == task_id
    assert orbit("subscription", "pull", "cli", env=env).stdout == ""
    listed = json.loads(orbit("subscription", "list", "-o", "json", env=env).stdout)
    assert listed["items"][0]["deliveries"]["DELIVERED"] == 1


def test_the_async_client_pulls_acks_and_reads_the_audit_trail(
    admin: Tenant, client: Client
) -> None:
    async def scenario() -> tuple[list[str], dict[str, str], list[str]]:
        async with AsyncClient(admin.server.url, token=admin.token) as aclient:
            await aclient.put_subscription(admin.namespace, "async", mode="pull")
            cancelled_task(client, admin.namespace)
            batch = await aclient.pull_events(admin.namespace, "async")
            ids = [e.id for e in batch.events]
            acked = await aclient.ack_events(admin.namespace, "async", ids)
            actions = [a.action async for a in aclient.iter_audit(admin.namespace, page_size=1)]
            return ids, acked, actions

    ids, acked, actions = asyncio.run(scenario())
    assert len(ids) == 1 and acked == {ids[0]: "acked"}
    assert actions == ["task.cancel", "subscription.create"]
