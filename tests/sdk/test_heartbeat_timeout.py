"""A heartbeat that hangs (a connection the server side never answers, e.g. to a replica that
was killed again while starting) is given up after the beat interval, not the client's whole
timeout: the next beat goes out on time, and a lease granted only a short grace after an outage
is renewed within it (seen in the chaos run)."""

from __future__ import annotations

import httpx
import pytest

from orbit_sdk import Worker
from orbit_sdk._heartbeat import Heartbeater
from orbit_sdk._transport import Call


def _beat_timeout(heartbeat_interval: float | None) -> float | None:
    worker = Worker(
        "http://orbit.test",
        namespace="shop",
        heartbeat_interval=heartbeat_interval,
        transport=httpx.MockTransport(lambda request: httpx.Response(200, json={})),
    )
    sent: list[Call] = []

    def send(call: Call) -> httpx.Response:
        sent.append(call)
        return httpx.Response(200, json={"results": []})

    worker.send = send  # type: ignore[method-assign]
    Heartbeater(worker).beat()
    assert len(sent) == 1
    return sent[0].timeout


@pytest.mark.parametrize(("interval", "timeout"), [(1.0, 2.0), (5.0, 5.0), (10.0, 10.0)])
def test_a_beat_is_given_up_after_its_interval(interval: float, timeout: float) -> None:
    assert _beat_timeout(interval) == timeout


def test_a_beat_of_the_server_s_default_interval_keeps_the_client_timeout() -> None:
    assert _beat_timeout(None) == 10.0  # no session yet: the server's default interval (10 s)
