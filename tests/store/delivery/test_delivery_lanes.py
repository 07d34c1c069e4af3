"""A webhook receiver that hangs in one namespace does not hold back another namespace's
deliveries (ORBIT.md §3 "Per-item isolation in loops"; seed §6.2): the sender serves namespaces
in lanes of their own, each subscription's batch through its lane's own send slots."""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from orbit.engines import deliveries
from orbit.engines.egress import EgressPolicy
from orbit.metrics.server import Metrics
from orbit_store.delivery.model import PushResult
from orbit_store.recovery.verify import verify

from ..drivers.delivery_driver import DeliveryDriver
from ..drivers.pulse_driver import PulseDriver

PATIENCE_SECONDS = 60  # how long the test waits for what must happen, not a measured figure


@pytest.fixture
def two_namespaces(
    isolated_engine: sa.Engine, tmp_path: Path
) -> Iterator[tuple[DeliveryDriver, DeliveryDriver]]:
    """A (first by name) and B, each with its own push subscription and secret."""
    drivers = []
    for prefix in ("a", "b"):
        pulse = PulseDriver(isolated_engine, namespace=f"{prefix}-{uuid.uuid4().hex[:8]}")
        (tmp_path / pulse.namespace).mkdir()
        secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
        (tmp_path / pulse.namespace / "hook-secret").write_text(secret)
        drivers.append(DeliveryDriver(pulse))
    yield drivers[0], drivers[1]
    with isolated_engine.connect() as conn:
        report = verify(conn)
    assert report.clean, {k: v for k, v in report.as_dict()["checks"].items() if v["violations"]}


def test_a_receiver_that_hangs_in_one_namespace_does_not_hold_back_anothers(
    two_namespaces: tuple[DeliveryDriver, DeliveryDriver], tmp_path: Path
) -> None:
    a, b = two_namespaces
    a.subscribe("hangs", "push")
    b.subscribe("answers", "push")
    a.succeeded_task()
    b.succeeded_task()
    (hanging,) = a.deliveries("hangs")
    release, b_received = threading.Event(), threading.Event()

    def receive(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content)["id"] == hanging.event_id:
            release.wait(PATIENCE_SECONDS)  # a receiver that answers late
        else:
            b_received.set()
        return httpx.Response(204)

    sender = deliveries.WebhookSender(
        a.pulse.engine,
        Metrics(a.pulse.engine),
        tmp_path,
        egress=EgressPolicy.parse(["127.0.0.0/8"]),  # the driver's URLs are on loopback
        transport=httpx.MockTransport(receive),
    )
    report: list[deliveries.PassReport] = []
    sending = threading.Thread(target=lambda: report.append(sender.run_pass()))
    sending.start()
    try:
        assert b_received.wait(PATIENCE_SECONDS), "B's delivery waited for A's receiver"
    finally:
        release.set()
        sending.join()
        sender.close()
    assert report[0].results == {PushResult.DELIVERED: 2}
    assert [d.state for d in b.deliveries("answers")] == ["DELIVERED"]
    assert [d.state for d in a.deliveries("hangs")] == ["DELIVERED"]
